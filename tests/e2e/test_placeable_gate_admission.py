"""Every opted-in pod is created held by the placeable gate, whoever wrote it.

In-scheduler mode, as deploy/overlays/in-scheduler installs it: on a minor whose API server
serves MutatingAdmissionPolicy v1 (1.36+), deploy/components/placeable-gate's policy adds the
gate at CREATE to every pod that requests the opt-in resource. Pods written by hand, as a team
that keeps its manifests in git writes them:

- opted in through requests, or through limits alone (the API server defaults the requests), or
  in an init container: created gated, then lifted by the extender and bound;
- opted in with a scheduling gate of its own: both gates, the other one kept;
- opted in with spec.nodeName set (no scheduler involved): created as written (a gate there
  would make the pod invalid);
- never opted in: not touched, bound by the default scheduler as always.

On 1.34 and 1.35 the API server serves no such policy (the -before-1.36 overlay leaves it out):
the opted-in pod is created without the gate, as the docs say. On every minor, an opted-in pod
created without the gate (there, or here with the policy's binding removed) is named in the
extender's log and counted by `extender_ungated_opt_in_pods`.
"""

from __future__ import annotations

import re

import pytest
import requests

from extender.api.policy import OPT_IN_RESOURCE, PLACEABLE_GATE
from extender.devcluster.api import wait_for
from extender.devcluster.cluster import serves_gate_admission, zoned_nodes

from .workloads import cli

pytestmark = pytest.mark.e2e

CLUSTER_OPTIONS = {"mode": "in-scheduler"}
BINDING = "/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings"
OTHER_GATE = "example.com/not-ours"


def _pod(name: str, *, opt_in: str | None = "requests", gates=(), node: str | None = None, nowhere=False) -> dict:  # noqa: ANN001
    container: dict = {"name": "main", "image": "registry.invalid/db:1"}
    if opt_in == "requests":  # an extended resource's requests need its limits
        container["resources"] = {"requests": {OPT_IN_RESOURCE: "1"}, "limits": {OPT_IN_RESOURCE: "1"}}
    elif opt_in == "limits":
        container["resources"] = {"limits": {OPT_IN_RESOURCE: "1"}}
    spec: dict = {"containers": [container], "terminationGracePeriodSeconds": 0}
    if opt_in == "init":
        spec["initContainers"] = [{**container, "name": "init", "resources": {"limits": {OPT_IN_RESOURCE: "1"}}}]
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    if node:
        spec["nodeName"] = node
    if nowhere:  # no node matches: it stays Pending, as a pod waiting for room does
        spec["nodeSelector"] = {"example.com/nowhere": "true"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def _gates(pod: dict) -> list[str]:
    return [g["name"] for g in pod["spec"].get("schedulingGates") or []]


def _ungated_metric(cluster) -> float:  # noqa: ANN001
    text = requests.get(f"http://127.0.0.1:{cluster.ports['extender']}/metrics", timeout=10).text
    found = re.search(r"^extender_ungated_opt_in_pods ([0-9.e+]+)$", text, re.M)
    assert found, "extender_ungated_opt_in_pods is exported"
    return float(found.group(1))


def _ungated_logged(cluster, ns: str, name: str) -> bool:  # noqa: ANN001
    log = (cluster.log_dir / "extender.log").read_text(errors="replace")
    return f"of {ns}/{name} (latest {name}) were created without the {PLACEABLE_GATE} gate" in log


def _audit_names(cluster, ns: str, name: str) -> None:  # noqa: ANN001
    """`audit` names the pod outside the bound and the fix (a warning: its exit code stays 0)."""
    out = cli(cluster, "audit", "-n", ns)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"outside: {ns}/{name}" in out.stdout, out.stdout
    assert "no MutatingAdmissionPolicy placement-placeable-gate" in out.stdout, out.stdout


def test_every_opted_in_pod_is_created_held_by_the_gate(cluster, scenario) -> None:  # noqa: ANN001
    api = cluster.admin
    cluster.add_nodes(zoned_nodes({"ga-a": 4}, prefix="ga"))
    ns = cluster.namespace("gate-admission")
    path = f"/api/v1/namespaces/{ns}/pods"
    if not serves_gate_admission(api):
        created = api.create(path, _pod("by-hand", nowhere=True))
        assert _gates(created) == [], "1.34/1.35: no MutatingAdmissionPolicy, the pod is created as written"
        wait_for("the ungated pod named in the extender's log", lambda: _ungated_logged(cluster, ns, "by-hand"), 30)
        assert _ungated_metric(cluster) >= 1
        _audit_names(cluster, ns, "by-hand")
        scenario.note = "no MutatingAdmissionPolicy on this minor: created ungated, logged, counted, audited"
        return

    made = {
        "requests": api.create(path, _pod("requests")),
        "limits": api.create(path, _pod("limits", opt_in="limits")),
        "init": api.create(path, _pod("init", opt_in="init")),
        "other-gate": api.create(path, _pod("other-gate", gates=[OTHER_GATE])),
        "on-a-node": api.create(path, _pod("on-a-node", node="ga-a-0")),
        "ordinary": api.create(path, _pod("ordinary", opt_in=None)),
    }
    gates = {name: _gates(pod) for name, pod in made.items()}
    assert gates == {
        "requests": [PLACEABLE_GATE],
        "limits": [PLACEABLE_GATE],
        "init": [PLACEABLE_GATE],
        "other-gate": [OTHER_GATE, PLACEABLE_GATE],
        "on-a-node": [],
        "ordinary": [],
    }, gates

    def bound() -> dict[str, str | None]:
        return {n: api.get(f"{path}/{n}")["spec"].get("nodeName") for n in ("requests", "limits", "init", "ordinary")}

    placed = wait_for("the gated pods lifted and bound, the ordinary one bound", lambda: all(bound().values()), 60)
    assert placed
    assert _ungated_metric(cluster) == 0, "nothing arrived outside the gate"
    kept = api.get(f"{path}/other-gate")
    assert OTHER_GATE in _gates(kept) and not kept["spec"].get("nodeName"), "another owner's gate is kept"

    # Without the policy's binding (an install from before 1.36's overlay, or removed): named and counted.
    binding = api.get(f"{BINDING}/placement-placeable-gate")
    api.delete(f"{BINDING}/placement-placeable-gate")
    try:
        created: list[str] = []

        def ungated() -> bool:
            created.append(f"unbound-{len(created)}")
            return not _gates(api.create(path, _pod(created[-1], nowhere=True)))

        wait_for("an opted-in pod created ungated once the binding is gone", ungated, 30)
        latest = created[-1]
        wait_for("the ungated pod named in the extender's log", lambda: _ungated_logged(cluster, ns, latest), 30)
        assert _ungated_metric(cluster) >= 1
        _audit_names(cluster, ns, latest)
    finally:
        binding["metadata"] = {"name": binding["metadata"]["name"]}
        api.create(BINDING, binding)
    scenario.pods_placed = 4
    scenario.note = (
        "opted in by requests, limits, an init container: created gated, lifted, bound; another gate kept; "
        "nodeName and ordinary pods untouched; without the binding: created ungated, logged and counted"
    )
