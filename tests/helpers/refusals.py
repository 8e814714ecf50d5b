"""The check behind every bad-input table: one line, exit 2, no traceback, nothing written."""

from __future__ import annotations

from pathlib import Path


def fill(arg: str, values: dict) -> str:
    """`{name}` placeholders of a table row replaced by the fixture's values."""
    for key, value in values.items():
        arg = arg.replace("{" + key + "}", str(value))
    return arg


def snapshot(root: Path) -> dict:
    """Every file under `root` by relative path, with its bytes."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(Path(root).rglob("*")) if p.is_file()}


def assert_refused(invoke, fragment: str, root: Path) -> None:
    """`invoke()` (a CliRunner call) exits 2 with one line `error: ...` holding `fragment`, and
    every file under `root` is as before: none changed, none added, no folder left behind."""
    files, folders = snapshot(root), sorted(p for p in Path(root).rglob("*") if p.is_dir())
    result = invoke()
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output, result.output
    lines = result.output.strip("\n").splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), result.output
    assert fragment in result.output, result.output
    after = snapshot(root)
    assert {k: v for k, v in after.items() if k in files} == files, "a file was changed"
    assert set(after) == set(files), f"written: {sorted(set(after) - set(files))}"
    assert sorted(p for p in Path(root).rglob("*") if p.is_dir()) == folders, "a folder was left behind"
