"""The why in words, the history in git: no file a reader gets cites the tracker, a work period or a
source document by number: "issue", "session" or "seed" followed by a number.

A reader has neither the tracker nor the index of source documents, so such a citation tells them
nothing: the text says the incident and its figure instead ("a restarted extender placed 6-20 pairs
against their cap") and names a document by what it is ("the NetEase Redis design",
"crl-scheduler"); git and the changelog keep the history.

Scanned: extender/, tests/, docs/, deploy/, hack/, config/, benchmarks/ (the recorded runs under
benchmarks/results/ too: their contents, and their file names, which say workload, commit and date),
README.md and BENCHMARKS.md. NOT_YET names a file still to be rewritten; add each once it is clean.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("extender", "tests", "docs", "deploy", "hack", "config", "benchmarks", "README.md", "BENCHMARKS.md")
NOT_YET: set[str] = set()
NOT_YET_UNDER: tuple[str, ...] = ()
# Case-insensitive: a docstring opening with the capitalised word and a number cites the tracker too.
# Across a line break too: wrapped prose and comments split "issue" from its number ("issue\n  53's").
CITATION = re.compile(r"issue[\s#]*[0-9]+|session[\s#]*[0-9]+|seeds?[\s#]+0[0-9]{2}", re.IGNORECASE)
BINARY = {".png", ".jpg", ".jpeg", ".gif", ".ico", ".gz", ".tgz", ".whl", ".pyc"}


def scanned_files() -> list[Path]:
    """Every text file under the scanned paths, minus the ones still to be rewritten."""
    files: list[Path] = []
    for entry in SCANNED:
        path = ROOT / entry
        candidates = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for candidate in candidates:
            relative = candidate.relative_to(ROOT).as_posix()
            if candidate.suffix in BINARY or "__pycache__" in candidate.parts:
                continue
            if relative in NOT_YET or relative.startswith(NOT_YET_UNDER):
                continue
            files.append(candidate)
    return files


def citations(text: str) -> list[tuple[int, str]]:
    """Where a text cites an issue, a work period or a seed by number: (line, the citation)."""
    return [(text.count("\n", 0, m.start()) + 1, " ".join(m.group(0).split())) for m in CITATION.finditer(text)]


def test_the_pattern_catches_each_kind_of_citation() -> None:
    # Each example is assembled, so that this module itself passes the grep it stands for.
    issue, session, seed = "issue", "session", "seed"
    assert citations(f"before {issue} 34 the filter") == [(1, f"{issue} 34")]
    assert citations(f"the end to end run (\n{issue}\n  53's second run)") == [(2, f"{issue} 53")]
    assert citations(f"# measured before {issue}\n# 34 the filter")
    assert citations(f'"""{issue.title()} 13 (b): minDomains')
    assert citations(f"measured in {session} 12") and citations(f"{session}12's report")
    assert citations(f"({seed} 002, appendix 2)") and citations(f"# {seed.title()} 003 (crl-scheduler)")
    assert citations(f"pair_5k_base_c09d8e4_{issue}53_{session}24.json")  # a recorded run's old name
    assert not citations("the NetEase Redis design, appendix 2; 6-20 pairs per restart")
    assert not citations("pair-5k_c09d8e4..5dddd5a_2026-11-28.json")


def test_no_scanned_file_cites_history_by_number() -> None:
    hits = []
    for path in scanned_files():
        hits += [f"{path.relative_to(ROOT)}: its name" for _ in citations(path.name)]
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        hits += [f"{path.relative_to(ROOT)}:{number}: {line}" for number, line in citations(text)]
    assert not hits, "say the why in words, not the tracker's number:\n" + "\n".join(hits)
