"""Upstream's scheduler benchmark (test/integration/scheduler_perf) at its smoke size, through the runner:
every case of benchmarks/workloads/scheduler-perf.yaml (upstream's 5Nodes and 10Nodes workloads) on every arm
it names, each in its own harness process (its own API server, etcd and kube-scheduler), with the extender or
the Go floor beside it where the arm has one. The harness fails a run whose measured pods are not all placed,
so a passing run says every arm placed them; the test binary comes from hack/schedperf/build.sh's cache (the
prebuild builds it). No timing is asserted: the figures are in BENCHMARKS.md and benchmarks/results/."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import runner, workload


def test_every_case_and_arm_at_smoke_size(tmp_path: Path) -> None:
    out = tmp_path / "scheduler-perf.json"
    logs = tmp_path / "logs"
    argv = ["run", "scheduler-perf", "--smoke", "--set", f"workload.keep_logs={logs}", "--out", str(out)]
    assert runner.main(argv) == 0
    data = json.loads(out.read_text())
    loaded = workload.validate(data["workload"])
    expected = {
        (case.case, config, arm)
        for case in loaded.workload.cases
        if not loaded.workload.only or case.case in loaded.workload.only
        for config in case.configs
        for arm in loaded.arms
        if arm in case.arms
    }
    rows = data["detail"]["rounds"]
    assert {(r["case"], r["config"], r["arm"]) for r in rows} == expected and len(rows) == len(expected)
    for row in rows:
        # the smoke workloads are upstream's own, by name
        assert row["workload"] in ("5Nodes", "10Nodes_10Pods_10BatchSize"), row
        assert row["harness_cpu_s"] > 0, row
        if row["arm"].endswith("-extender"):
            assert row["extender_cpu_s"] > 0, row  # it ran: synced the cluster, and served the policy arm
    # The policy arms' measured pods: the native rule gone, the policy inline, the opt-in resource requested;
    # and the extender saw them (it warns once per opted-in pod created without the placeable gate: the
    # harness installs no admission policy).
    for run_dir in sorted(logs.iterdir()):
        template = run_dir / "case" / "measured-pod.yaml"
        if not template.exists():
            continue
        text = template.read_text()
        assert "placement.extender.dev/opt-in" in text and "placement.extender.dev/policy" in text
        assert "topologySpreadConstraints" not in text and "podAntiAffinity" not in text
        extender_log = run_dir / "extender.log"
        if extender_log.exists():
            assert "created without the placement.extender.dev/placeable gate" in extender_log.read_text()
