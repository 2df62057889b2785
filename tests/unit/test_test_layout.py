"""`make test` collects the whole tree (unit and e2e together): a test module whose import name
another already has stops pytest at collection, before any test runs. That broke the README's
test command for a release while CI, which ran the folders separately, stayed green.

Two guards: every folder of test modules is a package (so `tests/unit/test_plan.py` and
`tests/e2e/test_plan.py` import as `unit.test_plan` and `e2e.test_plan`), and collecting the whole
tree, as `make test` does, succeeds.
"""

from __future__ import annotations

import re
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


# An assert bounding a measured time from above: `took < 1`, `frozen <= 2 * healthy`, ... A
# literal bound of a minute or more is a stall guard, not a measurement, and needs no mark.
TIMED_ASSERT = re.compile(
    r"assert [^\n]*?(?:monotonic\(\)\s*-\s*\w+|perf_counter\(\)\s*-\s*\w+|\btook\b|\belapsed\b|\.seconds\b"
    r"|\bfrozen\b|\blongest\[0\])\s*<=?\s*(?P<bound>[^,\n]+)"
)


def _measures_time(source: str) -> bool:
    for match in TIMED_ASSERT.finditer(source):
        bound = match.group("bound").strip()
        try:
            if float(bound) >= 60:
                continue
        except ValueError:
            pass  # a name or an expression: a measured bound
        return True
    return False


def test_every_module_that_bounds_a_measured_time_runs_alone() -> None:
    """Under `make test`'s workers a test runs beside others unless marked `alone` or timed inside
    `machine_alone()` (tests/parallel.py): a time it measures would then be the others' too, and its
    bound would fail at random. Every module asserting an upper bound on a measured time does one."""
    unmarked = [
        str(path.relative_to(TESTS))
        for path in sorted(TESTS.rglob("test_*.py"))
        if path != Path(__file__)
        and _measures_time(path.read_text())
        and not any(way in path.read_text() for way in ("pytest.mark.alone(", "machine_alone("))
    ]
    assert not unmarked, f"modules bounding a measured time without pytest.mark.alone: {unmarked}"


def test_the_timed_assert_finder_finds_what_it_must() -> None:
    assert _measures_time("    assert took < 1, 'x'\n")
    assert _measures_time("    assert frozen <= 2 * healthy and frozen_late <= 2 * healthy\n")
    assert _measures_time("    assert time.monotonic() - began < 1.0, 'no wait'\n")
    assert _measures_time("    assert longest[0] <= BOUND, 'held'\n")
    assert not _measures_time("    assert time.monotonic() - started < 300, 'stall'\n")
    assert not _measures_time("    assert time.monotonic() - started >= seconds\n")
