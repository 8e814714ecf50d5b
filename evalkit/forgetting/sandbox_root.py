"""The sandbox's launcher (see `evalkit.forgetting.sandbox`, layers 3 and 5): run as a script.

    python -I -S sandbox_root.py '{"root": true, "scratch_mb": 64, "subreaper": true}' <ready fd> \\
        <worker script> <worker args...>

It makes itself a child subreaper (prctl: the attribute survives exec, ctypes
does not) and, when asked (evalkit is root), moves into a private root before
it exec's the worker, so that the worker and every process it forks see only:

- the interpreter (`sys.executable`, resolved), the directories of its
  standard library (`sys.path` under `-I -S`) and of the shared libraries
  mapped into this process (libc, libpython, libffi: their directory holds
  the rest, e.g. libcrypto for hashlib), /etc/ld.so.cache, /usr/lib/locale,
  and the real ones of /lib, /lib64, /usr/lib64 (the symlinks among them
  are made again): read-only binds at the same paths. Any `site-packages` or
  `dist-packages` in them is covered by an empty read-only tmpfs.
- the worker's script, at WORKER_PATH (read-only).
- /dev/null, zero, full, random, urandom (binds), /dev/fd and /dev/std*.
- a fresh /proc with hidepid=invisible: a process that is not root sees only
  its own uid's processes (Linux >= 5.8: an older kernel refuses the option,
  and then there is no private root).
- scratch: /tmp, /var/tmp, /dev/shm, each a fresh tmpfs of `scratch_mb` MiB
  (nosuid, nodev, noexec), which evalkit empties after every program.

The root itself is a read-only tmpfs; the host's root is detached
(pivot_root), not only out of sight. It is built in new mount, network and
IPC namespaces (every mount made private first, so nothing propagates back
to the host; the network has only a loopback, down; IPC_LIMITS, set through
the fresh /proc, let no System V IPC object or POSIX message queue be made),
on a tmpfs mounted at STAGE; the binds' sources are opened before STAGE is
covered. It writes one JSON line on <ready fd>: {"root": true}, or
{"root": false, "why": ...} when not asked or when the kernel refused a step
before the pivot (the stage is then detached: the worker sees the host's
files, as without this layer, though still without network once the
namespaces were made), closes it and exec's the worker with the
subreaper flag (1/0) as its last argument. Only the standard library: it runs
under `-I -S`, as the worker does.
"""
import glob
import json
import os
import sys

try:
    import ctypes

    LIBC = ctypes.CDLL(None, use_errno=True)
except (ImportError, OSError):  # an interpreter built without ctypes: no subreaper, no private root
    LIBC = None

STAGE = "/tmp"  # where the new root is built, in the new namespace only
WORKER_PATH = "/evalkit/sandbox_worker.py"
SCRATCH = ("/tmp", "/var/tmp", "/dev/shm")
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
DEVICE_LINKS = {"/dev/fd": "/proc/self/fd", "/dev/stdin": "/proc/self/fd/0", "/dev/stdout": "/proc/self/fd/1",
                "/dev/stderr": "/proc/self/fd/2"}
LIBRARY_ROOTS = ("/lib", "/lib64", "/lib32", "/libx32", "/usr/lib64", "/usr/lib32", "/usr/libx32")
SYSTEM_FILES = ("/etc/ld.so.cache", "/usr/lib/locale")
# System V shared memory, semaphores and message queues, POSIX message queues: none at all.
IPC_LIMITS = {"kernel/shmmni": "0", "kernel/msgmni": "0", "kernel/sem": "0 0 0 0", "fs/mqueue/queues_max": "0"}
PACKAGE_DIRS = ("site-packages", "dist-packages", "python3*/site-packages", "python3*/dist-packages")
CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWNET, MNT_DETACH = 0x20000, 0x8000000, 0x40000000, 2
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = (
    1, 2, 4, 8, 32, 4096, 16384, 1 << 18)
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "loongarch64": 41, "ppc64le": 203, "ppc64": 203,
                  "s390x": 217, "i686": 217, "i386": 217, "armv7l": 218, "armv6l": 218}


def call(what, result):
    """`result` of a libc call; OSError naming `what` when it is -1."""
    if result == -1:
        number = ctypes.get_errno()
        raise OSError(number, f"{what}: {os.strerror(number)}")
    return result


def mount(source, target, kind, flags, data=None):
    args = [None if text is None else text.encode() for text in (source, target, kind)]
    call(f"mount {kind or source} on {target}",
         LIBC.mount(*args, ctypes.c_ulong(flags), None if data is None else data.encode()))


def mapped_libraries():
    """Shared objects mapped into this process (from /proc/self/maps)."""
    found = set()
    with open("/proc/self/maps") as fh:
        for line in fh:
            fields = line.split(None, 5)
            path = fields[5].strip() if len(fields) == 6 else ""
            if path.startswith("/") and ".so" in os.path.basename(path) and not path.endswith("(deleted)"):
                found.add(path)
    return found


def outermost(paths):
    """`paths` without those inside another one, sorted."""
    kept = []
    for path in sorted(paths):
        if not any(path == top or path.startswith(top.rstrip("/") + "/") for top in kept):
            kept.append(path)
    return kept


