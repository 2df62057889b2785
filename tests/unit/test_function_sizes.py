"""No function in extender/ runs over 80 lines, so a reader sees each one whole: a long one is split
into named steps (serve's flags are registered in groups: listening, the placeable gate, decisions,
TLS, ...). The one exception is the flow solver's `_solve` (extender/engine/lookahead.py), one
network built and solved in one pass, whose docstring walks through it; any other exception must be
argued here, by name."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 80
# (path under the repository, function name): the functions allowed over LIMIT.
ALLOWED = {("extender/engine/lookahead.py", "_solve")}


def _long_functions() -> dict[tuple[str, str], int]:
    """Every function and method (nested ones too) over LIMIT lines, decorators included, by file."""
    found = {}
    for path in sorted((ROOT / "extender").rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), relative)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                length = node.end_lineno - first + 1
                if length > LIMIT:
                    found[(relative, node.name)] = length
    return found


def test_no_function_in_the_package_is_over_the_limit() -> None:
    over = {key: length for key, length in _long_functions().items() if key not in ALLOWED}
    assert not over, "over {} lines, split into named steps: {}".format(
        LIMIT, ", ".join(f"{path} {name} ({length})" for (path, name), length in sorted(over.items()))
    )


def test_each_allowed_exception_still_exists() -> None:
    # An exception left after its function shrank or moved would let a new long one in under its name.
    stale = ALLOWED - set(_long_functions())
    assert not stale, f"no longer over {LIMIT} lines, drop from ALLOWED: {sorted(stale)}"
