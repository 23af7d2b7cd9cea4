"""The package's import layers (docs/ARCHITECTURE.md), checked on the source itself.

Every import statement counts, lazy ones inside functions included; only imports under
``if TYPE_CHECKING:`` are left out (they never run). A cycle anywhere, or a module that
imports a layer above its own, fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "pytest_infperf"

#: Lowest layer first. A module may import its own layer and the layers below.
LAYERS: dict[str, tuple[str, ...]] = {
    "core": (
        "options",
        "results",
        "fmt",
        "stats",
        "compare",
        "pooled",
        "drift",
        "gpu",
        "environment",
        "fsutil",
        "settings",
        "keys",
    ),
    "measurement": ("memory", "timing", "backends", "bench", "hf"),
    "storage": (
        "gitinfo",
        "baseline",
        "compact",
        "index",
        "source",
        "branch",
        "changepoint",
        "history",
        "exports",
    ),
    "judge": ("judge", "accept"),
    "presentation": ("report", "markdown", "htmlreport", "comment"),
    "run": ("context",),
    "modes": ("protocol", "abworker", "ab", "modes"),
    "plugins": ("collector", "artifacts", "terminal", "xdist", "fixture"),
    "entry": ("plugin", "cli", "__init__", "__main__"),
}
LAYER_OF = {module: rank for rank, (_, mods) in enumerate(LAYERS.items()) for module in mods}
NAMES = list(LAYERS)


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE).with_suffix("")
    parts = rel.parts
    return parts[0] if parts[0] == "backends" else ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(path: Path) -> set[str]:
    """Top-level package modules imported by ``path`` (relative or absolute)."""
    tree = ast.parse(path.read_text(), str(path))
    found: set[str] = set()
    package_depth = len(path.relative_to(PACKAGE).parts) - 1

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for orelse in child.orelse:
                    visit(orelse)
                continue
            if isinstance(child, ast.ImportFrom):
                if child.level:
                    # level 1 is the module's own package, each further level one up
                    up = child.level - 1
                    if up > package_depth:
                        continue
                    anchor = list(path.relative_to(PACKAGE).parts[:-1][: package_depth - up])
                    full = anchor + (child.module.split(".") if child.module else [])
                    if full:
                        found.add(full[0])
                    else:
                        found.update(alias.name for alias in child.names)
                elif child.module and child.module.split(".")[0] == "pytest_infperf":
                    parts = child.module.split(".")
                    if len(parts) > 1:
                        found.add(parts[1])
                    else:
                        found.update(alias.name for alias in child.names)
            elif isinstance(child, ast.Import):
                for alias in child.names:
                    parts = alias.name.split(".")
                    if parts[0] == "pytest_infperf" and len(parts) > 1:
                        found.add(parts[1])
            visit(child)

    visit(tree)
    return found


def import_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = _module_name(path)
        deps = {d for d in _imports(path) if d != name}
        graph.setdefault(name, set()).update(deps)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def test_no_import_cycles() -> None:
    assert _cycles(import_graph()) == []


def test_every_module_has_a_layer() -> None:
    assert sorted(set(import_graph()) - set(LAYER_OF)) == []


def test_imports_only_go_down() -> None:
    upward = [
        f"{module} ({NAMES[LAYER_OF[module]]}) imports {dep} ({NAMES[LAYER_OF[dep]]})"
        for module, deps in sorted(import_graph().items())
        for dep in sorted(deps)
        if module in LAYER_OF and dep in LAYER_OF and LAYER_OF[dep] > LAYER_OF[module]
    ]
    assert upward == []


def test_the_ab_worker_is_a_leaf() -> None:
    """Like xdist's remote.py: the base side imports the protocol, measurement and the
    stash keys, nothing that runs the controller's session."""
    allowed = {"protocol", "keys", "timing", "bench", "results", "backends", "options"}
    assert import_graph()["abworker"] <= allowed


#: Where an import of a package module may sit inside a function: the modules pytest loads
#: at start-up (they keep numpy, scipy and git off it), the ``infperf`` command (its
#: sub-commands pull in numpy, scipy or matplotlib only when run) and the backend
#: dispatcher (torch and onnxruntime only for models that need them).
LAZY_ALLOWED = {
    "plugin",
    "context",
    "modes",
    "collector",
    "artifacts",
    "terminal",
    "xdist",
    "cli",
    "backends",
}


def test_lazy_imports_are_only_for_start_up() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = _module_name(path)
        if name in LAZY_ALLOWED:
            continue
        tree = ast.parse(path.read_text())
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.ImportFrom) and node.level > 0:
                    found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {fn.name}")
    assert found == []
