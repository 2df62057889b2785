"""`make test` collects the whole tree (unit and e2e together): a test module whose import name
another already has stops pytest at collection, before any test runs. That broke the README's
test command for a release while CI, which ran the folders separately, stayed green.

Two guards: every folder of test modules is a package (so `tests/unit/test_plan.py` and
`tests/e2e/test_plan.py` import as `unit.test_plan` and `e2e.test_plan`), and collecting the whole
tree, as `make test` does, succeeds.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_every_folder_of_test_modules_is_a_package() -> None:
    folders = {p.parent for p in TESTS.rglob("test_*.py")} | {p.parent for p in TESTS.rglob("conftest.py")}
    folders.discard(TESTS)  # the root: its conftest puts it on sys.path for the shared helpers
    missing = sorted(str(f.relative_to(TESTS)) for f in folders if not (f / "__init__.py").exists())
    assert not missing, f"test folders without __init__.py (their modules can collide with another's): {missing}"


def test_import_names_of_test_modules_are_unique() -> None:
    """The import name pytest gives each module: its path from the first folder up that is not a
    package (tests/), dotted."""
    seen: dict[str, Path] = {}
    clashes = []
    for path in sorted(TESTS.rglob("*.py")):
        parts = [path.stem]
        folder = path.parent
        while (folder / "__init__.py").exists():
            parts.insert(0, folder.name)
            folder = folder.parent
        name = ".".join(parts)
        if name in seen and path.name != "__init__.py":
            clashes.append(f"{name}: {seen[name]} and {path}")
        seen[name] = path
    assert not clashes, clashes


def test_the_whole_tree_collects() -> None:
    """What `make test` runs first: every module of tests/ imported in one process."""
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", str(TESTS)],
        cwd=TESTS.parent,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "error" not in run.stdout.splitlines()[-1], run.stdout[-2000:]
