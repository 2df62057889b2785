"""Result files are named by what they are (workload, commit, date), so that a reader of
benchmarks/results/ finds a run without the tracker: benchmarks/common.py's result_name."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks import common, runner  # noqa: E402


def _data(**extra: object) -> dict:
    machine = {"code": {"git_head": "c09d8e4"}, "time": "2026-11-28T18:41:33Z"}
    return {"machine": machine, "workload": {"name": "pair-5k"}, **extra}


def test_a_run_is_named_workload_commit_date() -> None:
    assert common.result_name(_data()) == "pair-5k_c09d8e4_2026-11-28"


def test_a_before_after_run_names_both_commits() -> None:
    assert common.result_name(_data(base="011949b", head="5dddd5a")) == "pair-5k_011949b..5dddd5a_2026-11-28"


def test_a_second_run_of_the_same_name_does_not_overwrite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    first, second = common.write_result(_data(run=1)), common.write_result(_data(run=2))
    assert (first.name, second.name) == ("pair-5k_c09d8e4_2026-11-28.json", "pair-5k_c09d8e4_2026-11-28-2.json")
    assert json.loads(first.read_text())["run"] == 1 and json.loads(second.read_text())["run"] == 2


def test_the_runner_writes_that_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    assert runner.main(["run", "profile-1k", "--smoke"]) == 0
    (path,) = tmp_path.iterdir()
    data = json.loads(path.read_text())
    head, date = data["machine"]["code"]["git_head"], data["machine"]["time"][:10]
    assert path.name == f"profile-1k_{head}_{date}.json"
