"""The package's layers, read from its imports: every import points down, and no two modules
import each other, directly or round a loop.

docs/architecture.md draws these layers; this test is what keeps the drawing true.
Imports inside functions count as much as those at the top of a module: a lazy import is still
an arrow a reader has to follow.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "extender"

# Lowest first. A module may import its own package and any package of a lower rank, never one of
# the same rank or above: the engine and the Kubernetes client know nothing of each other, the
# server and the operator commands are siblings over the cache.
RANK = {
    "limits": 0,
    "logs": 0,
    "metrics": 0,
    "api": 1,
    "engine": 2,
    "kube": 2,
    "state": 3,
    "server": 4,
    "ops": 4,
    "devcluster": 5,
    "ab": 6,
    "cli": 7,
    "__main__": 8,
}
FLAT = {"__init__", "__main__", "limits", "logs", "metrics"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imports_of(name: str) -> set[str]:
    """The extender modules `name` imports (a name imported from a package that is a module of
    its own counts as that module)."""
    path = MODULES[name]
    here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "extender":
                continue
            for alias in node.names:
                found.add(f"{target}.{alias.name}" if f"{target}.{alias.name}" in MODULES else target)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "extender")
    return found


GRAPH = {name: imports_of(name) for name in MODULES}


def layer(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_every_module_belongs_to_a_layer() -> None:
    """A new top-level module or package needs a place in RANK (and in docs/architecture.md's drawing)."""
    unplaced = sorted({layer(m) for m in MODULES} - set(RANK) - {"__init__"})
    assert not unplaced, f"not in a layer: {unplaced}"


def test_only_a_handful_of_modules_sit_flat() -> None:
    flat = {p.stem for p in PACKAGE.glob("*.py")}
    assert flat <= FLAT, f"flat modules outside the agreed few: {sorted(flat - FLAT)}"


def test_imports_only_point_down() -> None:
    upward = []
    for name, targets in GRAPH.items():
        for target in targets:
            here, there = layer(name), layer(target)
            if there == "__init__" or here == there:
                continue
            if RANK[there] >= RANK[here]:
                upward.append(f"{name} -> {target}")
    assert not upward, "imports that do not point down:\n" + "\n".join(sorted(upward))


def test_no_import_cycle() -> None:
    """Tarjan's strongly connected components; a package's own __init__ importing its modules is
    not a cycle with them (the modules import the package's names through it, after it loaded)."""

    def edges(name: str) -> set[str]:
        return {t for t in GRAPH[name] if not (name.startswith(t + ".") and MODULES[t].name == "__init__.py")}

    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges(v):
            if w not in index:
                visit(w)
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
                cycles.append(sorted(component))

    for name in sorted(GRAPH):
        if name not in index:
            visit(name)
    assert not cycles, f"import cycles: {cycles}"


def test_no_verb_function_is_longer_than_a_screen() -> None:
    """The verbs module answers the four verbs; what a verb needs beside the engine is a
    collaborator in its own module (gate answers, remedies, warnings, the uncached-node grace,
    the bind re-check, preemption), so every function here reads on one screen."""
    tree = ast.parse((PACKAGE / "server" / "verbs.py").read_text())
    long = [
        f"{node.name}: {node.end_lineno - node.lineno + 1} lines"
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and node.end_lineno - node.lineno + 1 > 40  # type: ignore[operator]
    ]
    assert not long, long


def test_outside_the_engine_only_its_exports_and_its_two_readers() -> None:
    """The engine's interface is what extender/engine/__init__.py exports, plus `checker` and
    `implied` (read by audit, adopt and the gate). Its other modules may change freely."""
    reached = []
    for path in PACKAGE.rglob("*.py"):
        name = module_name(path)
        if layer(name) == "engine":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                parts = node.module.lstrip(".").split(".")
                if "engine" in parts and parts.index("engine") < len(parts) - 1:
                    inner = parts[parts.index("engine") + 1]
                    if inner not in ("checker", "implied"):
                        reached.append(f"{name}: {node.module}")
    assert not reached, reached
