"""What the verbs do to the cluster: Bindings, Warning events on pods, and ZoneRotation records.

Each write, its RBAC (deploy/base/rbac.yaml) and why it is needed:
- pods/binding create: the bind verb (kube-scheduler delegates binding to the extender so the
  last check of the hard rules and the write are one step).
- events create: why a pod waits, on the pod (kubectl describe), not only in our log.
- zonerotations create: a StatefulSet's ordinal -> zone rotation, decided once and kept in the
  cluster, so no restart, zone outage or adoption re-derives it (extender/api/rotation.py).
  Create only: the extender never updates or deletes a record; the operator edits or deletes it.
- pods patch, by the opt-in scale-down controller only (its own ServiceAccount): the
  pod-deletion-cost annotation on running pods of policy groups that ReplicaSets own
  (server/deletion_costs.py).
- statefulsets/deployments update, by `adopt` and `retire` only, with the operator's own
  credentials (never the extender's): the workload's pod template, guarded by its
  resourceVersion (extender/ops/adopt.py).
- pods get, patch: a pod held by the ordinal-zone scheduling gate gets its ordinal's zone ANDed
  into its node affinity and the gate removed, in one JSON patch guarded by its resourceVersion,
  so autoscalers see the zone it needs (extender/server/gate_patch.py). Only pods carrying the gate
  are read or patched; the patch only narrows, and the filter still judges every node. The same
  verb writes one annotation on pods waiting for a PlacementPolicy that was just created or
  edited, so kube-scheduler tries them again at once instead of after its 5-minute flush
  (server/nudge.py).
- leases create, and get/update of one Lease by name; endpointslices create, and get/update of
  one slice by name (both in the extender's namespace, a Role of the TLS and in-scheduler
  installs, which run two replicas): the replicas elect the one that decides, and it makes itself
  the Service's endpoint (server/leader.py; KubeLeases, KubeActiveEndpoint below).
- namespaces patch, by the Helm chart's pre-install/pre-upgrade hook only (`label-namespace`,
  its own ServiceAccount, allowed that one namespace by name): the Pod Security labels
  deploy/base/namespace.yaml gives the namespace, on the one `helm install --create-namespace`
  made without them (hack/helm/generate.py).

The verbs see these through the `Binder` and `EventSink` protocols (extender/server/verbs.py), so the
verbs are tested with plain fakes and served with these; they sit with the server, above the
verbs, and use the API client below the cache (extender/kube/client.py).
"""

from __future__ import annotations

import logging
import queue
import re
import threading
import time
from collections import OrderedDict
from datetime import UTC, datetime

from ..api.policy import API_GROUP, API_VERSION, POLICY_GENERATION_ANNOTATION
from ..api.rotation import PLURAL as ROTATION_PLURAL
from ..api.rotation import rotation_object
from ..kube.client import KubeApiError, KubeHttp
from ..state.objects import DELETION_COST_ANNOTATION, PodRecord, RotationRecord
from .gate_answers import GateAnswer
from .gate_patch import carries_gate, lift_patch
from .leader import LeaseConflict
from .ports import AlreadyBound, BindError, BindOutcomeUnknown

log = logging.getLogger(__name__)

COMPONENT = "placement-extender"


# The API server's answer to a Binding for a pod that has a node (pkg/registry/core/pod/storage):
# 409 Conflict, "pod NAME is already assigned to node "NODE"".
ALREADY_ASSIGNED = re.compile(r'already assigned to node "([^"]+)"')


class KubeBinder:
    def __init__(self, api: KubeHttp, timeout: float = 15.0) -> None:
        self.api = api
        self.timeout = timeout

    def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace, "uid": uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        try:
            self.api.create(f"/api/v1/namespaces/{namespace}/pods/{name}/binding", body, timeout=self.timeout)
        except KubeApiError as err:
            assigned = ALREADY_ASSIGNED.search(str(err)) if err.status == 409 else None
            if assigned is not None:
                raise AlreadyBound(f"{namespace}/{name} is bound to {assigned[1]} already", assigned[1]) from None
            raise BindError(f"binding {namespace}/{name} to {node} failed: {err}") from None
        except Exception as err:  # network faults: the scheduler retries the pod
            raise BindOutcomeUnknown(f"binding {namespace}/{name} to {node} got no answer: {err}") from None


