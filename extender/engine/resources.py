"""Node resources as kube-scheduler counts them: a pod's requests, and whether a node has room.

Why the extender counts resources at all, though they are kube-scheduler's job: two schedulers
sharing nodes (the extender's kube-scheduler beside the cluster's default one) each see the
other's pods only once they are bound, so both can give the same free CPU away (measured: every
run of a 40 + 40 pod burst ended with nodes over their allocatable CPU, up to +18 CPU; the kubelet
then fails the excess with OutOfcpu). The bind verb is the last moment before a Binding is
written, and the extender's watch sees every scheduler's pods: it refuses a node the pods bound
there (by anyone) plus this one would overfill, and kube-scheduler retries the pod elsewhere.

Invariant held at bind: for every resource the pod requests (and the pod count),
    requests of the pods on the node (bound, terminating, or committed by this extender) + the
    pod's requests <= the node's allocatable,
counting as kube-scheduler's NodeResourcesFit does (k8s.io/component-helpers resource.PodRequests):
containers summed; an init container's requests plus the sidecars (restartPolicy Always) started
before it, the highest of those if above; the pod's overhead added; pod-level resources
(spec.resources) for the resources they set. Pure functions over plain data, no I/O.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1), "k": Decimal(10**3)}
_DECIMAL |= {"M": Decimal(10**6), "G": Decimal(10**9), "T": Decimal(10**12), "P": Decimal(10**15), "E": Decimal(10**18)}

Resources = dict[str, int]


@functools.lru_cache(maxsize=4096)  # a cluster's pods repeat a few dozen strings ("100m", "64Mi")
def quantity(name: str, value: Any) -> int | None:
    """A Kubernetes quantity in the unit kube-scheduler counts it in: CPU in millicores, every
    other resource in its base unit (bytes, devices), rounded up as the API server rounds. None
    for a value that is not a quantity (a malformed object reads as requesting nothing)."""
    text = str(value).strip()
    if not text or len(text) > 64:
        return None
    try:
        if text[-2:] in _BINARY:
            number = Decimal(text[:-2]) * _BINARY[text[-2:]]
        elif text[-1:] in _DECIMAL and not text[-1:].isdigit():
            number = Decimal(text[:-1]) * _DECIMAL[text[-1:]]
        else:
            number = Decimal(text)  # plain, or with a decimal exponent (1e3)
    except (InvalidOperation, ValueError):
        return None
    if not number.is_finite() or number < 0:
        return None
    if name == CPU:
        number *= 1000
    return int(math.ceil(number))


def _requests(resources: Any) -> Resources:
    requests = resources.get("requests") if isinstance(resources, dict) else None
    out: Resources = {}
    if isinstance(requests, dict):
        for name, value in requests.items():
            amount = quantity(str(name), value if isinstance(value, (str, int)) else str(value))
            if amount:
                out[str(name)] = amount
    return out


def _add(a: Mapping[str, int], b: Mapping[str, int]) -> Resources:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return out


def _max(a: Mapping[str, int], b: Mapping[str, int]) -> Resources:
    out = dict(a)
    for k, v in b.items():
        out[k] = max(out.get(k, 0), v)
    return out


def pod_requests(spec: Mapping[str, Any]) -> Resources:
    """What the pod takes from a node, as kube-scheduler's NodeResourcesFit counts it (the pod
    itself included, as one of the node's `pods`)."""
    containers = spec.get("containers") if isinstance(spec.get("containers"), list) else []
    total: Resources = {}
    for c in containers:
        if isinstance(c, dict):
            total = _add(total, _requests(c.get("resources")))
    sidecars: Resources = {}
    init_peak: Resources = {}
    inits = spec.get("initContainers") if isinstance(spec.get("initContainers"), list) else []
    for c in inits:
        if not isinstance(c, dict):
            continue
        own = _requests(c.get("resources"))
        if c.get("restartPolicy") == "Always":  # a sidecar: runs beside the containers from here on
            total = _add(total, own)
            sidecars = _add(sidecars, own)
            running = sidecars
        else:
            running = _add(own, sidecars)
        init_peak = _max(init_peak, running)
    total = _max(total, init_peak)
    pod_level = _requests(spec.get("resources"))  # PodLevelResources: set for cpu / memory, it is the pod's
    for name in (CPU, MEMORY):
        if name in pod_level:
            total[name] = pod_level[name]
    overhead = spec.get("overhead")
    if isinstance(overhead, dict):
        total = _add(total, _requests({"requests": overhead}))
    total[PODS] = 1
    return total


def node_allocatable(status: Mapping[str, Any]) -> Resources:
    """A node's status.allocatable, in the same units."""
    found = status.get("allocatable") if isinstance(status, Mapping) else None
    out: Resources = {}
    if isinstance(found, dict):
        for name, value in found.items():
            amount = quantity(str(name), value if isinstance(value, (str, int)) else str(value))
            if amount is not None:
                out[str(name)] = amount
    return out


def sum_requests(requests: Iterable[Mapping[str, int]]) -> Resources:
    out: Resources = {}
    for r in requests:
        out = _add(out, r)
    return out


def resource_shortfall(
    pod: Mapping[str, int], used: Mapping[str, int], capacity: Mapping[str, int], ignored: Iterable[str] = ()
) -> list[str]:
    """The resources the node lacks for the pod (`used`: what its pods already request), each as
    a reason; empty when it fits. A resource the node does not list has none (as kube-scheduler:
    an extended resource the node does not advertise does not fit), except `ignored` ones (the
    extender's own opt-in resource in in-scheduler mode, which no node advertises)."""
    skip = set(ignored)
    out = []
    for name, amount in sorted(pod.items()):
        if amount <= 0 or name in skip:
            continue
        have = capacity.get(name, 0)
        taken = used.get(name, 0)
        if taken + amount > have:
            out.append(f"{_show(name, taken)} of {_show(name, have)} {name} requested, {_show(name, amount)} more")
    return out


def _show(name: str, amount: int) -> str:
    if name == CPU:
        return f"{amount}m" if amount % 1000 else f"{amount // 1000}"
    if name == MEMORY or name.startswith("hugepages-") or name == "ephemeral-storage":
        for unit, size in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if amount >= size and amount % size == 0:
                return f"{amount // size}{unit}"
    return str(amount)