def plan():
    """(read-only binds, package folders to cover, symlinks to make again) for the root."""
    wanted = {os.path.realpath(sys.executable)}
    wanted.update(os.path.realpath(p) for p in sys.path if os.path.isdir(p))
    wanted.update(os.path.dirname(os.path.realpath(p)) for p in mapped_libraries())
    wanted.update(p for p in LIBRARY_ROOTS if os.path.isdir(p) and not os.path.islink(p))
    wanted.update(p for p in SYSTEM_FILES if os.path.exists(p))
    for path in wanted:
        for top in (*SCRATCH, "/proc", "/dev", os.path.dirname(WORKER_PATH)):
            if path == top or path.startswith(top + "/"):
                raise OSError(f"{path} is needed inside the root but lies under {top}, which the root replaces")
    cover = {found for path in wanted if os.path.isdir(path) for pattern in PACKAGE_DIRS
             for found in glob.glob(os.path.join(path, pattern))
             if os.path.isdir(found) and not os.path.islink(found)}
    links = {p: os.readlink(p) for p in LIBRARY_ROOTS if os.path.islink(p)}
    return outermost(wanted), sorted(cover), links


def place(target, directory):
    """An empty folder (or file) at `target` to mount on, with its parents."""
    if directory:
        os.makedirs(target, 0o755, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), 0o755, exist_ok=True)
        os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o644))


def bind(source, target, read_only):
    mount(source, target, None, MS_BIND)
    if read_only:
        mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def populate(stage, worker, scratch_mb):
    """Everything the root holds (see the module doc), mounted under `stage`."""
    binds, cover, links = plan()
    sources = {path: os.open(path, os.O_PATH | os.O_CLOEXEC) for path in [*binds, worker, *DEVICES]}
    mount("tmpfs", stage, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m,nr_inodes=4096")
    for path in binds:
        place(stage + path, os.path.isdir(path))
        bind(f"/proc/self/fd/{sources[path]}", stage + path, read_only=True)
    for path in cover:
        mount("tmpfs", stage + path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=0755")
    for path, target in {**links, **DEVICE_LINKS}.items():
        os.makedirs(os.path.dirname(stage + path), 0o755, exist_ok=True)
        os.symlink(target, stage + path)
    place(stage + WORKER_PATH, False)
    bind(f"/proc/self/fd/{sources[worker]}", stage + WORKER_PATH, read_only=True)
    for path in DEVICES:
        place(stage + path, False)
        bind(f"/proc/self/fd/{sources[path]}", stage + path, read_only=False)  # devices: written to
    place(stage + "/proc", True)
    mount("proc", stage + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=invisible")
    for name, value in IPC_LIMITS.items():  # this IPC namespace's own limits: no object can be made
        with open(f"{stage}/proc/sys/{name}", "w") as fh:
            fh.write(value)
    for path in SCRATCH:
        place(stage + path, True)
        mount("tmpfs", stage + path, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              f"mode=1777,size={scratch_mb}m,nr_inodes={scratch_mb * 64}")
    mount(None, stage, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    for fd in sources.values():
        os.close(fd)


def pivot(stage):
    """Make `stage` the root and detach the old one (runc's pivot_root(".", ".") idiom)."""
    number = SYS_PIVOT_ROOT.get(os.uname().machine)
    if number is None:
        raise OSError(f"pivot_root: unknown system call number on {os.uname().machine}")
    os.chdir(stage)
    call("pivot_root", LIBC.syscall(number, b".", b"."))
    call("umount the old root", LIBC.umount2(b".", MNT_DETACH))
    os.chdir("/")


def private_root(worker, scratch_mb):
    """Move this process into its private root: None, or why it could not (then it still
    sees the host's files). A failure after the pivot is raised: the process is unusable."""
    if LIBC is None:
        return "ctypes is not available to this interpreter"
    try:
        call("unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC)", LIBC.unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC))
        mount(None, "/", None, MS_REC | MS_PRIVATE)
    except OSError as exc:
        return str(exc)
    try:
        populate(STAGE, worker, scratch_mb)
    except OSError as exc:
        LIBC.umount2(STAGE.encode(), MNT_DETACH)  # the host's /tmp again (nothing if never mounted)
        return str(exc)
    pivot(STAGE)
    return None


def main():
    asked, ready = json.loads(sys.argv[1]), int(sys.argv[2])
    worker, worker_args = sys.argv[3], sys.argv[4:]
    python = os.path.realpath(sys.executable)  # resolved before the pivot: the root has no symlink to it
    subreaper = asked["subreaper"] and LIBC is not None and LIBC.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    why = private_root(worker, asked["scratch_mb"]) if asked["root"] else "not asked (evalkit is not root)"
    if why is None:
        worker = WORKER_PATH
    os.write(ready, (json.dumps({"root": why is None, "why": why}) + "\n").encode())
    os.close(ready)
    os.execv(python, [python, "-I", "-S", worker, *worker_args, str(int(subreaper))])


if __name__ == "__main__":
    main()