class KubeEventSink:
    """Warning events on pods, sent from a background thread.

    The same (pod, reason, message) is sent at most once per `interval`, and the queue is bounded,
    so a burst of rejections over a large cluster never floods the API server or blocks a request.
    Invariant: the table that remembers what was sent holds at most `remembered` keys and only
    ones younger than `interval`, and keeping it so costs O(1) per event (oldest first, in an
    OrderedDict), however many pods churn through the cluster.
    """

    def __init__(self, api: KubeHttp, interval: float = 600.0, capacity: int = 1000, remembered: int = 10_000) -> None:
        self.api = api
        self.interval = interval
        self.remembered = remembered
        self._queue: queue.Queue[tuple[PodRecord, str, str]] = queue.Queue(capacity)
        self._sent: OrderedDict[tuple[str, str, str], float] = OrderedDict()  # key -> when, oldest first
        self._lock = threading.Lock()
        self.dropped = 0
        self._thread = threading.Thread(target=self._run, name="event-sink", daemon=True)
        self._thread.start()

    def pod_event(self, pod: PodRecord, reason: str, message: str) -> None:
        if not self._first_in_interval((pod.uid, reason, message)):
            return
        try:
            self._queue.put_nowait((pod, reason, message))
        except queue.Full:
            self.dropped += 1

    def _first_in_interval(self, key: tuple[str, str, str], now: float | None = None) -> bool:
        """Whether `key` was not sent within the interval; if so it is remembered as sent now.
        The clock is read under the lock, so the table is in order of time."""
        with self._lock:
            now = time.monotonic() if now is None else now
            while self._sent and now - next(iter(self._sent.values())) >= self.interval:
                self._sent.popitem(last=False)  # expired, oldest first
            sent = self._sent.get(key)
            if sent is not None and now - sent < self.interval:
                return False
            self._sent.pop(key, None)
            self._sent[key] = now
            if len(self._sent) > self.remembered:
                self._sent.popitem(last=False)
            return True

    def remembered_keys(self) -> int:
        return len(self._sent)

    def _run(self) -> None:
        while True:
            pod, reason, message = self._queue.get()
            stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            body = {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"generateName": f"{pod.name}.", "namespace": pod.namespace},
                "involvedObject": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "namespace": pod.namespace,
                    "name": pod.name,
                    "uid": pod.uid,
                },
                "reason": reason,
                "message": message[:1024],
                "type": "Warning",
                "source": {"component": COMPONENT},
                "reportingComponent": COMPONENT,
                "firstTimestamp": stamp,
                "lastTimestamp": stamp,
                "count": 1,
            }
            try:
                self.api.create(f"/api/v1/namespaces/{pod.namespace}/events", body, timeout=10)
            except Exception as err:  # an event is best effort; never let it kill the thread
                log.warning("could not record event %s on %s: %s", reason, pod.key, err)


class DiscardEvents:
    """`--no-events`: the verbs' events go nowhere (metrics and logs still say what happened)."""

    def pod_event(self, pod: PodRecord, reason: str, message: str) -> None:
        return None


