"""JSON on disk: strict values, atomic replacement, line-atomic appends, tolerant reads; the
one sha256 of a file's bytes.

    write_json_atomic(path, {"a": 1})      # readers see the old file or the new one, never a part
    append_jsonl(path, records)            # one write per line, fsync: a crash tears at most the last
    read_samples(path)                     # complete lines; a torn last line is ignored
    file_sha256(path)                      # hex digest, the file read in 4 MiB chunks
    sweep_dead_temps(folder)               # temporary files of writers no longer running, removed

Strict JSON: NaN and Inf are written as null, numpy scalars as Python numbers. A temporary file
carries its writer's pid (`.NAME.tmpPID`, `temp_path`): a kill between writing it and renaming it
leaves it behind, and the next writer of the folder (evalkit.locks) removes it once that pid is no
longer a running process; a live writer's temporary files, and every other file, are left alone.
"""

from __future__ import annotations

import errno
import hashlib
import json
import math
import os
import re
from collections.abc import Iterable
from pathlib import Path

from evalkit.errors import UsageError

__all__ = ["plain_json", "frame_records", "write_atomic", "json_text", "write_json_atomic", "jsonl_line", "append_jsonl",
           "read_jsonl", "read_samples", "split_lines", "cut_torn_line", "file_sha256", "REJECTED", "REPAIR_HINT",
           "temp_path", "temp_writer", "writer_running", "sweep_dead_temps", "write_failure"]

TEMP = re.compile(r"^\..+\.tmp([1-9][0-9]{0,6})$")  # `.NAME.tmpPID`: what temp_path names
PID_MAX = 1 << 22  # Linux's largest pid_max: a larger number names no process, so no writer of evalkit's


def temp_path(path: Path) -> Path:
    """Where an atomic write of `path` goes first: `.NAME.tmpPID` beside it, PID this process's."""
    path = Path(path)
    return path.with_name(f".{path.name}.tmp{os.getpid()}")


def temp_writer(name: str) -> int | None:
    """The pid in an evalkit temporary file's name (`temp_path`), or None for any other name."""
    match = TEMP.match(name)
    return int(match.group(1)) if match and int(match.group(1)) <= PID_MAX else None


def writer_running(pid: int) -> bool:
    """Whether a process with this pid runs (a writer of a temporary file, or a process that got its number)."""
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, as another user's process
        pass
    return True


def sweep_dead_temps(folder: Path) -> list[Path]:
    """Remove the temporary files under `folder` (named as `temp_path` names them) whose writer is
    no longer a running process, and return them. Only regular files with such a name are
    candidates; one whose pid runs (its writer, or a process that got its number) is left, as is
    every other file. Links are not followed."""
    removed = []
    for root, _dirs, files in os.walk(folder):
        for name in files:
            pid = temp_writer(name)
            if pid is None or writer_running(pid):
                continue
            path = Path(root, name)
            try:
                if path.is_symlink() or not path.is_file():
                    continue
                path.unlink()
            except OSError:  # gone meanwhile, or not ours to remove: left as it is
                continue
            removed.append(path)
    return removed


def write_failure(exc: OSError) -> str:
    """What an OSError from a write means for the user, in a few words with the fix."""
    code = exc.errno
    if code in (errno.ENOSPC, errno.EDQUOT):
        return f"{exc.strerror or 'No space left on device'}: free some space on its filesystem"
    if code == errno.ENOENT:
        return "it was removed while evalkit wrote it, or the folder it lies in (the working directory?)"
    if code in (errno.EROFS, errno.EACCES, errno.EPERM):
        return f"{exc.strerror or 'not writable'}: make it writable"
    return exc.strerror or str(exc)


