"""Second-scheduler mode sharing nodes with the default scheduler, measured.

The shared-nodes burst (tests/e2e/shared_nodes.py: a Deployment of 40 x 1 CPU under the default
scheduler and a StatefulSet of 40 x 1 CPU created at the same moment onto 10 nodes of 4 CPU), 3
repetitions under the extender's kube-scheduler (whose bind refuses a node the watch shows full),
and 3 under a bare second kube-scheduler with no extender, in the same run. Two kube-schedulers
see each other's pods only once bound, so some double-booking is the protocol's own; what is
measured is how much remains with the bind's check. Figures in the summary (README "Two ways to
run"). The check only stops the extender's own binds onto a node the watch already shows full;
the default scheduler, whose cache has not seen the extender's pods yet, still binds onto nodes
they just took, which nothing outside it can stop: measured, not asserted (first measurement:
CPU over allocatable 13, 8, 6, 16, 10 with the extender against 10, 3, 15, 5, 11 bare, 18 binds
refused). Asserted: the check acts in this race (binds refused for room are counted), and every
extender bind answered. In-scheduler mode has no race at all (test_in_scheduler.py: 0, 5 times).
"""

from __future__ import annotations

import pytest
import requests
import yaml

from extender.devcluster.cluster import free_port

from .shared_nodes import burst_nodes, clean, extender_statefulset, native_deployment, run_burst

pytestmark = pytest.mark.e2e

REPS = 3  # 5 before the suite was cut: measured, not asserted; the check acting is seen in 3 (18-23 refusals in 5)


def _bare_scheduler(cluster) -> str:  # noqa: ANN001
    """A second kube-scheduler with no extender (schedulerName bare-scheduler)."""
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "clientConnection": {"kubeconfig": str(cluster.workdir / "scheduler.kubeconfig")},
        "profiles": [{"schedulerName": "bare-scheduler"}],
    }
    path = cluster.workdir / "bare-scheduler.yaml"
    path.write_text(yaml.safe_dump(config))
    port = free_port()
    cluster._spawn(  # noqa: SLF001 - the harness's process table stops it with the plane
        "bare-scheduler",
        [cluster._bin("kube-scheduler"), f"--config={path}", f"--secure-port={port}", "--bind-address=127.0.0.1"],  # noqa: SLF001
    )
    return "bare-scheduler"


def _metric(port: int, name: str, label: str) -> float:
    text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name) and label in line)


def test_the_burst_beside_a_bare_second_scheduler(cluster, scenario) -> None:  # noqa: ANN001
    api = cluster.admin
    bare = _bare_scheduler(cluster)
    port = cluster.ports["extender"]
    figures: dict[str, list[dict]] = {"extender": [], "bare": []}
    refused_before = _metric(port, "extender_binds_total", 'result="refused_resources"')
    bind_sum = _metric(port, "extender_request_duration_seconds_sum", 'verb="bind"')
    bind_count = _metric(port, "extender_request_duration_seconds_count", 'verb="bind"')
    for k in range(REPS):
        for side, scheduler in (("extender", "placement-scheduler"), ("bare", bare)):
            rep = f"sh{k}{side[0]}"
            nodes = burst_nodes(cluster, rep)
            ns = cluster.namespace(rep)
            result = run_burst(api, ns, nodes, native_deployment(rep), extender_statefulset(rep, scheduler=scheduler))
            figures[side].append(result)
            clean(api, ns)
    refused = _metric(port, "extender_binds_total", 'result="refused_resources"') - refused_before
    binds = _metric(port, "extender_request_duration_seconds_count", 'verb="bind"') - bind_count
    bind_ms = 1000 * (_metric(port, "extender_request_duration_seconds_sum", 'verb="bind"') - bind_sum) / max(binds, 1)
    over = {side: [r["over_cpu"] for r in runs] for side, runs in figures.items()}
    nodes_over = {side: [r["nodes_over"] for r in runs] for side, runs in figures.items()}
    scenario.repetitions += 2 * REPS
    scenario.pods_placed += sum(sum(r["bound"].values()) for runs in figures.values() for r in runs)
    scenario.note = (
        f"40 + 40 pods of 1 CPU on 40 CPU, {REPS} runs each: CPU over allocatable with the extender {over['extender']} "
        f"(nodes over {nodes_over['extender']}), with a bare second kube-scheduler {over['bare']} "
        f"(nodes over {nodes_over['bare']}); binds refused for room {int(refused)}, "
        f"mean bind {bind_ms:.0f} ms over {int(binds)} binds"
    )
    print(f"\n{scenario.note}")
    assert binds > 0 and refused >= 1, f"in {REPS} bursts of 80 pods onto 40 CPU the bind's check refuses some node"