class KubeRecordWriter:
    """Creates ZoneRotation objects from a background thread, so a decision never waits on the
    API server. An object that already exists wins (409: another replica or an operator wrote it
    first, and the watch brings it); a transient failure is retried a few times with backoff,
    and the decision stands in the process meanwhile (store.decided_rotations)."""

    ATTEMPTS = 5

    def __init__(self, api: KubeHttp, capacity: int = 1000) -> None:
        self.api = api
        self._queue: queue.Queue[RotationRecord] = queue.Queue(capacity)
        self.written = 0
        self.dropped = 0
        self._thread = threading.Thread(target=self._run, name="record-writer", daemon=True)
        self._thread.start()

    def zone_rotation(self, record: RotationRecord) -> None:
        try:
            self._queue.put_nowait(record)
        except queue.Full:
            self.dropped += 1

    def _run(self) -> None:
        while True:
            record = self._queue.get()
            body = rotation_object(record.namespace, record.statefulset, record.order, record.adopted)
            path = f"/apis/{API_GROUP}/{API_VERSION}/namespaces/{record.namespace}/{ROTATION_PLURAL}"
            for attempt in range(self.ATTEMPTS):
                try:
                    self.api.create(path, body, timeout=10)
                    self.written += 1
                    log.info(
                        "recorded the zone rotation of StatefulSet %s/%s: [%s]",
                        record.namespace,
                        record.statefulset,
                        ", ".join(record.order),
                    )
                    break
                except KubeApiError as err:
                    if err.status == 409:
                        break  # recorded already: the watch brings that one, and it wins
                    if err.status in (403, 404, 422):
                        log.error(
                            "could not record the zone rotation of StatefulSet %s/%s: %s (check that the ZoneRotation "
                            "CRD is installed and the extender's ClusterRole allows create on zonerotations)",
                            record.namespace,
                            record.statefulset,
                            err,
                        )
                        break
                    log.warning("recording the zone rotation of %s/%s failed: %s", record.namespace, record.name, err)
                except Exception as err:  # network faults: try again shortly
                    log.warning("recording the zone rotation of %s/%s failed: %s", record.namespace, record.name, err)
                time.sleep(min(2**attempt, 10))


class KubeGateWriter:
    """Narrows a gated pod's node affinity and lifts the ordinal-zone gate (extender/server/gate_patch.py),
    or lifts the in-scheduler placeable gate (extender/server/place_gate.py)."""

    def __init__(self, api: KubeHttp, timeout: float = 10.0) -> None:
        self.api = api
        self.timeout = timeout
        self.lifted = 0

    def lift(self, answer: GateAnswer) -> None:
        """One GET and one guarded PATCH. A pod that changed in between (the patch's test fails:
        409/422) or lost the gate is left to the next pass; other errors raise KubeApiError."""
        pod = answer.pod
        path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}"
        if answer.requirement is None:
            self._lift_only(answer, path)
            return
        obj = self.api.call("GET", path, timeout=self.timeout)
        if (
            not isinstance(obj, dict)
            or (obj.get("metadata") or {}).get("uid") != pod.uid
            or not carries_gate(obj, answer.gate)
        ):
            return
        try:
            self.api.call(
                "PATCH",
                path,
                body=lift_patch(obj, answer.requirement, answer.gate),
                timeout=self.timeout,
                content_type="application/json-patch+json",
            )
        except KubeApiError as err:
            if err.status == 409 or (err.status == 422 and "testing value /metadata/resourceVersion" in str(err)):
                return  # it changed since the GET (the patch's resourceVersion test): the next pass reads it again
            raise
        self.lifted += 1
        log.info("lifted the %s gate of %s: %s", answer.gate.rsplit("/", 1)[-1], pod.key, answer.why)

    def _lift_only(self, answer: GateAnswer, path: str) -> None:
        """A gate lifted with nothing narrowed (the placeable gate): one strategic-merge PATCH that
        deletes the gate by name, with the pod's uid as its precondition (a pod recreated under the
        name since the watch showed it fails, 422 "metadata.uid ... immutable", and is left to the
        next pass). No GET: the
        lift is on the path of every opted-in pod in in-scheduler mode, and the round trip halved
        its cost. A pod that has lost the gate meanwhile is unchanged by it."""
        pod = answer.pod
        body = {"metadata": {"uid": pod.uid}, "spec": {"schedulingGates": [{"$patch": "delete", "name": answer.gate}]}}
        try:
            self.api.call(
                "PATCH", path, body=body, timeout=self.timeout, content_type="application/strategic-merge-patch+json"
            )
        except KubeApiError as err:
            if err.status in (404, 409) or (err.status == 422 and "metadata.uid" in str(err)):
                return  # gone, or another pod now has the name (422: uid immutable): the next pass reads again
            raise
        self.lifted += 1
        log.info("lifted the %s gate of %s: %s", answer.gate.rsplit("/", 1)[-1], pod.key, answer.why)


