"""Output folders: one contract for every command that writes its results into `--out`.

    with OutputFolder.claim(out, "diff", identity) as folder:   # before any work
        result = ...                                             # the work
        folder.publish({"diff.json": text, "tensors.csv": text})

`claim` probes the path (`probe_out`: not under a file, not a dangling or looping link,
writable, some free space), takes the folder's lock (one writer, evalkit.locks) and refuses a
non-empty folder that does not hold evalkit outputs only, naming a file that is not one. The
folder's mark, `.evalkit-outputs.json`, is written first: for each kind of output in the folder
(several commands may share one folder: entropy, length and groups do), its identity (what it
was made from), its files and its state. A folder made by the claim that gets no output (the
command failed before or during its work) is removed again when the claim ends.

`publish` writes the mark with state "writing" and the union of the old and new files, then
each file beside its final name and renames it into place, then the mark with the new files
(state "done"), then removes the old output's files that the new one lacks. A kill at any point
leaves a folder a rerun recognises as its own and replaces: nothing a user wrote is ever
overwritten or removed. If the folder cannot be written after the work (the disk filled, it
was removed or made read-only), the output is written to a sibling folder `<out>.rescued-N`
(else under the system's temporary folder) and the error says where.

Folders written before the mark existed are recognised by their main file (`LEGACY`).
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

from evalkit.errors import UsageError
from evalkit.jsonio import temp_path, temp_writer, write_atomic, write_failure
from evalkit.locks import LOCK, FolderLock

__all__ = ["OutputFolder", "claimed", "computed_into", "MARK", "probe_out", "MIN_FREE", "rescue"]

MARK = ".evalkit-outputs.json"
MIN_FREE = 1 << 20  # bytes free below which a folder is refused before the work (the first write)

# kind -> (patterns of its files, ((a main file of a folder written before the mark, a test of it), ...))
LEGACY: dict[str, tuple[tuple[str, ...], tuple[tuple[str, Callable[[Path], bool]], ...]]] = {}


def _json_with(key: str, value: str | None = None) -> Callable[[Path], bool]:
    def test(path: Path) -> bool:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        return isinstance(data, dict) and key in data and (value is None or data[key] == value)

    return test


def _report_page(path: Path) -> bool:
    try:
        head = path.read_text(encoding="utf-8", errors="replace")[:4000]
    except OSError:
        return False
    return "default-src 'none'; img-src data:" in head  # evalkit.report's Content-Security-Policy


def _journal_header(path: Path) -> bool:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.loads(fh.readline()).get("journal") == "forgetting"
    except (OSError, ValueError, AttributeError):
        return False


LEGACY.update({
    "report": (("index.html", "report.md", "figures/*.png", "tables/*.csv"), (("index.html", _report_page),)),
    "diff": (("diff.json", "tensors.csv", "overlap.csv"), (("diff.json", _json_with("kind", "diff")),)),
    "entropy": (("entropy.json", "entropy_*.csv"), (("entropy.json", _json_with("command", "entropy")),)),
    "length": (("length.json", "length_*.csv"), (("length.json", _json_with("command", "length")),)),
    "groups": (("groups.json", "groups_*.csv"), (("groups.json", _json_with("command", "groups")),)),
    "traces": (("traces.json", "traces_*.csv"), (("traces.json", _json_with("kind", "traces")),)),
    "tokens": (("tokens.json", "tokens_*.csv"), (("tokens.json", _json_with("kind", "tokens")),)),
    "forgetting": (("forgetting.json", "items.jsonl", "journal.jsonl"),
                   (("journal.jsonl", _journal_header), ("forgetting.json", _json_with("verdict")))),
})


def probe_out(out: Path, what: str = "--out", need: int = MIN_FREE) -> None:
    """Refuse, before any work and without creating anything, an output path that cannot be
    written: relative to a working directory that was removed, under a regular file, a dangling
    or looping link, not writable, or on a filesystem with less than `need` bytes free."""
    out = Path(out)
    if not out.is_absolute():
        try:
            os.getcwd()
        except FileNotFoundError:
            raise UsageError(f"{what} {out}: the working directory it is relative to was removed; cd to a folder "
                             "that exists, or give an absolute path") from None
    if out.is_symlink():
        try:
            out.resolve(strict=True)
        except FileNotFoundError:
            raise UsageError(f"{what} {out}: a link to {os.readlink(out)}, which does not exist") from None
        except (RuntimeError, OSError) as exc:
            raise UsageError(f"{what} {out}: a link that cannot be followed ({exc.__class__.__name__}: "
                             "a loop?)") from None
    probe = out
    while not os.path.lexists(probe):
        if probe.parent == probe:
            break
        probe = probe.parent
    try:
        probe.resolve(strict=True)
    except (RuntimeError, OSError):
        raise UsageError(f"{what} {out}: {probe} is a link that cannot be followed") from None
    if probe.exists() and not probe.is_dir():
        raise UsageError(f"{what} {out}: {probe} is a file, not a folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise UsageError(f"{what} {out}: {probe} is not writable")
    try:
        free = shutil.disk_usage(probe).free
    except OSError:
        return  # not knowable here: the writes will say
    if free < need:
        raise UsageError(f"{what} {out}: only {free:,} bytes free on its filesystem; free some space or "
                         "use another --out")


def _read_mark(folder: Path) -> dict | None:
    path = folder / MARK
    if not path.is_file():
        return None
    try:
        mark = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"outputs": {}, "unreadable": True}
    if not isinstance(mark, dict) or not isinstance(mark.get("outputs"), dict):
        return {"outputs": {}, "unreadable": True}
    return mark


def _entries(folder: Path) -> list[str]:
    """Every file below `folder` (relative, '/'-separated), the lock and the mark left out."""
    found = []
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files):
            rel = os.path.relpath(os.path.join(root, name), folder).replace(os.sep, "/")
            if rel not in (LOCK, MARK):
                found.append(rel)
    return found


def _transient(rel: str) -> bool:
    """A temporary file of an atomic write (evalkit.jsonio.temp_path) that a live writer still holds
    (a dead writer's are removed when the folder is locked)."""
    return temp_writer(rel.rsplit("/", 1)[-1]) is not None


class OutputFolder:
    """One command's claim on an output folder (see the module docstring)."""

    def __init__(self, path: Path, kind: str, identity: dict, lock: FolderLock, mark: dict):
        self.path, self.kind, self.identity = path, kind, identity
        self.lock, self.mark = lock, mark
        self.created = lock.created
        self.published = False

    @classmethod
    def claim(cls, out: Path, kind: str, identity: dict | None = None) -> OutputFolder:
        out = Path(out)
        probe_out(out)
        if out.exists() and not out.is_dir():
            raise UsageError(f"--out {out}: exists and is not a folder")
        lock = FolderLock(out)
        try:
            mark = cls._own(out, kind)
            mark["outputs"].setdefault(kind, {"files": [], "state": "claimed", "identity": identity or {}})
            try:
                cls._write_mark(out, mark)
            except OSError as exc:
                raise UsageError(f"--out {out}: cannot be written ({write_failure(exc)})") from None
        except BaseException:
            lock.release(remove_if_created=True)
            raise
        return cls(out, kind, identity or {}, lock, mark)

    @staticmethod
    def _own(out: Path, kind: str) -> dict:
        """The folder's mark, or a UsageError naming a file that is not an evalkit output."""
        mark = _read_mark(out) or {"outputs": {}}
        if mark.pop("unreadable", False):
            raise UsageError(f"--out {out}: its {MARK} is unreadable; remove it if the folder holds only "
                             "evalkit outputs, or use another --out")
        known = {f for entry in mark["outputs"].values() for f in entry.get("files", [])}
        legacy = {k: v for k, v in LEGACY.items() if k not in mark["outputs"]}
        for name, (patterns, mains) in legacy.items():  # a folder written before the mark
            if any((out / main).is_file() and test(out / main) for main, test in mains):
                files = [e for e in _entries(out) if any(fnmatch.fnmatch(e, p) for p in patterns)]
                mark["outputs"][name] = {"files": files, "state": "done", "identity": {}}
                known |= set(files)
        foreign = [e for e in _entries(out) if e not in known and not _transient(e)]
        if foreign:
            what = ", ".join(sorted(mark["outputs"])) or "no evalkit output"
            raise UsageError(f"--out {out}: folder holds {foreign[0]}, which is not an evalkit output "
                             f"(it holds {what}); nothing of a user is overwritten: use a new or empty --out")
        return mark

    @staticmethod
    def _write_mark(out: Path, mark: dict) -> None:
        write_atomic(out / MARK, lambda fh: (json.dump(mark, fh, indent=2, sort_keys=True), fh.write("\n")))

    def expect(self, names: list[str]) -> None:
        """Files this command appends to during its work (a resume journal): named in the mark
        before they are written, and kept by `publish`."""
        entry = self.mark["outputs"][self.kind]
        entry.update(files=sorted(set(entry["files"]) | set(names)), appended=sorted(names), state="writing",
                     identity=self.identity)
        self._write_mark(self.path, self.mark)

    def publish(self, files: Mapping[str, str | bytes]) -> list[Path]:
        """Write `files` (relative name -> text or bytes) as this kind's output; see the module
        docstring. Returns the paths written (in the rescue folder if the output folder failed)."""
        entry = self.mark["outputs"][self.kind]
        old, kept = list(entry.get("files", [])), list(entry.get("appended", []))
        try:
            entry.update(files=sorted(set(old) | set(files)), state="writing", identity=self.identity)
            self._write_mark(self.path, self.mark)
            written = _write_files(self.path, files)
            entry.update(files=sorted(set(files) | set(kept)), state="done")
            self._write_mark(self.path, self.mark)
        except OSError as exc:
            kept = rescue(self.path, files)
            raise UsageError(f"--out {self.path}: cannot be written ({write_failure(exc)}); the result is "
                             f"kept in {kept}") from None
        for stale in sorted(set(old) - set(files) - set(kept)):
            with contextlib.suppress(OSError):
                (self.path / stale).unlink(missing_ok=True)
        self.published = True
        return written

    def release(self) -> None:
        """End the claim; a folder this claim made and that got no output is removed."""
        entry = self.mark["outputs"].get(self.kind, {})
        if not self.published and entry.get("state") == "claimed":  # nothing of this kind was written
            self.mark["outputs"].pop(self.kind, None)
            with contextlib.suppress(OSError):
                if self.mark["outputs"]:
                    self._write_mark(self.path, self.mark)
                else:
                    (self.path / MARK).unlink(missing_ok=True)
        empty = self.path.is_dir() and not _entries(self.path)
        self.lock.release(remove_if_created=not self.published and self.created and empty)

    def __enter__(self) -> OutputFolder:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


@contextlib.contextmanager
def claimed(out: Path | None, kind: str, identity: dict | None = None):
    """`OutputFolder.claim` for the span of a `with`, or None when there is no --out."""
    if out is None:
        yield None
        return
    folder = OutputFolder.claim(out, kind, identity)
    try:
        yield folder
    finally:
        folder.release()


def computed_into(out: Path | None, kind: str, identity: dict, compute: Callable[[], dict],
                  files: Callable[[dict], Mapping[str, str | bytes]]) -> dict:
    """`compute()` under a claim of `out` (when given: claimed before the work), its result
    published there as `files(result)`; returns the result."""
    with claimed(out, kind, identity) as folder:
        result = compute()
        if folder is not None:
            folder.publish(files(result))
    return result


def _write_files(folder: Path, files: Mapping[str, str | bytes]) -> list[Path]:
    written = []
    for rel, data in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, bytes):
            tmp = temp_path(path)
            try:
                with open(tmp, "wb") as fh:
                    fh.write(data)
                    fh.flush()
                    os.fsync(fh.fileno())
                os.replace(tmp, path)
            finally:
                tmp.unlink(missing_ok=True)
        else:
            write_atomic(path, lambda fh, data=data: fh.write(data))
        written.append(path)
    return written


def rescue(out: Path, files: Mapping[str, str | bytes]) -> Path:
    """Write `files` (relative name -> text or bytes) into a new sibling folder of `out`,
    `<out>.rescued-XXXX`, else under the system's temporary folder; returns it. A UsageError when
    neither can hold them."""
    for parent in (out.parent, Path(tempfile.gettempdir())):
        try:
            folder = Path(tempfile.mkdtemp(prefix=f"{out.name}.rescued-", dir=parent))
        except OSError:
            continue
        try:
            _write_files(folder, files)
            return folder
        except OSError:
            shutil.rmtree(folder, ignore_errors=True)
    raise UsageError(f"--out {out}: cannot be written, and no rescue folder could hold the result "
                     "(the disk is full?)")
