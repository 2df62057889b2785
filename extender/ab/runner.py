"""Run one scenario under (A) the default scheduler with the translated native constraints and
(B) our scheduler with the policy, on the same local control plane, K times each.

Arrival order is shuffled per repetition: pods are created behind a scheduling gate and
released one by one in a random interleaving (a StatefulSet's ordinal order kept within each
shard), so both sides see the same sequences. Everything measured is read from the API server.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from ..api.policy import API_GROUP, API_VERSION, KIND, PLURAL, POLICY_REF_ANNOTATION, PlacementPolicySpec
from ..devcluster.api import Api, ApiError, wait_for
from ..devcluster.cluster import SCHEDULER_NAME, STORAGE_CLASS, LocalCluster
from ..engine.checker import Member, max_skew, violations, zones_of
from ..ops.translate import translate
from ..state.objects import parse_node, parse_node_constraints
from .scenario import Scenario, Step

SIDES = ("native", "extender")
GATE = "ab.placement.extender.dev/arrival"
GROUP_LABEL = "ab.placement.extender.dev/group"


@dataclass
class StepResult:
    step: str
    pods: int
    placed: int
    pending: int
    violations: list[str]
    emptiedZones: list[str]
    maxSkew: dict[str, int]
    seconds: float


@dataclass
class RunResult:
    side: str
    repetition: int
    arrival: list[str] = field(default_factory=list)
    steps: list[StepResult] = field(default_factory=list)
    final: dict[str, str | None] = field(default_factory=dict)  # pod -> node, after the last step
    pendingPods: list[str] = field(default_factory=list)  # noqa: N815 (JSON name) pods with no node then

    def summary(self) -> dict[str, Any]:
        keys = {k for s in self.steps for k in s.maxSkew}
        return {
            "violations": sum(len(s.violations) for s in self.steps),
            "pending": max((s.pending for s in self.steps), default=0),
            "emptiedZones": sum(len(s.emptiedZones) for s in self.steps),
            "maxSkew": {k: max(s.maxSkew.get(k, 0) for s in self.steps) for k in sorted(keys)},
            "secondsToPlace": round(sum(s.seconds for s in self.steps), 2),
        }


class Runner:
    def __init__(self, cluster: LocalCluster, scenario: Scenario, *, log: Callable[[str], None] = print) -> None:
        self.cluster = cluster
        self.api: Api = cluster.admin  # type: ignore[assignment]
        self.scenario = scenario
        self.spec = PlacementPolicySpec.model_validate(scenario.policy_spec())
        self.log = log

    # ------------------------------------------------------------------ entry point
    def run(self) -> dict[str, Any]:
        results: dict[str, list[RunResult]] = {side: [] for side in SIDES}
        for rep in range(self.scenario.repetitions):
            for side in SIDES:
                result = self.run_once(side, rep)
                results[side].append(result)
                self.log(f"{side:>8} rep {rep}: {result.summary()}")
        return {
            "scenario": self.scenario.name,
            "description": self.scenario.description,
            "repetitions": self.scenario.repetitions,
            "nodes": self.scenario.nodes,
            "policy": self.scenario.policy_spec(),
            "sides": {
                side: {"summary": summarise(runs), "runs": [dict(asdict(r), **r.summary()) for r in runs]}
                for side, runs in results.items()
            },
        }

    def run_once(self, side: str, rep: int) -> RunResult:
        ns = self.cluster.namespace(f"ab-{side}-{rep}")
        rng = random.Random(f"{self.scenario.name}/{rep}")  # the same sequence for both sides
        result = RunResult(side, rep)
        shards, replicas = 0, 0
        if side == "extender":
            self.api.create(
                f"/apis/{API_GROUP}/{API_VERSION}/namespaces/{ns}/{PLURAL}",
                {
                    "apiVersion": f"{API_GROUP}/{API_VERSION}",
                    "kind": KIND,
                    "metadata": {"name": self.scenario.workload.name},
                    "spec": self.scenario.policy_spec(),
                },
            )
        for step in self.scenario.steps:
            before = self._members(ns)
            started = time.monotonic()
            shards, replicas = self._apply(side, ns, step, shards, replicas)
            result.arrival += self._release(ns, rng)
            expected = shards * replicas
            self._settle(ns, expected)
            seconds = time.monotonic() - started
            result.steps.append(self._measure(ns, step, expected, before, seconds))
        result.final = {m.pod: m.node for m in self._members(ns)}
        result.pendingPods = sorted(
            f"{ns}/{p['metadata']['name']}"
            for p in self._pods(ns)
            if not p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")
        )
        self.api.delete(f"/api/v1/namespaces/{ns}")
        return result

    # ------------------------------------------------------------------ workload
    def _sts_name(self, shard: int) -> str:
        w = self.scenario.workload
        return w.name if w.shards == 1 and shard == 0 else f"{w.name}-{shard}"

    def _statefulset(self, side: str, shard: int, replicas: int, size: int) -> dict[str, Any]:
        w = self.scenario.workload
        name = self._sts_name(shard)
        pod_spec: dict[str, Any] = {
            "schedulerName": SCHEDULER_NAME if side == "extender" else "default-scheduler",
            "schedulingGates": [{"name": GATE}],
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "main", "image": "registry.invalid/db:1"}],
        }
        if w.nodeSelector:
            pod_spec["nodeSelector"] = dict(w.nodeSelector)
        annotations = {}
        if side == "extender":
            annotations[POLICY_REF_ANNOTATION] = w.name
        else:
            pod_spec.update(self._native_fragment(size))
        spec: dict[str, Any] = {
            "serviceName": name,
            "replicas": replicas,
            "podManagementPolicy": "Parallel",
            # OnDelete: re-translated constraints reach new pods only, as in the NetEase Redis operator.
            "updateStrategy": {"type": "OnDelete"},
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": self._pod_labels(name), "annotations": annotations}, "spec": pod_spec},
        }
        if w.volumes:
            spec["volumeClaimTemplates"] = [
                {
                    "metadata": {"name": "data"},
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "storageClassName": STORAGE_CLASS,
                        "resources": {"requests": {"storage": "1Gi"}},
                    },
                }
            ]
        return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name}, "spec": spec}

    def _pod_labels(self, name: str) -> dict[str, str]:
        selector = self.spec.group.selector
        return {**(selector.matchLabels if selector else {}), "app": name, GROUP_LABEL: self.scenario.workload.name}

    def _native_fragment(self, size: int) -> dict[str, Any]:
        return translate(self.spec, group_size=size).fragment

    def _apply(self, side: str, ns: str, step: Step, shards: int, replicas: int) -> tuple[int, int]:
        w = self.scenario.workload
        sts_path = f"/apis/apps/v1/namespaces/{ns}/statefulsets"
        if step.action == "create":
            shards, replicas = w.shards, w.replicas
            for i in range(shards):
                self.api.create(sts_path, self._statefulset(side, i, replicas, shards * replicas))
            return shards, replicas
        if step.action == "deletePods":
            for pod in self._pods(ns):
                self.api.delete(f"/api/v1/namespaces/{ns}/pods/{pod['metadata']['name']}")
            return shards, replicas
        new_shards = step.shards if step.shards is not None else shards
        new_replicas = step.replicas if step.replicas is not None else replicas
        size = new_shards * new_replicas
        for i in range(min(shards, new_shards)):
            patch: dict[str, Any] = {"spec": {"replicas": new_replicas}}
            if side == "native":  # the operator recomputes maxSkew for the new size and updates every StatefulSet
                patch["spec"]["template"] = {"spec": self._native_fragment(size)}
            self.api.merge_patch(f"{sts_path}/{self._sts_name(i)}", patch)
        for i in range(shards, new_shards):
            self.api.create(sts_path, self._statefulset(side, i, new_replicas, size))
        for i in range(new_shards, shards):
            self.api.delete(f"{sts_path}/{self._sts_name(i)}", propagationPolicy="Background")
        return new_shards, new_replicas

    def _pods(self, ns: str) -> list[dict[str, Any]]:
        return [
            p
            for p in self.api.list(
                f"/api/v1/namespaces/{ns}/pods", labelSelector=f"{GROUP_LABEL}={self.scenario.workload.name}"
            )
            if not p["metadata"].get("deletionTimestamp")
        ]

    def _release(self, ns: str, rng: random.Random) -> list[str]:
        """Lift the gates in a random interleaving of shards, ordinal order within each."""

        def gated_all() -> list[dict[str, Any]] | None:
            items = self._pods(ns)
            expected = self._expected_pods(ns)
            return items if len(items) >= expected else None

        try:
            items = wait_for("the workload's pods to be created", gated_all, 60)
        except TimeoutError:
            items = self._pods(ns)
        queues: dict[str, list[str]] = {}
        for p in items:
            if p["spec"].get("schedulingGates"):
                name = p["metadata"]["name"]
                queues.setdefault(name.rsplit("-", 1)[0], []).append(name)
        for q in queues.values():
            q.sort(key=lambda n: int(n.rsplit("-", 1)[1]))
            if self.scenario.arrival == "random":
                rng.shuffle(q)
        draw = [shard for shard, q in sorted(queues.items()) for _ in q]
        rng.shuffle(draw)
        order = [queues[shard].pop(0) for shard in draw]
        low, high = self.scenario.jitterMs
        for name in order:
            try:
                self.api.merge_patch(f"/api/v1/namespaces/{ns}/pods/{name}", {"spec": {"schedulingGates": None}})
            except ApiError as err:
                if err.status != 404:
                    raise
            time.sleep(rng.uniform(low, high) / 1000)
        return order

    def _expected_pods(self, ns: str) -> int:
        total = 0
        for sts in self.api.list(f"/apis/apps/v1/namespaces/{ns}/statefulsets"):
            if not sts["metadata"].get("deletionTimestamp"):
                total += int(sts["spec"].get("replicas", 0))
        return total

    def _settle(self, ns: str, expected: int) -> None:
        """Until every expected pod is bound, or nothing moved for settleSeconds."""
        last, progress_at = -1, time.monotonic()
        while True:
            items = self.api.list(
                f"/api/v1/namespaces/{ns}/pods", labelSelector=f"{GROUP_LABEL}={self.scenario.workload.name}"
            )
            live = [p for p in items if not p["metadata"].get("deletionTimestamp")]
            bound = sum(1 for p in live if p["spec"].get("nodeName"))
            if bound == expected and len(items) == expected:
                return
            if bound != last:
                last, progress_at = bound, time.monotonic()
            if time.monotonic() - progress_at > self.scenario.settleSeconds:
                return
            time.sleep(0.2)

    # ------------------------------------------------------------------ measurement
    def _nodes(self):
        return {n["metadata"]["name"]: parse_node(n) for n in self.api.list("/api/v1/nodes")}

    def _members(self, ns: str) -> list[Member]:
        members = []
        for p in self._pods(ns):
            node = p["spec"].get("nodeName")
            if not node:
                continue
            name = p["metadata"]["name"]
            shard, _, ordinal = name.rpartition("-")
            members.append(
                Member(
                    f"{ns}/{name}",
                    node,
                    shard,
                    int(ordinal),
                    self._volume_zone(ns, name),
                    parse_node_constraints(p["spec"]),
                )
            )
        return members

    def _volume_zone(self, ns: str, pod: str) -> str | None:
        if not self.scenario.workload.volumes:
            return None
        try:
            claim = self.api.get(f"/api/v1/namespaces/{ns}/persistentvolumeclaims/data-{pod}")
            volume = (claim.get("spec") or {}).get("volumeName")
            if not volume:
                return None
            return (self.api.get(f"/api/v1/persistentvolumes/{volume}")["metadata"].get("labels") or {}).get(
                "topology.kubernetes.io/zone"
            )
        except ApiError:
            return None

    def _measure(self, ns: str, step: Step, expected: int, before: list[Member], seconds: float) -> StepResult:
        nodes = self._nodes()
        members = self._members(ns)
        emptied: list[str] = []
        if expected and len(before) > expected:
            # Zones a scale-down emptied beyond what the new size forces (1 pod can hold 1 zone).
            held_before, held_after = zones_of(self.spec, before, nodes), zones_of(self.spec, members, nodes)
            lost = sorted(held_before - held_after)
            forced = max(0, len(held_before) - expected)
            emptied = lost[: max(0, len(lost) - forced)]
        keys = sorted(
            {self.spec.canonical_key(k) for k in self.spec.topology_keys()}
            | ({self.spec.topology.zone} if self.spec.uses_zones else set())
        )
        label = step.action + "".join(
            f" {k}={v}" for k, v in (("shards", step.shards), ("replicas", step.replicas)) if v is not None
        )
        return StepResult(
            step=label,
            pods=expected,
            placed=len(members),
            pending=max(0, expected - len(members)),
            violations=[f"{v.rule}: {v.message}" for v in violations(self.spec, members, nodes, expected)],
            emptiedZones=emptied,
            maxSkew={k: max_skew(self.spec, k, members, nodes) for k in keys},
            seconds=round(seconds, 2),
        )


def summarise(runs: list[RunResult]) -> dict[str, Any]:
    summaries = [r.summary() for r in runs]
    keys = sorted({k for s in summaries for k in s["maxSkew"]})
    times = [s["secondsToPlace"] for s in summaries]
    return {
        "runs": len(runs),
        "runsWithViolations": sum(1 for s in summaries if s["violations"]),
        "violations": sum(s["violations"] for s in summaries),
        "runsWithPending": sum(1 for s in summaries if s["pending"]),
        "pending": sum(s["pending"] for s in summaries),
        "emptiedZones": sum(s["emptiedZones"] for s in summaries),
        "maxSkew": {k: max(s["maxSkew"].get(k, 0) for s in summaries) for k in keys},
        "medianSecondsToPlace": round(statistics.median(times), 2) if times else None,
    }
