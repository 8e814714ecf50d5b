"""The shape of the code, read from its own source: imports go down the layers that
docs/architecture.md states, no module imports form a cycle (imports inside functions counted),
and no function takes more than 7 parameters (typer commands and the diff kernels aside)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("evalkit", "metrics", "analyses")
MAX_PARAMETERS = 7


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _functions(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node


def _commands(tree: ast.Module) -> set[str]:
    """The names a cli module exports (its typer commands)."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets):
            return {ast.literal_eval(e) for e in node.value.elts}
    return set()


def test_no_function_takes_more_than_seven_parameters():
    wide = []
    for name, path in _modules().items():
        if name in ("evalkit.diff_kernels", "evalkit.diff_ckernel"):  # kernels: one argument per buffer
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        commands = _commands(tree) if name.split(".")[-1].startswith("cli") else set()
        for fn in _functions(tree):
            args = fn.args
            names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs) if a.arg not in ("self", "cls")]
            if len(names) > MAX_PARAMETERS and fn.name not in commands:
                wide.append(f"{path.relative_to(ROOT)}:{fn.lineno} {fn.name} ({len(names)})")
    assert not wide, "bundle the parameters into a small dataclass: " + ", ".join(wide)
