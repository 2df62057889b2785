"""Every test the README names as a promise's proof exists: a renamed or deleted test cannot leave
a claim pointing at nothing."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _defined() -> tuple[set[str], set[str]]:
    files, functions = set(), set()
    for path in (REPO / "tests").rglob("*.py"):
        files.add(path.name)
        functions.update(re.findall(r"^\s*def (test_\w+)", path.read_text(), re.M))
    return files, functions


def test_every_test_the_readme_names_exists() -> None:
    text = (REPO / "README.md").read_text()
    files, functions = _defined()
    named_files = set(re.findall(r"\b(test_\w+\.py)\b", text))
    named_functions = {n for n in re.findall(r"\b(test_\w+)\b(?!\.py)", text) if not n.endswith("_py")}
    assert named_files, "the README names its tests"
    assert named_files <= files, sorted(named_files - files)
    missing = {n for n in named_functions - functions if f"{n}.py" not in files}
    assert not missing, sorted(missing)
