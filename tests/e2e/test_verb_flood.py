"""Health a flood of verb requests cannot fail, and kube-scheduler's pods still placed.

200 callers, each on its own kept-alive connection, send filters for made-up pods to the verb
port for 30 s (as a stranger that reaches the port could: the extender answers each, refusing
the unknown pod). Every 0.5 s a probe connects anew and asks /readyz, as the kubelet's probes do:
on the verb port (what the default install's probes once asked) and on the health
listener the installs now probe (serve --health-listen). Every answer must be 200 within 2 s;
before, a just-accepted connection was closed to make room before its request was read (12 of 87
probes RemoteDisconnected when measured). Meanwhile a 6-pod StatefulSet (1 a node) is
created and must be placed, one a node.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter

import pytest
import requests

from extender.devcluster.api import wait_for
from extender.devcluster.cluster import zoned_nodes
from extender.devcluster.processes import free_port
from parallel import machine_alone

from .workloads import create_statefulset, pods, statefulset

pytestmark = pytest.mark.e2e

HEALTH_PORT = free_port()
CLUSTER_OPTIONS = {"extender_args": [f"--health-listen=127.0.0.1:{HEALTH_PORT}"]}
CALLERS, SECONDS, PROBE_EVERY = 200, 30.0, 0.5
HOST = "kubernetes.io/hostname"


def _made_up_filter(nodes: list[str]) -> dict:
    name = f"ghost-{uuid.uuid4().hex[:8]}"
    pod = {
        "metadata": {"name": name, "namespace": "nowhere", "uid": str(uuid.uuid4()), "labels": {"app": "ghost"}},
        "spec": {"schedulerName": "placement-scheduler", "containers": [{"name": "c", "image": "x"}]},
    }
    return {"Pod": pod, "NodeNames": nodes}


def _probe(url: str) -> int | str:
    """One probe: a new connection, /readyz, 2 s to answer."""
    try:
        with requests.Session() as session:
            session.trust_env = False
            return session.get(url, timeout=2, headers={"Connection": "close"}).status_code
    except requests.RequestException as err:
        return type(err).__name__


def _flood_and_probe(api, ns: str, verb_port: int, callers: list, stop: threading.Event, probes: dict) -> None:  # noqa: ANN001
    try:
        for caller in callers:
            caller.start()
        started = time.monotonic()
        create_statefulset(
            api, ns, statefulset("real", 6, policy={"caps": [{"topologyKey": HOST, "max": 1}]}, parallel=True)
        )
        while time.monotonic() - started < SECONDS:
            probes["verb port"].append(_probe(f"http://127.0.0.1:{verb_port}/readyz"))
            probes["health listener"].append(_probe(f"http://127.0.0.1:{HEALTH_PORT}/readyz"))
            time.sleep(PROBE_EVERY)
    finally:
        stop.set()
        for caller in callers:
            caller.join(15)


def test_probes_and_placement_hold_through_a_flood_of_made_up_filters(cluster, scenario) -> None:  # noqa: ANN001
    api = cluster.admin
    nodes = cluster.add_nodes(zoned_nodes({"vf-a": 6}, prefix="vf"))
    ns = cluster.namespace("verb-flood")
    verb_port = cluster.ports["extender"]
    stop = threading.Event()
    answered = Counter()

    def flood() -> None:
        with requests.Session() as session:
            session.trust_env = False
            while not stop.is_set():
                try:
                    status = session.post(
                        f"http://127.0.0.1:{verb_port}/filter", json=_made_up_filter(nodes), timeout=10
                    ).status_code
                    answered[status] += 1
                except requests.RequestException as err:
                    answered[type(err).__name__] += 1

    callers = [threading.Thread(target=flood, daemon=True) for _ in range(CALLERS)]
    probes: dict[str, list] = {"verb port": [], "health listener": []}
    # 200 callers flood the machine and the probes are held to 2 s: the flood runs with no other
    # test beside it (tests/parallel.py); the cluster's setup does not need to
    with machine_alone():
        _flood_and_probe(api, ns, verb_port, callers, stop, probes)
    placed = wait_for(
        "the 6-pod set placed",
        lambda: (p := [x for x in pods(api, ns, "app=real") if x["spec"].get("nodeName")]) and len(p) == 6 and p,
        120,
    )
    per_node = Counter(p["spec"]["nodeName"] for p in placed)
    failed = {where: [a for a in answers if a != 200] for where, answers in probes.items()}
    scenario.pods_placed, scenario.violations = 6, sum(c - 1 for c in per_node.values() if c > 1)
    scenario.note = (
        f"{CALLERS} callers, {sum(answered.values())} made-up filters in {SECONDS:.0f} s ({dict(answered)}); "
        f"probes on fresh connections: verb port {len(probes['verb port']) - len(failed['verb port'])}"
        f"/{len(probes['verb port'])} 200, health listener "
        f"{len(probes['health listener']) - len(failed['health listener'])}/{len(probes['health listener'])} 200; "
        f"the 6-pod set placed, {max(per_node.values())} a node at most"
    )
    print(f"\n{scenario.note}")
    assert not failed["verb port"] and not failed["health listener"], (failed, scenario.note)
    assert max(per_node.values()) == 1, per_node
