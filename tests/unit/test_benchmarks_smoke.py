"""Smoke runs of the benchmarks (tiny sizes): they run and produce their figures. No timing is
asserted here; the figures themselves are in BENCHMARKS.md and benchmarks/results/."""

from __future__ import annotations

import json
import math
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks import cluster, runner, synthetic, workload  # noqa: E402
from benchmarks.arms.server import Client, GoFloorServer, free_port  # noqa: E402


def _positive(value: object) -> bool:
    return isinstance(value, (int, float)) and value > 0 and not math.isnan(value)


def test_synthetic_request_matches_the_wire_shape() -> None:
    names = json.loads(synthetic.filter_args(9))
    assert names["Nodes"] is None and len(names["NodeNames"]) == 9
    full = json.loads(synthetic.filter_args(9, node_list=True))
    assert full["NodeNames"] is None and len(full["Nodes"]["items"]) == 9
    assert set(full["Nodes"]["items"][0]) == {"metadata", "spec", "status"}


def test_go_floor_builds_and_answers(tmp_path: Path) -> None:
    """The Go floor (benchmarks/gofloor) builds, or is reused from its cache, and answers as a
    do-nothing extender: every candidate passes, score 0 each, /noop the Python floor's answer.
    The first build compiles k8s.io/api (about a minute with a cold Go build cache); then cached."""
    from benchmarks import common

    cached = common.go_floor_cache_root() / f"gofloor-{common.go_floor_key()}" / "gofloor"
    if shutil.which("go") is None and not cached.exists():
        pytest.skip("no Go toolchain: the runner reports the gofloor arm unavailable")
    go = common.build_go_floor()
    assert go.path is not None, go.reason
    port = free_port()
    server = GoFloorServer(go.path, port, tmp_path / "gofloor.log")
    try:
        server.wait_ready(timeout=30)
        client = Client(port)
        names_body, list_body = synthetic.filter_args(7), synthetic.filter_args(3, node_list=True)
        names = json.loads(names_body)["NodeNames"]
        _, noop = client.post("/noop", names_body)
        assert json.loads(noop) == {
            "Nodes": None,
            "NodeNames": [],
            "FailedNodes": {},
            "FailedAndUnresolvableNodes": {},
            "Error": "",
        }
        _, passed = client.post("/filter", names_body)
        assert json.loads(passed) == {
            "Nodes": None,
            "NodeNames": names,
            "FailedNodes": {},
            "FailedAndUnresolvableNodes": {},
            "Error": "",
        }
        _, scores = client.post("/prioritize", names_body)
        assert json.loads(scores) == [{"Host": name, "Score": 0} for name in names]
        _, passed = client.post("/filter", list_body)
        assert len(json.loads(passed)["Nodes"]["items"]) == 3
        client.close()
    finally:
        server.stop()


# The kinds that start a local control plane take minutes even at their smoke size: not here
# (run them by hand, `flock /tmp/bench.lock python -m benchmarks run WORKLOAD --smoke`). Upstream's
# scheduler_perf starts its own, one a run: tests/e2e/test_scheduler_perf.py runs its smoke size.
WITHOUT_A_CONTROL_PLANE = [
    p
    for p in workload.every()
    if not isinstance(workload.parse(p.read_text(), str(p)), (workload.ControlPlane, workload.SchedulerPerf))
]


