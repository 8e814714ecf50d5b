"""One writer per folder: an advisory lock the kernel drops when the process dies.

    with locked(out):       # another process gets one line naming the holder's pid
        ...                 # a failure that wrote nothing leaves no folder and no lock file

Taking a folder that evalkit has locked before (its `.lock` is there) also removes the temporary
files its earlier writers left when they were killed (`evalkit.jsonio.sweep_dead_temps`: only
those whose writer's pid no longer runs): the folder is then as the killed writer's last finished
write left it, and the rerun goes on from there.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from evalkit.errors import UsageError
from evalkit.jsonio import sweep_dead_temps, write_failure

__all__ = ["FolderLock", "LOCK", "locked"]

LOCK = ".lock"


_HELD: dict = {}  # lock file -> [open file, holders in this process]


class FolderLock:
    """One writer process per folder: an advisory `flock` on `folder/.lock`, held until every
    holder in this process has released it (`release()`, or the object going away) or the
    process ends: the kernel drops it, so no stale lock survives a SIGKILL. Another process
    gets one line naming the holder's pid. Within a process the lock is shared (a resumed
    run reopening its own folder)."""

    def __init__(self, folder: Path):
        folder = Path(folder)
        self.held, self.made, self.file_created = False, [], False
        try:
            self.path = (folder / LOCK).resolve()
            if self.path not in _HELD:  # held here already: shared, the folder left as it is
                self.made = [parent for parent in (folder, *folder.parents) if not parent.exists()]  # folder first
                folder.mkdir(parents=True, exist_ok=True)
                self.file_created = not self.path.exists()
        except OSError as exc:  # a full disk, a folder removed meanwhile (the working directory?)
            raise UsageError(f"{folder}: cannot be made ({write_failure(exc)})") from None
        self.created = bool(self.made)
        self.found = _names(folder) if self.file_created else set()  # what the folder held before the lock
        if self.path not in _HELD:
            _HELD[self.path] = [_acquire(self.path, folder), 0]
            if not self.file_created:  # locked by evalkit before: what its killed writers left goes
                sweep_dead_temps(folder)
        _HELD[self.path][1] += 1
        self.held = True

    def release(self, *, remove_if_created: bool = False) -> None:
        """Drop this holder; `remove_if_created`: also remove the lock file and the folders this lock
        made, when nothing was written beside the lock since (a run refused before writing anything)."""
        if not self.held:
            return
        self.held = False
        entry = _HELD[self.path]
        entry[1] -= 1
        if entry[1] > 0:
            return
        del _HELD[self.path]
        if remove_if_created and self.file_created and _names(self.path.parent) <= self.found | {LOCK}:
            self.path.unlink(missing_ok=True)
            for made in self.made:  # the folder, then the parents this lock made: each only if empty
                try:
                    made.rmdir()
                except OSError:
                    break
        entry[0].close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.release()

    def __enter__(self) -> FolderLock:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


@contextlib.contextmanager
def locked(folder: Path):
    """`FolderLock(folder)` for the span of a `with`, taken before any work; when the body fails
    having written nothing there, the lock file and the folders the lock made are removed."""
    lock = FolderLock(folder)
    try:
        yield lock
    except BaseException:
        lock.release(remove_if_created=True)
        raise
    lock.release()


def _names(folder: Path) -> set[str]:
    try:
        return set(os.listdir(folder))
    except OSError:
        return set()


def _acquire(path: Path, folder: Path):
    import fcntl

    try:
        fh = open(path, "a+", encoding="utf-8")
    except OSError as exc:  # a folder, a dangling link, no permission
        raise UsageError(f"{path}: cannot be opened as evalkit's lock file ({exc.strerror}); remove it if no "
                         "evalkit process is writing this folder, or use another --out") from None
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.seek(0)
        holder = fh.read().strip() or "another process"
        fh.close()
        raise UsageError(f"{folder} is being written by process {holder} (evalkit); wait for it to end, "
                         "or use another --out") from None
    fh.seek(0)
    fh.truncate()
    fh.write(f"{os.getpid()}\n")
    fh.flush()
    return fh


