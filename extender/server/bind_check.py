"""The bind verb's last word: whose pod it is, the pod's own node constraints, and the hard rules
(filters for other pods may have raced this one), judged again against the cache as it is now,
before the Binding is written. Bind is the privileged step: everything it reads comes from the
watch, never from a request."""

from __future__ import annotations

from ..api.policy import OPT_IN_RESOURCE, PolicyError
from ..engine import PlacementKind, hard_rule_reason, resource_shortfall
from ..state.objects import PodRecord
from ..state.store import ClusterStore


def ownership_refusal(store: ClusterStore, pod: PodRecord) -> str | None:
    """Why the extender may not bind `pod` at all: it is not its own pod as the API server shows
    it (ClusterStore.owns: a schedulerName it serves, or the opt-in request). Whoever sends the
    request, only the extender's own pods are ever bound."""
    if store.owns(pod):
        return None
    served = ", ".join(sorted(store.scheduler_names))
    return (
        f"pod {pod.key} is not this extender's: its schedulerName is {pod.scheduler_name} (served: {served}) "
        f"and it does not request {OPT_IN_RESOURCE}"
    )


def node_refusal(store: ClusterStore, pod: PodRecord, node: str) -> str | None:
    """Why the pod's own constraints exclude `node` (its nodeSelector, required node affinity, or
    a NoSchedule/NoExecute taint it does not tolerate), or None. kube-scheduler's filters never
    pick such a node; a bind naming one did not come from them. A node the cache does not hold
    is left to the hard rules, which refuse it."""
    info = store.topology.nodes.get(node)
    if info is None:
        return None
    if not pod.constraints.matches_affinity(info):
        return f"the pod's own nodeSelector or required node affinity excludes {node}"
    if not pod.constraints.tolerates_taints(info):
        return f"{node} has a NoSchedule or NoExecute taint the pod does not tolerate"
    return None


def hard_rule_refusal(store: ClusterStore, pod: PodRecord, node: str) -> str | None:
    """Why the pod may not go to `node` under its policy's hard rules, or None. Called under the
    store lock.

    A refusal must not rest on a guess. The rules are checked against the bound and committed
    placements only; if they refuse, they are checked again with the tentative ones (other
    pods' filter and prioritize holds, not bound yet) counted too, and the pod is refused only
    if both refuse. Caps and anti-affinity refuse on the first view alone (more pods can only
    add to a domain), but a spread's emptiest domain may be about to fill: in the e2e burst,
    checking the first view alone refused 2-7% of binds for a skew the pods in flight were
    already closing.
    """
    try:
        spec = store.resolve_policy(pod)
        if spec is None:
            return None
        request, snap = store.decision_inputs(pod, spec, tentative=False)
    except PolicyError as err:
        return str(err)
    reason = hard_rule_reason(spec, request, snap, node)
    if reason is not None:
        request, snap = store.decision_inputs(pod, spec, tentative=True)
        if hard_rule_reason(spec, request, snap, node) is None:
            return None  # refused only on a view without the pods in flight: not a sure refusal
    return reason


def resource_refusal(
    store: ClusterStore, pod: PodRecord, node: str, ignored: frozenset[str] = frozenset()
) -> str | None:
    """Why `node` has no room for the pod, counting every pod the watch shows there (any
    scheduler's, terminating ones included) and the pods this extender committed there that the
    watch does not show yet; None when it fits, or when the node's allocatable is unknown (its
    own kube-scheduler's NodeResourcesFit then stands alone). Called under the store lock.

    A second kube-scheduler sees the first's pods only once they are bound; this is the last
    moment to notice one that took the room meanwhile (engine/resources.py)."""
    capacity = store.allocatable.get(node)
    if capacity is None:
        return None
    used = dict(store.node_requests.get(node, {}))
    for reservation in store.reservations.peek_all():
        other = reservation.pod
        if reservation.node == node and reservation.kind is PlacementKind.COMMITTED and other.uid != pod.uid:
            if other.uid not in store.pods or store.pods[other.uid].node is None:
                for name, amount in other.requests:
                    used[name] = used.get(name, 0) + amount
    if store.pods.get(pod.uid) is not None and store.pods[pod.uid].node == node:
        return None  # already there (a retried bind of a bound pod): counted once
    short = resource_shortfall(dict(pod.requests), used, capacity, ignored)
    if not short:
        return None
    return f"node {node} has no room for the pod now (another scheduler may have bound there): " + "; ".join(short)
