"""The workload files and their model (benchmarks/workload.py): every file loads, errors name the
field's path, and the parser raises nothing but WorkloadError whatever YAML mapping it is given."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks import kinds, workload  # noqa: E402


def test_every_workload_file_loads() -> None:
    paths = workload.every()
    expected = {"pair-1k", "pair-5k", "pair-1k-nodelist", "group-scaling", "profile-1k"}
    expected |= {
        "e2e",
        "e2e-modes",
        "e2e-equal-qps",
        "soak",
        "scheduler-perf",
    }
    assert {p.stem for p in paths} >= expected
    for path in paths:
        loaded = workload.parse(path.read_text(), str(path))
        assert loaded.name == path.stem, "a workload's name is its file's name"
        assert hasattr(kinds.module(loaded.kind), "run")
        _, smoke = workload.load(str(path), smoke=True)  # its smoke overrides validate too
        assert smoke.rounds <= loaded.rounds


GOOD: dict[str, Any] = yaml.safe_load((workload.WORKLOADS / "pair-1k.yaml").read_text())
GROUP: dict[str, Any] = yaml.safe_load((workload.WORKLOADS / "group-scaling.yaml").read_text())
PROFILE: dict[str, Any] = yaml.safe_load((workload.WORKLOADS / "profile-1k.yaml").read_text())
E2E: dict[str, Any] = yaml.safe_load((workload.WORKLOADS / "e2e.yaml").read_text())
SOAK: dict[str, Any] = yaml.safe_load((workload.WORKLOADS / "soak.yaml").read_text())


@pytest.mark.parametrize(
    ("base", "sets", "path", "fragment"),
    [
        (GOOD, {"cluster.nodes": 0}, "cluster.nodes", "greater than 0"),
        (GOOD, {"cluster.nodes": "many"}, "cluster.nodes", "valid integer"),
        (GOOD, {"cluster.zones": 4}, "cluster.zones", "3"),
        (GOOD, {"cluster.racks": 2}, "cluster.racks", "Extra inputs"),
        (GOOD, {"workload.requests": -1}, "workload.requests", "greater than 0"),
        (GOOD, {"workload.policy": "other"}, "workload.policy", "full"),
        (GOOD, {"kind": "nope"}, "", "tag"),
        (GOOD, {"arms": ["extender", "gpu"]}, "arms.1", "extender"),
        (GOOD, {"arms": ["noop"]}, "", "extender arm"),
        (GOOD, {"arms": ["extender", "extender"]}, "", "at most once"),
        (GOOD, {"name": "Pair 1k"}, "name", "pattern"),
        (GOOD, {"rounds": 0}, "rounds", "greater than 0"),
        (GOOD, {"targets": [{"figure": "extender.pair.p99"}]}, "targets.0", "exactly one of max or min"),
        (GOOD, {"targets": [{"figure": "x", "max": 1, "max_size": 10}]}, "", "group_scaling"),
        (GOOD, {"targets": [{"figure": "x", "max": "low"}]}, "targets.0.max", "valid number"),
        (GROUP, {"workload.sizes": []}, "workload.sizes", "at least 1"),
        (GROUP, {"workload.sizes": [30, 1]}, "workload.sizes.1", "greater than 1"),
        (GROUP, {"workload.variants": ["soft"]}, "workload.variants.0", "hard-spread"),
        (GROUP, {"workload.shapes": {30: [3]}}, "workload.shapes.30", "at least 2"),
        (GROUP, {"workload.placed_fraction": 1.5}, "workload.placed_fraction", "less than 1"),
        (GROUP, {"arms": ["extender", "gofloor"]}, "", "noop floor only"),
        (GROUP, {"targets": [{"figure": "fallbacks", "max": 0, "variants": ["x"]}]}, "targets.0.variants.0", "spread"),
        (PROFILE, {"workload.verb": "bind"}, "workload.verb", "both"),
        (PROFILE, {"workload.policy": "other"}, "workload.policy", "caps-spread"),
        (PROFILE, {"workload.pyinstrument": "perhaps"}, "workload.pyinstrument", "valid boolean"),
        (PROFILE, {"workload.limit": 0}, "workload.limit", "greater than 0"),
        (PROFILE, {"arms": ["extender", "noop"]}, "arms.1", "extender"),
        (PROFILE, {"targets": [{"figure": "x", "max": 1, "variants": ["hard-spread"]}]}, "", "group_scaling"),
        (E2E, {"workload.variants": []}, "workload.variants", "at least 1"),
        (E2E, {"workload.variants": ["equal-qps", "turbo"]}, "workload.variants.1", "go-floor"),
        (E2E, {"workload.variants": ["go-floor", "go-floor"]}, "workload", "at most once"),
        (E2E, {"workload.variants": ["before"]}, "workload", "before_tree"),
        (E2E, {"workload.sets": 0}, "workload.sets", "greater than 0"),
        (E2E, {"workload.place_window": 0}, "workload.place_window", "greater than 0"),
        (E2E, {"workload.equal_qps": "fast"}, "workload.equal_qps", "valid number"),
        (E2E, {"cluster.nodes": 6000}, "cluster.nodes", "less than or equal to 5000"),
        (E2E, {"cluster.kcm_qps": -1}, "cluster.kcm_qps", "greater than or equal to 0"),
        (E2E, {"cluster.pods": 10}, "cluster.pods", "Extra inputs"),
        (E2E, {"arms": ["extender", "gofloor"]}, "arms.1", "extender"),
        (E2E, {"targets": [{"figure": "x", "min": 1, "max_size": 3}]}, "", "group_scaling"),
        (SOAK, {"workload.minutes": 0}, "workload.minutes", "greater than 0"),
        (SOAK, {"workload.groups": 100}, "workload.groups", "less than or equal to 50"),
        (SOAK, {"cluster.nodes_per_zone": 2}, "cluster.nodes_per_zone", "greater than or equal to 3"),
        (SOAK, {"rounds": 3}, "rounds", "1"),
        (SOAK, {"arms": ["extender", "noop"]}, "arms.1", "extender"),
    ],
)
def test_validation_errors_name_the_field(base: dict[str, Any], sets: dict[str, Any], path: str, fragment: str) -> None:
    with pytest.raises(workload.WorkloadError) as caught:
        workload.validate(workload.override(base, sets))
    paths = {p: msg for p, msg in caught.value.errors}
    assert path in paths, caught.value.errors
    assert fragment in paths[path], caught.value.errors
    assert (path or "(top)") in str(caught.value)


def test_set_overrides_parse_yaml_values() -> None:
    data = workload.override(GOOD, ["cluster.nodes=50", "workload.gc_freeze=false", "arms=[extender, noop]"])
    loaded = workload.validate(data)
    assert loaded.cluster.nodes == 50 and loaded.workload.gc_freeze is False and loaded.arms == ["extender", "noop"]
    with pytest.raises(workload.WorkloadError, match="KEY=VALUE"):
        workload.override(GOOD, ["cluster.nodes"])


def test_text_that_is_not_a_mapping() -> None:
    for text in ("", "- a\n- b\n", "just text", "{unclosed: [", "7"):
        with pytest.raises(workload.WorkloadError):
            workload.parse(text)
    with pytest.raises(workload.WorkloadError, match="no such file"):
        workload.load("no-such-workload")


_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=12)
_keys = st.sampled_from(
    ["name", "description", "kind", "cluster", "workload", "arms", "rounds", "targets", "smoke", "nodes", "pods"]
) | st.text(max_size=8)
_values = st.recursive(
    _scalars | st.sampled_from(list(workload.KIND_TAGS) + ["extender", "noop", "gofloor"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_keys, inner, max_size=5),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(_keys, _values, max_size=8), st.booleans())
def test_parser_raises_only_workload_errors(data: dict[str, Any], near_good: bool) -> None:
    """Any YAML mapping (and the good file with arbitrary fields replaced) either validates or
    raises WorkloadError, never another exception."""
    if near_good:
        data = {**GOOD, **data}
    text = yaml.safe_dump(data, allow_unicode=True)
    try:
        workload.parse(text)
    except workload.WorkloadError as exc:
        assert exc.errors and all(isinstance(p, str) and isinstance(m, str) for p, m in exc.errors)
