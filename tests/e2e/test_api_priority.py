"""The API server queues the extender's identities with the default scheduler
(deploy/base/flowschema.yaml, README "Install on a cluster").

API Priority and Fairness puts `system:kube-scheduler` in `workload-high` (the built-in FlowSchema
kube-scheduler) and any other ServiceAccount in `workload-low`. Our FlowSchema `placement-extender`
moves the extender's two identities to the default scheduler's level. This module's control plane
runs with Priority and Fairness on (the shared harness turns it off), so the classification is the
API server's own:

- a request of each identity (the pod's placement-scheduler; the TLS and in-scheduler overlays'
  placement-extender) comes back classified into our FlowSchema and kube-scheduler's priority
  level, as this API server defines it; another ServiceAccount's into workload-low;
- the running components (our kube-scheduler and the extender, under the pod's identity) have
  had their requests dispatched there, by the API server's own counter.
"""

from __future__ import annotations

import pytest
import yaml

from extender.devcluster.api import Api, wait_for
from extender.devcluster.cluster import REPO, SYSTEM_NAMESPACE

pytestmark = pytest.mark.e2e

CLUSTER_OPTIONS = {"apiserver_args": ["--enable-priority-and-fairness=true"]}
FLOWCONTROL = "/apis/flowcontrol.apiserver.k8s.io/v1"
OURS = "placement-extender"  # deploy/base/flowschema.yaml


@pytest.fixture(scope="module")
def identities(cluster) -> list[str]:
    """The pod's identity (installed by the harness from deploy/base) and the TLS overlay's."""
    for doc in yaml.safe_load_all((REPO / "deploy/overlays/tls/extender.yaml").read_text()):
        if doc["kind"] == "ServiceAccount":
            cluster.admin.create(f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/serviceaccounts", doc)
    return ["placement-scheduler", "placement-extender"]


def default_schedulers_level(cluster) -> str:
    return cluster.admin.get(f"{FLOWCONTROL}/flowschemas/kube-scheduler")["spec"]["priorityLevelConfiguration"]["name"]


def classified(cluster, service_account: str) -> tuple[str, str]:
    """(FlowSchema, priority level) Priority and Fairness put a request of that identity in, by
    the UIDs the API server writes on its answer."""
    review = cluster.admin.create(
        f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/serviceaccounts/{service_account}/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 600}},
    )
    as_identity = Api(cluster.server, str(cluster.pki.ca_cert), token=review["status"]["token"])
    answer = as_identity.session.get(f"{cluster.server}/api/v1/namespaces/{SYSTEM_NAMESPACE}/pods", timeout=30)
    names = []
    for kind, header in (("flowschemas", "FlowSchema"), ("prioritylevelconfigurations", "PriorityLevel")):
        uid = answer.headers[f"X-Kubernetes-PF-{header}-UID"]
        names.append(
            next(
                o["metadata"]["name"]
                for o in cluster.admin.list(f"{FLOWCONTROL}/{kind}")
                if o["metadata"]["uid"] == uid
            )
        )
    return names[0], names[1]


def test_each_identity_waits_in_the_default_schedulers_priority_level(cluster, identities) -> None:
    level = default_schedulers_level(cluster)
    assert level == "workload-high"  # what the README says of the built-in kube-scheduler FlowSchema
    for identity in identities:
        assert classified(cluster, identity) == (OURS, level), identity
    # the control: any other ServiceAccount, where ours would be without the FlowSchema
    assert classified(cluster, "default") == ("service-accounts", "workload-low")


def dispatched(cluster) -> dict[tuple[str, str], float]:
    """apiserver_flowcontrol_dispatched_requests_total by (flow_schema, priority_level)."""
    out: dict[tuple[str, str], float] = {}
    text = cluster.admin.session.get(f"{cluster.server}/metrics", timeout=30).text
    for line in text.splitlines():
        if line.startswith("apiserver_flowcontrol_dispatched_requests_total{"):
            labels = dict(
                part.split("=", 1) for part in line[line.index("{") + 1 : line.rindex("}")].split(",") if "=" in part
            )
            key = (labels.get("flow_schema", "").strip('"'), labels.get("priority_level", "").strip('"'))
            out[key] = out.get(key, 0.0) + float(line.rsplit(" ", 1)[1])
    return out


def test_the_running_components_requests_are_dispatched_there(cluster) -> None:
    """Our kube-scheduler and the extender run under the pod's identity from the start (lists,
    watches, the lease): the API server counts their requests under our FlowSchema."""
    level = default_schedulers_level(cluster)
    wait_for("requests dispatched under our FlowSchema", lambda: dispatched(cluster).get((OURS, level), 0) > 0, 30)
    assert not [key for key in dispatched(cluster) if key[0] == OURS and key[1] != level]
