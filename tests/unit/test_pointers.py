"""Every pointer a shipped file gives its reader leads somewhere: a `docs/<page>.md#anchor` names a
page that exists and a heading on it, and a `README "<section>"` names a heading the README has.

Shipped files are what a platform team reads when it applies deploy/ or the chart: the manifests'
comments, the chart's values, the scheduler configuration, the Dockerfile, the code and the docs.
Pointers to README sections went stale when the README became a front door and its sections
moved to docs/; the comments kept naming them."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ("deploy", "config", "extender", "hack", "docs")
SUFFIXES = {".yaml", ".yml", ".json", ".py", ".sh", ".md", ".txt", ".tpl", ".toml"}
TOP_FILES = ("Dockerfile", "Makefile", "README.md", "pyproject.toml", "mkdocs.yml")

DOCS_POINTER = re.compile(r"(?<![\w/.])docs/((?:[\w.-]+/)*[\w.-]+\.md)(?:#([\w-]+))?")
# A README section named in quotes: README "Two ways to run", README: "Scale-down", README ("Identity"),
# hack/kube/README.md, "Adding the next minor" (that folder's README).
README_POINTER = re.compile(r"(?<![\w/.])((?:[\w.-]+/)*)README(?:\.md)?[:,]?[ \t]*\(?[ \t]*\"([^\"\n]+)\"")


def slug(heading: str) -> str:
    """The anchor MkDocs (Python-Markdown's toc) and GitHub give a heading: lower case, accents
    and punctuation dropped, spaces to hyphens."""
    text = unicodedata.normalize("NFKD", heading).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def headings(page: Path) -> list[str]:
    """A Markdown page's headings, outside fenced code blocks."""
    found, fenced = [], False
    for line in page.read_text().splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and (match := re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)):
            found.append(match.group(1))
    return found


def shipped_files() -> list[Path]:
    files = [ROOT / name for name in TOP_FILES if (ROOT / name).exists()]
    for folder in SHIPPED:
        files += sorted(p for p in (ROOT / folder).rglob("*") if p.is_file() and p.suffix in SUFFIXES)
    return [p for p in files if "site" not in p.relative_to(ROOT).parts[:1]]


def broken_pointers(path: Path) -> list[str]:
    text = path.read_text(errors="replace")
    where = path.relative_to(ROOT)
    broken = []
    for match in DOCS_POINTER.finditer(text):
        page, anchor = ROOT / "docs" / match.group(1), match.group(2)
        if "<" in match.group(0):
            continue
        if not page.exists():
            broken.append(f"{where}: {match.group(0)}: no such page")
        elif anchor and anchor not in {slug(h) for h in headings(page)}:
            broken.append(f"{where}: {match.group(0)}: no heading with that anchor")
    for match in README_POINTER.finditer(text):
        readme = ROOT / match.group(1) / "README.md"
        sections = {h.lower() for h in headings(readme)} if readme.exists() else set()
        if match.group(2).lower() not in sections:
            broken.append(f"{where}: {match.group(0)}: the README has no such section")
    return broken


def test_every_pointer_in_a_shipped_file_leads_somewhere() -> None:
    broken = [b for path in shipped_files() for b in broken_pointers(path)]
    assert not broken, "\n".join(broken)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("see docs/install/index.md#pick-your-clusters-minor", []),
        ("see docs/install/index.md#no-such-anchor", ["no heading with that anchor"]),
        ("see docs/install/nowhere.md", ["no such page"]),
        ('(README "Quick start")', []),
        ('(README "Scale-down")', ["the README has no such section"]),
        ('README: "find your cluster\'s minor"', ["the README has no such section"]),
        ("docs/<page>.md#anchor", []),
    ],
)
def test_the_pointer_check_itself(tmp_path: Path, text: str, expected: list[str]) -> None:
    probe = ROOT / "hack" / f".pointer-probe-{tmp_path.name}.md"
    probe.write_text(text)
    try:
        found = broken_pointers(probe)
    finally:
        probe.unlink()
    assert [b.rsplit(": ", 1)[-1] for b in found] == expected


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("Pick your cluster's minor", "pick-your-clusters-minor"),
        ("Identities, RBAC and admission", "identities-rbac-and-admission"),
        ("TLS: the extender in its own pods", "tls-the-extender-in-its-own-pods"),
        ("serve's flags", "serves-flags"),
    ],
)
def test_slug_is_the_anchor_mkdocs_gives(heading: str, anchor: str) -> None:
    assert slug(heading) == anchor


@given(st.text(max_size=60))
def test_slug_is_an_anchor_for_any_heading(heading: str) -> None:
    anchor = slug(heading)
    assert re.fullmatch(r"[\w-]*", anchor)
    assert anchor == anchor.lower() and " " not in anchor
