"""A folder's lock held by another process, for the one-writer tests."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from pathlib import Path


@contextlib.contextmanager
def held_by_another_process(folder: Path):
    """A child process holding the folder's lock; yields its pid."""
    code = ("import sys, time; from evalkit.locks import FolderLock; lock = FolderLock(sys.argv[1]); "
            "print('locked', flush=True); time.sleep(120)")
    proc = subprocess.Popen([sys.executable, "-c", code, str(folder)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "locked"
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()
