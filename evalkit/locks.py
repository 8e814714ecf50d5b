"""One writer per folder: an advisory lock the kernel drops when the process dies.

    with FolderLock(out):   # another process gets one line naming the holder's pid
        ...
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from evalkit.errors import UsageError

__all__ = ["FolderLock", "LOCK"]

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
        self.made = [parent for parent in (folder, *folder.parents) if not parent.exists()]  # folder first
        self.created = bool(self.made)
        folder.mkdir(parents=True, exist_ok=True)
        self.path = (folder / LOCK).resolve()
        self.file_created = not self.path.exists()
        self.held = False
        if self.path not in _HELD:
            _HELD[self.path] = [_acquire(self.path, folder), 0]
        _HELD[self.path][1] += 1
        self.held = True

    def release(self, *, remove_if_created: bool = False) -> None:
        """Drop this holder; `remove_if_created`: also remove the lock file and the folder when this
        lock made them (a run refused before writing anything)."""
        if not self.held:
            return
        self.held = False
        entry = _HELD[self.path]
        entry[1] -= 1
        if entry[1] > 0:
            return
        del _HELD[self.path]
        if remove_if_created and self.file_created:  # a refused run leaves nothing behind
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


