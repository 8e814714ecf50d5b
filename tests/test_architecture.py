"""The shape of the code, read from its own source: imports go down the layers that
docs/architecture.md states, no module imports form a cycle (imports inside functions counted),
and no function takes more than 7 parameters (typer commands and the diff kernels aside)."""

from __future__ import annotations

import ast
import fnmatch
import re
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


def _imports(name: str, path: Path, modules: dict) -> set[str]:
    """The modules of ours that `name` imports, at the top or inside functions (a package's
    `from P import m` names the submodule m)."""
    def known(dotted: str) -> str | None:
        while dotted and dotted not in modules:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    found = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {known(a.name) for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            found |= {known(f"{base}.{a.name}") if f"{base}.{a.name}" in modules else known(base) for a in node.names}
    return found - {None, name}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _layers() -> list[tuple[str, list[str]]]:
    """(layer, its path patterns), top first, from docs/architecture.md's table of layers."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    table = text[text.index("| layer |"):].split("\n\n")[0]
    rows = [line.split("|")[1:3] for line in table.splitlines()[2:]]
    return [(layer.strip(), re.findall(r"`([^`]+)`", paths)) for layer, paths in rows]


def _layer_of(name: str, path: Path, layers, root: Path = ROOT) -> int | None:
    """The row whose pattern names the module most closely (the longest pattern that matches)."""
    rel = str(path.relative_to(root))
    matches = [(len(p), i) for i, (_, patterns) in enumerate(layers) for p in patterns
               if (rel.startswith(p) if p.endswith("/") else fnmatch.fnmatch(rel, p))]
    return max(matches)[1] if matches else None


def test_every_module_has_a_layer_and_imports_go_down():
    layers, modules, graph = _layers(), _modules(), _graph()
    assert [name for name, _ in layers][0] == "cli" and len(layers) >= 8, layers
    where = {name: _layer_of(name, path, layers) for name, path in modules.items()}
    assert not [n for n, i in where.items() if i is None], "give these a row in docs/architecture.md's layers"
    up = [f"{m} ({layers[where[m]][0]}) imports {d} ({layers[where[d]][0]})"
          for m, deps in graph.items() for d in deps if where[d] < where[m]]
    assert not up, "imports go down the layers: " + "; ".join(sorted(up))


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other (Tarjan's strongly connected components)."""
    index, low, stack, on, cycles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while not component or component[-1] != v:
                component.append(stack.pop())
                on.discard(component[-1])
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return cycles


def test_no_import_cycle():
    cycles = _cycles(_graph())
    assert not cycles, f"modules importing each other (inside functions too): {cycles}"


def test_a_layer_violation_and_a_cycle_are_seen(tmp_path):
    """The checks read what they claim to: an import up and a cycle in made-up modules are found."""
    (tmp_path / "low.py").write_text("def f():\n    from high import g\n")
    (tmp_path / "high.py").write_text("from low import f\n")
    modules = {"low": tmp_path / "low.py", "high": tmp_path / "high.py"}
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    assert graph == {"low": {"high"}, "high": {"low"}}
    assert _cycles(graph) == [["high", "low"]]
    layers = [("top", ["high.py"]), ("bottom", ["*.py"])]
    assert [_layer_of(n, p, layers, tmp_path) for n, p in modules.items()] == [1, 0]


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