def update_workload(api: KubeHttp, path: str, workload: dict) -> None:
    """adopt/retire's one write: PUT the workload as read and changed. Its resourceVersion makes a
    concurrent change fail the write (409) instead of being overwritten; the CLI then reads, decides
    and writes again (kube/client.py retry_on_conflict)."""
    body = {k: v for k, v in workload.items() if k != "status"}
    body.setdefault("apiVersion", "apps/v1")
    api.call("PUT", path, body=body, timeout=30)


def write_adopted_rotation(api: KubeHttp, record: RotationRecord, exists: bool) -> None:
    """adopt's record of where a StatefulSet's running pods are kept (ops/rollout.py), written
    before the template so the rollout it starts reads it: created, or, when the set has one, its
    `adopted` map merged (the order, decided once, is never rewritten)."""
    base = f"/apis/{API_GROUP}/{API_VERSION}/namespaces/{record.namespace}/{ROTATION_PLURAL}"
    body = rotation_object(record.namespace, record.statefulset, record.order, record.adopted)
    if not exists:
        api.create(base, body, timeout=30)
        return
    patch = {"spec": {"adopted": body["spec"]["adopted"]}}
    api.call("PATCH", f"{base}/{record.name}", body=patch, timeout=30, content_type="application/merge-patch+json")


def label_namespace(api: KubeHttp, name: str, labels: dict[str, str]) -> None:
    """Merge `labels` into the namespace's own (a merge patch: its other labels stay)."""
    patch = {"metadata": {"labels": labels}}
    api.call("PATCH", f"/api/v1/namespaces/{name}", body=patch, timeout=30, content_type="application/merge-patch+json")


class KubePodNudger:
    """Writes the policy generation on a waiting pod: an update kube-scheduler requeues it for."""

    def __init__(self, api: KubeHttp, timeout: float = 10.0) -> None:
        self.api = api
        self.timeout = timeout

    def nudge(self, pod: PodRecord, generation: str) -> None:
        self.api.call(
            "PATCH",
            f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}",
            body={"metadata": {"annotations": {POLICY_GENERATION_ANNOTATION: generation or "0"}}},
            timeout=self.timeout,
            content_type="application/merge-patch+json",
        )


class KubeDeletionCostWriter:
    """The scale-down controller's one write (its own ServiceAccount, deploy/optional/scale-down/):
    the pod-deletion-cost annotation a ReplicaSet's controller reads to pick the pods it deletes."""

    def __init__(self, api: KubeHttp, timeout: float = 10.0) -> None:
        self.api = api
        self.timeout = timeout

    def set_cost(self, pod: PodRecord, cost: int) -> None:
        self.api.call(
            "PATCH",
            f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}",
            body={"metadata": {"annotations": {DELETION_COST_ANNOTATION: str(cost)}}},
            timeout=self.timeout,
            content_type="application/merge-patch+json",
        )


