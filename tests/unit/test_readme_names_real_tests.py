"""Every test the README and the documentation (docs/**/*.md) name as a promise's proof exists: a
renamed or deleted test cannot leave a claim pointing at nothing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def _defined() -> tuple[set[str], set[str]]:
    files, functions = set(), set()
    for path in (REPO / "tests").rglob("*.py"):
        files.add(path.name)
        functions.update(re.findall(r"^\s*def (test_\w+)", path.read_text(), re.M))
    return files, functions


DEFINED = _defined()


def test_the_pages_are_found() -> None:
    names = {str(p.relative_to(REPO)) for p in PAGES}
    assert {"README.md", "docs/operations/failure-modes.md", "docs/security.md"} <= names, sorted(names)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_test_a_page_names_exists(page: Path) -> None:
    text = page.read_text()
    files, functions = DEFINED
    named_files = set(re.findall(r"\b(test_\w+\.py)\b", text))
    named_functions = {n for n in re.findall(r"\b(test_\w+)\b(?!\.py)", text) if not n.endswith("_py")}
    assert named_files <= files, sorted(named_files - files)
    missing = {n for n in named_functions - functions if f"{n}.py" not in files}
    assert not missing, sorted(missing)


def test_the_documentation_names_its_tests() -> None:
    """The check above has something to check: the pages still cite the tests behind their claims."""
    named = set()
    for page in PAGES:
        named |= set(re.findall(r"\b(test_\w+\.py)\b", page.read_text()))
    assert len(named) >= 40, sorted(named)
