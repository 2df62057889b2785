"""The A/B picture's content (extender/ab/report.py layout), checked as data, and one real render."""

from __future__ import annotations

from pathlib import Path

import pytest

from extender.ab import report

NODES = {"node-a1": "zone-a", "node-a2": "zone-a", "node-b1": "zone-b"}
SUMMARY = {"runs": 3, "violations": 0, "pending": 1, "emptiedZones": 0, "medianSecondsToPlace": 1.0, "maxSkew": {}}


def run(rep: int, final: dict[str, str], pending: list[str] = (), violations: list[str] = ()) -> dict:
    return {
        "repetition": rep,
        "final": final,
        "pendingPods": list(pending),
        "steps": [{"violations": list(violations)}],
    }


RESULT = {
    "scenario": "s",
    "sides": {
        "native": {
            "summary": SUMMARY,
            "runs": [
                run(0, {"ns/redis-0-0": "node-a1"}, pending=["ns/redis-1-0"]),
                run(1, {"ns/redis-0-0": "node-a1", "ns/redis-1-0": "node-a1"}, violations=["caps: ..."]),
                run(2, {"ns/redis-0-0": "node-a1", "ns/redis-1-0": "node-b1"}),
            ],
        },
        "extender": {
            "summary": SUMMARY,
            "runs": [
                run(0, {"ns/redis-0-0": "node-a1"}, pending=["ns/redis-1-0"]),
                run(1, {"ns/redis-0-0": "node-a2", "ns/redis-1-0": "node-b1"}),
            ],
        },
    },
}


@pytest.mark.parametrize(
    "name,pod,group",
    [("ordinal", "ns/redis-0-12", "redis-0"), ("plain", "web-3", "web"), ("no ordinal", "ns/rogue", "rogue")],
)
def test_a_pod_is_coloured_by_its_group(name, pod, group) -> None:
    assert report.group_of(pod) == group


def test_the_run_shown_is_the_last_with_a_violation_else_with_a_pending_pod_else_the_last() -> None:
    shown = report.layout(RESULT, NODES)
    native, extender = shown["sides"]["native"], shown["sides"]["extender"]
    assert native["repetition"] == 1 and native["on_node"] == {"node-a1": ["redis-0-0", "redis-1-0"]}
    assert extender["repetition"] == 0 and extender["pending"] == ["redis-1-0"]
    assert shown["colour"] == {"redis-0": 0, "redis-1": 1}  # one colour per group, both sides alike
    assert shown["by_zone"] == {"zone-a": ["node-a1", "node-a2"], "zone-b": ["node-b1"]}


def test_older_results_without_pending_pods_still_draw(tmp_path: Path) -> None:
    old = {
        "scenario": "old",
        "sides": {"native": {"summary": SUMMARY, "runs": [{"final": {"ns/a-0": "node-a1"}, "steps": []}]}},
    }
    assert report.layout(old, NODES)["sides"]["native"]["pending"] == []
    report.write_png(old, NODES, tmp_path / "old.png")
    assert (tmp_path / "old.png").stat().st_size > 0


def test_the_picture_renders(tmp_path: Path) -> None:
    report.write_png(RESULT, NODES, tmp_path / "ab.png")
    assert (tmp_path / "ab.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
