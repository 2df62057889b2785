"""hack/matrix.py: the support table (docs/install/versions.md) is made from a matrix run's results file."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from extender.kube.versions import SUPPORTED_MINORS

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def matrix():
    spec = importlib.util.spec_from_file_location("hack_matrix", ROOT / "hack" / "matrix.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fake_run() -> dict:
    rows = []
    for i, minor in enumerate(SUPPORTED_MINORS):
        rows.append(
            {
                "minor": minor,
                "pinned": f"v{minor}.{i}",
                "build_seconds": 0.1 if i == 0 else 301.0,
                "build_ok": True,
                "e2e_exit": 0 if i < 2 else 1,
                "e2e_seconds": 330.0,
                "counts": {"passed": 60 if i < 2 else 59, "failed": 0 if i < 2 else 1},
                "scope": "all" if i == 0 else "version-sensitive",
            }
        )
    return {"measured": "2026-01-01 00:00 UTC", "machine": "2 cores", "seconds": 1500.0, "minors": rows}


def test_table_has_a_row_per_minor_with_image_overlay_result_and_time(matrix) -> None:
    text = matrix.table(fake_run())
    rows = [line for line in text.splitlines() if line.startswith(f"| {SUPPORTED_MINORS[0]}") or "| 1." in line]
    assert len(rows) == len(SUPPORTED_MINORS)
    newest, *_, oldest = rows
    assert f"registry.k8s.io/kube-scheduler:v{SUPPORTED_MINORS[0]}.0" in newest and "`deploy/`" in newest
    assert "60/60" in newest and "5m30s" in newest and "cached" in newest
    assert f"deploy/overlays/kube-{SUPPORTED_MINORS[-1]}/" in oldest and "59/60 (exit 1)" in oldest
    assert "5m01s" in oldest
    assert "25m00s" in text


def test_the_page_block_is_replaced_in_place(matrix, tmp_path: Path) -> None:
    page = tmp_path / "versions.md"
    page.write_text(f"before\n{matrix.BEGIN}\nold table\n{matrix.END}\nafter\n")
    matrix.update_page(page, "new table")
    assert page.read_text() == f"before\n{matrix.BEGIN}\nnew table\n{matrix.END}\nafter\n"


def test_the_support_page_has_the_block_and_make_support_table_writes_it(matrix) -> None:
    text = matrix.SUPPORT_PAGE.read_text()
    assert matrix.BEGIN in text and matrix.END in text
    assert matrix.SUPPORT_PAGE == ROOT / "docs" / "install" / "versions.md"
    makefile = (ROOT / "Makefile").read_text()
    assert "hack/matrix.py table --page docs/install/versions.md" in makefile


def test_the_table_says_which_scenarios_ran_where(matrix) -> None:
    rows = [line for line in matrix.table(fake_run()).splitlines() if line.startswith("| 1.")]
    assert "| all |" in rows[0]
    assert all(f"the {len(matrix.EVERY_MINOR)} version-sensitive modules" in row for row in rows[1:])


def test_every_minor_runs_the_version_sensitive_modules_and_the_newest_runs_all(matrix) -> None:
    """Each listed module exists and says why it is there; the newest minor runs tests/e2e whole."""
    assert matrix.scenarios_for(SUPPORTED_MINORS[0]) == ["tests/e2e"]
    for minor in SUPPORTED_MINORS[1:]:
        assert matrix.scenarios_for(minor) == sorted(matrix.EVERY_MINOR)
    for module, why in matrix.EVERY_MINOR.items():
        assert (ROOT / module).is_file(), module
        assert len(why) > 20, module
    assert "tests/e2e/test_autoscaling.py" not in matrix.EVERY_MINOR  # Karpenter: newest only


def test_every_e2e_module_is_classified_once_with_its_reason(matrix) -> None:
    """A new e2e module is in neither list until someone decides whether its outcome can depend on
    the minor: until then this fails, so a version-dependent scenario cannot drop out of the older
    minors' runs unnoticed."""
    modules = {p.relative_to(ROOT).as_posix() for p in (ROOT / "tests" / "e2e").glob("test_*.py")}
    both = set(matrix.EVERY_MINOR) & set(matrix.NEWEST_ONLY)
    assert not both, f"in both EVERY_MINOR and NEWEST_ONLY: {sorted(both)}"
    unclassified = modules - set(matrix.EVERY_MINOR) - set(matrix.NEWEST_ONLY)
    assert not unclassified, (
        f"e2e modules in neither hack/matrix.py EVERY_MINOR nor NEWEST_ONLY: {sorted(unclassified)}; "
        "add each to one, with the reason"
    )
    stale = (set(matrix.EVERY_MINOR) | set(matrix.NEWEST_ONLY)) - modules
    assert not stale, f"listed but not in tests/e2e: {sorted(stale)}"
    assert all(len(why) > 20 for why in matrix.NEWEST_ONLY.values())


def test_minors_side_by_side_share_one_machine_lock(matrix, tmp_path: Path, monkeypatch) -> None:
    """`run --jobs N` runs N minors at once; their modules must share one lock so a module marked
    `alone` is alone across the runs (tests/parallel.py reads PLACEMENT_TEST_LOCK)."""
    seen: list[tuple[str, str | None]] = []

    def fake_minor(minor, out, pytest_args, workers, log, env_extra):  # noqa: ANN001, ANN202
        seen.append((minor, env_extra.get("PLACEMENT_TEST_LOCK")))
        log.write_text("1 passed\n")
        return {
            "minor": minor,
            "pinned": "v0",
            "build_seconds": 0.0,
            "build_ok": True,
            "e2e_exit": 0,
            "counts": {"passed": 1},
            "e2e_seconds": 1.0,
            "scope": "version-sensitive",
        }

    monkeypatch.delenv("PLACEMENT_TEST_LOCK", raising=False)
    monkeypatch.setattr(matrix, "run_minor", fake_minor)
    assert matrix.run(list(SUPPORTED_MINORS[1:]), tmp_path, [], jobs=3, workers=1) == 0
    locks = {lock for _, lock in seen}
    assert sorted(m for m, _ in seen) == sorted(SUPPORTED_MINORS[1:])
    assert locks == {str(tmp_path / "machine.lock")}