class KubeLeases:
    """The extender replicas' Lease (server/leader.py), in the extender's namespace.

    RBAC (deploy/overlays/tls/extender.yaml, a Role in that namespace): create on leases, and get
    and update on this one Lease by name. Why: with two replicas, one cache of decisions and one
    set of reservations must decide, or two pods could each take the last place under a cap."""

    def __init__(self, api: KubeHttp, namespace: str, name: str, timeout: float = 5.0) -> None:
        self.api = api
        self.namespace = namespace
        self.name = name
        self.timeout = timeout
        self.path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"

    def get(self) -> tuple[dict, str] | None:
        try:
            lease = self.api.call("GET", f"{self.path}/{self.name}", timeout=self.timeout)
        except KubeApiError as err:
            if err.status == 404:
                return None
            raise
        return lease.get("spec") or {}, lease["metadata"].get("resourceVersion", "")

    def create(self, spec: dict) -> None:
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "labels": {"app.kubernetes.io/name": COMPONENT},
            },
            "spec": spec,
        }
        try:
            self.api.call("POST", self.path, body=body, timeout=self.timeout)
        except KubeApiError as err:
            if err.status == 409:
                raise LeaseConflict(str(err)) from None
            raise

    def update(self, spec: dict, resource_version: str) -> None:
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace, "resourceVersion": resource_version},
            "spec": spec,
        }
        try:
            self.api.call("PUT", f"{self.path}/{self.name}", body=body, timeout=self.timeout)
        except KubeApiError as err:
            if err.status == 409:
                raise LeaseConflict(str(err)) from None
            raise


def active_endpoint_slice(service: str, namespace: str, pod: str, pod_ip: str, port: int, port_name: str) -> dict:
    """The EndpointSlice that makes one pod the only endpoint of a Service without a selector."""
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{service}-active",
            "namespace": namespace,
            "labels": {
                "kubernetes.io/service-name": service,  # what kube-proxy reads the Service's endpoints from
                "endpointslice.kubernetes.io/managed-by": f"{COMPONENT}.placement.extender.dev",
                "app.kubernetes.io/name": COMPONENT,
            },
        },
        "addressType": "IPv6" if ":" in pod_ip else "IPv4",
        "ports": [{"name": port_name, "port": port, "protocol": "TCP"}],
        "endpoints": [
            {
                "addresses": [pod_ip],
                "conditions": {"ready": True},
                "targetRef": {"kind": "Pod", "name": pod, "namespace": namespace},
            }
        ],
    }


class KubeActiveEndpoint:
    """The active replica points the extender's Service at itself.

    RBAC (deploy/overlays/tls/extender.yaml, a Role in the extender's namespace): create on
    endpointslices, and get and update on the one slice `<service>-active` by name. Why: the
    Service has no selector (a selector would send half of kube-scheduler's calls to the standby,
    which refuses them); the replica that holds the Lease writes the Service's one endpoint, its
    own address, so a failover moves the Service within a kube-proxy sync."""

    def __init__(self, api: KubeHttp, slice_object: dict, timeout: float = 5.0) -> None:
        self.api = api
        self.slice = slice_object
        namespace, name = slice_object["metadata"]["namespace"], slice_object["metadata"]["name"]
        self.collection = f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices"
        self.path = f"{self.collection}/{name}"
        self.timeout = timeout

    def claim(self) -> None:
        try:
            current = self.api.call("GET", self.path, timeout=self.timeout)
        except KubeApiError as err:
            if err.status != 404:
                raise
            self.api.call("POST", self.collection, body=self.slice, timeout=self.timeout)
            return
        if all(current.get(k) == self.slice[k] for k in ("addressType", "ports", "endpoints")) and all(
            (current["metadata"].get("labels") or {}).get(k) == v for k, v in self.slice["metadata"]["labels"].items()
        ):
            return  # already this replica's
        body = dict(self.slice)
        body["metadata"] = {**self.slice["metadata"], "resourceVersion": current["metadata"]["resourceVersion"]}
        self.api.call("PUT", self.path, body=body, timeout=self.timeout)

    def vacate(self) -> None:
        """The slice without this replica (a graceful end): the Service has no endpoint until the
        next holder claims it, so kube-proxy refuses new calls at once instead of sending them to
        an address that is about to answer nothing. Only if the slice still names this replica."""
        current = self.api.call("GET", self.path, timeout=self.timeout)
        ours = {(e.get("targetRef") or {}).get("name") for e in self.slice["endpoints"]}
        if {(e.get("targetRef") or {}).get("name") for e in current.get("endpoints") or []} != ours:
            return
        body = {**current, "endpoints": []}
        self.api.call("PUT", self.path, body=body, timeout=self.timeout)