def file_sha256(path: Path, digest=None) -> str:
    """The sha256 of a file's bytes (hex), read in 4 MiB chunks; given a hashlib `digest`, the
    bytes are added to it (after whatever it holds) and its hex digest is returned."""
    digest = digest or hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def plain_json(value):
    """Strict-JSON values: numpy scalars to Python, NaN/Inf to None (no bare `NaN` in a file)."""
    if isinstance(value, dict):
        return {k: plain_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain_json(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, str):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def frame_records(frame) -> list[dict]:
    """A DataFrame's rows as plain records at full float precision (pandas' `to_json` keeps 10
    digits, so a figure stored that way no longer equals the one computed)."""
    return plain_json(frame.to_dict(orient="records"))


def write_atomic(path: Path, write) -> None:
    """`write(fh)` into a temporary file beside `path` (text, UTF-8), fsync, then rename over
    `path`: readers see the old file or the new one, never a part."""
    path = Path(path)
    tmp = temp_path(path)
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def json_text(data: dict) -> str:
    """A JSON file's text as `write_json_atomic` writes it: strict (NaN/Inf as null), indented."""
    return json.dumps(plain_json(data), indent=2, sort_keys=False, default=str, allow_nan=False) + "\n"


def write_json_atomic(path: Path, data: dict) -> None:
    """Strict JSON (NaN/Inf written as null), replaced atomically."""
    text = json_text(data)
    write_atomic(path, lambda fh: fh.write(text))


def jsonl_line(record: dict) -> bytes:
    """One record as a strict-JSON line (UTF-8, newline-terminated), as every append writes it."""
    return (json.dumps(plain_json(record), ensure_ascii=False, allow_nan=False) + "\n").encode()


def append_jsonl(path: Path, records: Iterable[dict]) -> None:
    """Append JSON lines, one `write` each on an O_APPEND descriptor, then fsync: a crash
    tears at most the last line, which `read_samples` ignores. A short write (the disk filled
    mid-line) is continued, and fails with the OSError that stopped it: the part line it leaves is
    the last one, cut when the file is reopened."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        for record in records:
            line = memoryview(jsonl_line(record))
            while line:
                written = os.write(fd, line)
                if written == 0:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
                line = line[written:]
        os.fsync(fd)
    finally:
        os.close(fd)


def read_jsonl(path: Path) -> list[tuple[int, dict]]:
    """(line number, object) for every non-blank line of a user's JSONL file; a line that is not
    a JSON object, or a file that is not UTF-8, is a UsageError naming the place. Lines end at
    \n only: a carriage return or U+2028 inside a string is part of the string (JSON's control
    characters are accepted unescaped there, as most writers' readers do)."""
    from evalkit.errors import UsageError

    records = []
    try:
        with open(path, encoding="utf-8", newline="\n") as fh:
            for lineno, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line, strict=False)
                except json.JSONDecodeError as exc:
                    raise UsageError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from exc
                except RecursionError:
                    raise UsageError(f"{path}:{lineno}: nested too deeply to read") from None
                if not isinstance(record, dict):
                    raise UsageError(f"{path}:{lineno}: expected a JSON object")
                if "\\ud" in line.lower():  # an escaped surrogate: valid JSON, but a lone one is no text
                    try:
                        json.dumps(record, ensure_ascii=False).encode("utf-8")
                    except UnicodeEncodeError as exc:
                        raise UsageError(f"{path}:{lineno}: holds a lone surrogate ({exc.object[exc.start:exc.end]!a}), "
                                         "which is not text; fix the line") from None
                records.append((lineno, record))
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    return records


REJECTED = "samples.rejected.jsonl"


REPAIR_HINT = f"rerun with --repair to set it aside in {REJECTED} and sample it again"


def sample_problem(record: dict) -> str | None:
    """What is wrong with a samples.jsonl record (DESIGN.md's fields), or None."""
    from evalkit.tasks.base import OUTCOMES

    if not isinstance(record.get("problem_id"), str):
        return "no problem_id"
    index = record.get("sample_index")
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        return "no sample_index"
    if record.get("outcome") not in OUTCOMES:
        return f"outcome {record.get('outcome')!r} is not one of {', '.join(OUTCOMES)}"
    return None


def read_samples(path: Path, *, hint: str = REPAIR_HINT) -> list[dict]:
    """Complete lines of a samples file; a torn last line is ignored, a corrupt complete line (not
    a JSON record, or one without problem_id, sample_index or a known outcome) is a UsageError
    naming it (`evalkit passk --repair` sets such lines aside and resamples them)."""
    return read_records(path, hint=hint, check=sample_problem)


def read_records(path: Path, *, hint: str, check=None) -> list[dict]:
    """Complete lines of an append-only JSONL log; a torn last line is ignored, a corrupt complete
    line (not a JSON object, or one `check` finds a reason against) is a UsageError naming it."""
    good, bad = split_lines(path, check=check)
    if bad:
        number, raw = bad[0]
        why = "not a JSON record"
        try:
            why = (check(json.loads(raw)) if check else None) or why
        except (ValueError, AttributeError, RecursionError):
            pass
        raise UsageError(f"{path}:{number}: corrupt line ({why}); {hint}")
    return [record for _, record in good]


def split_lines(path: Path, check=None) -> tuple[list, list]:
    """([(line number, record)], [(line number, raw bytes)]) of the complete lines of a JSONL file;
    `check(record)`: a reason a record is bad (then it is listed with the raw lines), or None."""
    good, bad = [], []
    if not Path(path).exists():
        return good, bad
    with open(path, "rb") as fh:
        for number, raw in enumerate(fh, start=1):
            if not raw.endswith(b"\n"):
                break  # torn by a crash mid-write
            try:
                record = json.loads(raw)
                if not isinstance(record, dict) or (check is not None and check(record)):
                    raise ValueError
                good.append((number, record))
            except (ValueError, RecursionError):  # RecursionError: a line nested too deeply for the parser
                bad.append((number, raw))
    return good, bad


def cut_torn_line(path: Path) -> None:
    """Cut a JSONL file after its last newline: the part line a crash mid-write left is dropped
    before anything is appended after it."""
    path = Path(path)
    if not path.exists():
        return
    data = path.read_bytes()
    end = data.rfind(b"\n") + 1
    if end != len(data):
        with open(path, "r+b") as fh:
            fh.truncate(end)