@pytest.mark.parametrize("path", WITHOUT_A_CONTROL_PLANE, ids=lambda p: p.stem)
def test_workload_smoke_through_the_runner(path: Path, tmp_path: Path) -> None:
    """Every workload file at its own `smoke` size, through `python -m benchmarks run --smoke`,
    but those of the control-plane kinds."""
    out = tmp_path / "result.json"
    assert runner.main(["run", str(path), "--smoke", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    loaded = workload.validate(data["workload"])
    assert loaded.name == path.stem and data["machine"]["nproc"] and data["arms"]["extender"]["available"]
    assert len(data["targets"]) >= len(loaded.targets) and all(t["verdict"] for t in data["targets"])
    figures = data["figures"]
    if loaded.kind == "group_scaling":
        rows = data["detail"]["rows"]
        assert len(rows) == len(loaded.workload.sizes) * len(loaded.workload.variants)
        assert all(r["error_count"] == 0 and _positive(r["stats_ms"]["pair"]["median"]) for r in rows)
    if loaded.kind == "profile":
        assert data["detail"]["decision"]["passed"] > 0 and data["detail"]["profiler"] == "cProfile"
        assert data["detail"]["by_self"] and data["detail"]["by_cumulative"]
        assert len(data["detail"]["by_self"]) <= loaded.workload.limit
        assert _positive(figures["ms_per_iteration_unprofiled"]) and _positive(figures["ms_per_iteration_profiled"])
    if loaded.kind == "http_pair":
        assert data["detail"]["decision"]["passed"] > 0 and data["detail"]["nodes"] == loaded.cluster.nodes
        for arm in ("extender", "noop"):
            for request in ("filter", "prioritize", "pair"):
                assert _positive(figures[f"{arm}.{request}.median"]) and _positive(figures[f"{arm}.{request}.p99"])
        assert _positive(figures["noop.raw.median"]) and _positive(figures["ratio.pair_over_noop.median"])
        if data["arms"]["gofloor"]["available"]:  # `go` present (test_go_floor_builds_and_answers checks it)
            assert _positive(figures["gofloor.pair.median"]) and _positive(figures["ratio.pair_over_gofloor.median"])
        else:
            assert data["arms"]["gofloor"]["reason"] and "gofloor.pair.median" not in figures


def test_runner_arms_and_overrides(tmp_path: Path) -> None:
    """--arms narrows the arms, --set overrides a field (validated by the same model), --rounds counts."""
    out = tmp_path / "result.json"
    argv = ["run", "pair-1k-nodelist", "--smoke", "--arms", "extender,noop", "--rounds", "2", "--out", str(out)]
    assert runner.main([*argv, "--set", "cluster.nodes=20", "--set", "workload.gc_freeze=false"]) == 0
    data = json.loads(out.read_text())
    assert set(data["arms"]) == {"extender", "noop"} and len(data["detail"]["rounds"]) == 2
    assert data["workload"]["cluster"]["nodes"] == 20 and data["workload"]["workload"]["gc_freeze"] is False
    assert data["detail"]["mode"].startswith("NodeList") and "gofloor.pair.median" not in data["figures"]
    assert runner.main(["run", "pair-1k", "--smoke", "--set", "cluster.nodes=-1", "--out", str(out)]) == 2
    assert runner.main(["run", "pair-1k", "--smoke", "--arms", "noop", "--out", str(out)]) == 2


def test_profile_with_pyinstrument(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--set workload.pyinstrument=true`: pyinstrument's profiler instead of cProfile, its text in
    the result (a stand-in module here: pyinstrument is optional), the collector back on after."""
    import gc
    import types

    calls: list[str] = []

    class Profiler:
        def __init__(self, interval: float) -> None:
            calls.append(f"interval {interval}")

        def start(self) -> None:
            calls.append("start")

        def stop(self) -> None:
            calls.append("stop")

        def output_text(self, **kwargs: object) -> str:
            return "0.042 wsgi_app  flask/app.py:1\n"

    monkeypatch.setitem(sys.modules, "pyinstrument", types.SimpleNamespace(Profiler=Profiler))
    out = tmp_path / "profile.json"
    argv = ["run", "profile-1k", "--smoke", "--set", "workload.pyinstrument=true", "--out", str(out)]
    assert runner.main(argv) == 0
    assert gc.isenabled() and calls == ["interval 0.0005", "start", "stop"]
    data = json.loads(out.read_text())
    assert data["detail"]["profiler"] == "pyinstrument" and "wsgi_app" in data["detail"]["pyinstrument"]
    assert "by_self" not in data["detail"] and _positive(data["figures"]["ms_per_iteration_unprofiled"])
    monkeypatch.setitem(sys.modules, "pyinstrument", None)  # not installed: a clear error, before the setup
    with pytest.raises(RuntimeError, match="pip install pyinstrument"):
        runner.main(argv)


def test_e2e_manifests_and_summary_without_a_cluster() -> None:
    from benchmarks.kinds import e2e

    spec = cluster.PlacementPolicySpec.model_validate(cluster.POLICY)
    native = cluster.statefulset("set-0", 100, "native", spec)["spec"]["template"]
    extender = cluster.statefulset("set-0", 100, "extender", spec)["spec"]["template"]
    assert native["spec"]["schedulerName"] == "default-scheduler" and native["spec"]["topologySpreadConstraints"]
    assert extender["spec"]["schedulerName"] == "placement-scheduler"
    assert json.loads(extender["metadata"]["annotations"]["placement.extender.dev/policy"]) == cluster.POLICY
    rounds = [
        {"side": side, "complete": True, "pods_per_second": pps, "seconds_to_all_bound": 1000 / pps}
        for side, pps in (("native", 50.0), ("extender", 45.0), ("native", 52.0), ("extender", 40.0))
    ]
    summary = e2e.summarise(rounds)
    assert summary["ratio_extender_over_native"] == pytest.approx(42.5 / 51.0, abs=0.01)
    assert summary["target"]["verdict"] == "met"
    # The variants: shipped keeps kube-scheduler's default client limits, equal-qps raises both.
    assert e2e.variant_limits("shipped", 500, 1000) == (None, None)
    assert e2e.variant_limits("equal-qps", 500, 1000) == (500, 1000)
    with pytest.raises(ValueError):
        e2e.variant_limits("other", 500, 1000)
    text = e2e.variants_table(
        {
            "shipped": {"scheduler_qps": None, "scheduler_burst": None, "summary": summary},
            "equal-qps": {"scheduler_qps": 500.0, "scheduler_burst": 1000, "summary": summary},
        }
    )
    assert "equal-qps" in text and "500/1000" in text
    before = {"filter": (10.0, 0.5), "bind": (4.0, 0.1)}
    after = {"filter": (30.0, 1.5), "bind": (4.0, 0.1), "prioritize": (5.0, 0.05)}
    delta = cluster.verb_delta(before, after, pods=20)
    assert delta["filter"] == {"calls": 20, "seconds": 1.0, "ms_per_call": 50.0, "ms_per_pod": 50.0}
    assert "bind" not in delta and delta["prioritize"]["calls"] == 5
    # The kind's flat figures and its report, from two variants' results (no control plane).
    results = {
        name: {
            "variant": name,
            "scheduler_qps": 500.0,
            "scheduler_burst": 1000,
            "rounds": [
                {
                    **r,
                    "round": i // 2,
                    "pods": 1000,
                    "bound": 1000,
                    "steady_pods_per_second_10_90": None,
                    "seconds_all_created": 1.0,
                    "failed_scheduling_events": 0,
                    "rule_violations": 0,
                    "cpu_seconds": {"extender": 1.5, "kube-apiserver": 9.0},
                    "bind_ms": {},
                }
                for i, r in enumerate(rounds)
            ],
            "summary": e2e.summarise(rounds) if name == "equal-qps" else e2e.summarise(rounds[:2]),
        }
        for name in ("equal-qps", "go-floor", "py-floor", "py-duties")
    }
    ceiling = e2e.over_ceiling(results)
    figures = e2e.figures(results, ceiling)
    assert figures["equal-qps.extender.pods_per_second"] == 42.5
    assert figures["equal-qps.extender.cpu_ms_per_pod.extender"] == 1.5
    assert figures["extender_over_ceiling"] == ceiling["extender_over_ceiling"]
    assert "equal-qps.ratio_in_scheduler_over_second_scheduler" not in figures
    detail = {
        "variants": results,
        "over_ceiling": ceiling,
        "bind_ms": e2e.bind_summary(results),
        "cpu_ms_per_pod": e2e.cpu_per_pod(results),
        "total_seconds": 1.0,
    }
    text = e2e.report({"detail": detail, "figures": figures})
    assert "Variant go-floor" in text and "extender / ceiling" in text and "extender 1.5" in text
    assert "Variant py-floor" in text and "n/a: a floor" in text
    assert figures["py-floor.extender.cpu_ms_per_pod.extender"] == 1.5
    assert "Variant py-duties" in text and figures["py-duties.extender.cpu_ms_per_pod.extender"] == 1.5


def test_soak_figures_without_a_cluster() -> None:
    from dataclasses import asdict

    from benchmarks.kinds import soak

    result = soak.SoakResult(minutes=1.0, cycles=6, placed=30, reservations_after=0.0)
    result.samples = [
        soak.Sample(at=t, cycle=c, rss_kib=50_000 + 100 * c, reservations=0, series=213, pods=4, violations=0)
        for t, c in ((0.0, 0), (20.0, 3), (40.0, 6))
    ]
    result.slopes_per_hour = {"rss_kib": 1024.0, "reservations": 0.0, "series": 0.0}
    result.rss_kib_per_hour_by_quarter = [0.0, 0.0, 2048.0, 2048.0]
    figures = soak.figures(result)
    assert figures["violations"] == 0 and figures["reservations_after"] == 0.0 and figures["audits"] == 3
    assert figures["rss_mib_per_hour"] == 1.0 and figures["rss_mib_per_hour_last_quarter"] == 2.0
    text = soak.report({"detail": {**asdict(result), "summary": result.summary()}})
    assert "rss_kib" in text and "6 churn cycles" in text


def test_group_scaling_smoke(tmp_path: Path) -> None:
    from benchmarks.kinds import group_scaling

    # The shape rule: the sizes, and a 1,000,000-pod group still feasible under hard spread.
    shapes = {n: group_scaling.shape(n, 1000) for n in group_scaling.SIZES}
    assert [(s.sets, s.replicas) for s in shapes.values()] == [(3, 10), (10, 30), (30, 100), (100, 300), (1250, 800)]
    assert shapes[1_000_000].placed == group_scaling.MAX_PLACED and shapes[30].placed == 18 and shapes[30].to_come == 11
    # The placed pods obey the policy (plan() checks it) and the fast records equal parse_pod's.
    small = group_scaling.shape(300, 30)
    records = group_scaling.build_records(small, "hard-spread")
    assert len(records["pods"]) == small.placed + 1 and group_scaling.same_as_parser(small, records)
    # /metrics: fallbacks summed over series, the lock-hold histogram summarised over its holders.
    metrics = (
        "# TYPE extender_decision_fallbacks_total counter\n"
        'extender_decision_fallbacks_total{reason="deadline"} 2\nextender_decision_fallbacks_total{reason="x"} 1\n'
        "# TYPE extender_store_lock_hold_seconds histogram\n"
        'extender_store_lock_hold_seconds_bucket{holder="watch",le="0.001"} 98\n'
        'extender_store_lock_hold_seconds_bucket{holder="watch",le="0.01"} 100\n'
        'extender_store_lock_hold_seconds_bucket{holder="watch",le="+Inf"} 100\n'
        'extender_store_lock_hold_seconds_sum{holder="watch"} 0.05\n'
        'extender_store_lock_hold_seconds_count{holder="watch"} 100\n'
    )
    assert group_scaling.fallbacks(metrics)["total"] == 3
    declared = "# HELP extender_decision_fallbacks_total x\n# TYPE extender_decision_fallbacks_total counter\n"
    assert group_scaling.fallbacks(declared) == {"exported": True, "total": 0, "by_labels": {}}
    assert not group_scaling.fallbacks("")["exported"]
    hold = group_scaling.lock_hold(metrics)
    assert hold is not None and hold["p99_bucket_le_ms"] == 10.0 and hold["count"] == 100 and hold["mean_ms"] == 0.5
    assert group_scaling.lock_hold(declared) is None
    # A tiny end-to-end run over HTTP through the runner: 30 nodes, a 30-pod group, both variants.
    out = tmp_path / "groups.json"
    assert runner.main(["run", "group-scaling", "--smoke", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    rows = data["detail"]["rows"]
    assert [r["variant"] for r in rows] == list(group_scaling.VARIANTS)
    for row in rows:
        assert (
            row["error_count"] == 0 and row["decision"]["passed"] > 0 and row["placed"] == 18 and row["to_come"] == 11
        )
        assert _positive(row["stats_ms"]["pair"]["p99"]) and _positive(row["stats_ms"]["floor_pair"]["median"])
        assert "fallbacks" in row and row["verdict"]
    # The targets: the p99 bound over sizes <= 30,000, no fallback for no-hard-spread alone, no error.
    by_figure = {t["figure"]: t for t in data["targets"]}
    assert set(by_figure["fallbacks"]["per_row"]) == {"no-hard-spread/30"}
    assert set(by_figure["pair.p99"]["per_row"]) == {"hard-spread/30", "no-hard-spread/30"}
    assert by_figure["errors"]["value"] == 0 and by_figure["errors"]["verdict"] == "met"
    assert _positive(data["figures"]["hard-spread/30.pair.p99"])


def test_runner_base_mode(tmp_path: Path) -> None:
    """--base REV: the extender served from a worktree of REV and from the working tree, alternating;
    each side's figures and change / base. HEAD against the working tree, one round a side."""
    import subprocess

    if subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True).returncode != 0:
        pytest.skip("not a git checkout")
    out = tmp_path / "before_after.json"
    argv = ["run", "pair-1k", "--smoke", "--arms", "extender,noop", "--rounds", "1", "--base", "HEAD"]
    assert runner.main([*argv, "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    pair = data["before_after"]["extender.pair.median"]
    assert _positive(pair["base"]) and _positive(pair["change"]) and _positive(pair["change_over_base"])
    assert len(data["per_round"]["base"]) == len(data["per_round"]["change"]) == 1
    assert runner.main(["run", "group-scaling", "--smoke", "--base", "HEAD", "--out", str(out)]) == 2
