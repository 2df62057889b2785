"""Per-decision facts derived once from the snapshot: domain counts, zone order, group size.

Everything here is O(nodes holding the group's pods + domains): the placed pods arrive counted
(engine.model.GroupCounts), only pods in flight are walked; the per-node rules then cost O(rules).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from ..policy import Cap, PlacementPolicySpec
from .model import NodeInfo, Placement, PodRequest, Snapshot
from .topology import Topology
from .zone_order import ZoneOrder, stable_zone_order


@dataclass
class Context:
    spec: PlacementPolicySpec
    pod: PodRequest
    snap: Snapshot
    zone_key: str = ""
    node_key: str = ""
    permitted: frozenset[str] | None = None
    keys: list[str] = field(default_factory=list)  # canonical topology keys the rules and scores read
    balance_keys: list[str] = field(default_factory=list)  # those the rules use
    node_position: int | None = None  # where the node key sits in keys, if a rule reads it
    counts: dict[str, dict[str, int]] = field(default_factory=dict)  # key -> domain -> group pods
    shard_counts: dict[str, dict[str, int]] = field(default_factory=dict)  # key -> domain -> pods of pod's shard
    min_counts: dict[str, int] = field(default_factory=dict)  # memo for rules.min_count
    caps: list[tuple[Cap, str, int | None]] = field(default_factory=list)  # (cap, canonical key, limit)
    node_load: Counter[str] = field(default_factory=Counter)  # node -> the group's pods bound or committed there
    zone_order: ZoneOrder | None = None
    ideal_zone: str | None = None

    @classmethod
    def build(cls, spec: PlacementPolicySpec, pod: PodRequest, snap: Snapshot) -> Context:
        ctx = cls(spec=spec, pod=pod, snap=snap)
        ctx.zone_key = spec.topology.zone
        ctx.node_key = spec.topology.node
        ctx.permitted = spec.zones.permitted() if spec.zones else None
        keys = {spec.canonical_key(k) for k in spec.topology_keys()}
        if spec.uses_zones:
            keys.add(ctx.zone_key)
        ctx.balance_keys = sorted(keys)  # the domains the rules use: scoring prefers the emptier ones
        if spec.zones is not None and spec.zones.weights:
            keys.add(ctx.zone_key)  # every domain a rule or a score reads is part of a node's signature
        ctx.keys = sorted(keys)
        ctx.node_position = ctx.keys.index(ctx.node_key) if ctx.node_key in ctx.keys else None
        ctx.caps = [(c, spec.canonical_key(c.topologyKey), c.limit(snap.group_size)) for c in spec.caps]
        ctx.counts = {k: defaultdict(int) for k in ctx.keys}
        ctx.shard_counts = {k: defaultdict(int) for k in ctx.keys}
        # Bound pods are counted per node first (in C), then each occupied node's domains come
        # from the per-topology-version index: the walk over the group is one Counter, not a
        # label lookup per pod and key.
        index = snap.topology.values_index(tuple(ctx.keys), ctx.zone_key, ctx.node_key)
        ctx.node_load = snap.node_pods()
        my_shard = pod.shard
        siblings = snap.shard_node_pods(my_shard) if my_shard is not None else Counter()
        for target, per_node in ((ctx.counts, ctx.node_load), (ctx.shard_counts, siblings)):
            columns = [target[k] for k in ctx.keys]
            for node, n in per_node.items():
                values = index.get(node)
                if values is None:  # the node is gone; its pods will be too
                    continue
                for column, value in zip(columns, values, strict=True):
                    if value is not None:
                        column[value] += n
        for p in snap.placements:  # tentative placements known only by the domains they share
            if p.node is None and p.domains:
                sibling = my_shard is not None and p.shard == my_shard
                for key in ctx.keys:
                    value = p.domains.get(key)
                    if value is not None:
                        ctx.counts[key][value] += 1
                        if sibling:
                            ctx.shard_counts[key][value] += 1
        if spec.ordinalZones is not None and pod.ordinal is not None and pod.shard is not None:
            ctx.zone_order = ctx.shard_zone_order(pod.shard)
            ctx.ideal_zone = ctx.zone_order.zone_for(pod.ordinal)
        return ctx

    # -- domains --
    def where(self, key: str, value: str) -> str:
        """How a reason names a domain: "this node" for the node key (the node's name is already
        the answer's key, and the reason is then shared by every node in the same situation)."""
        return "this node" if key == self.node_key else f"{key}={value}"

    def signature(self, node: NodeInfo, values: tuple[str | None, ...] | None = None) -> tuple:
        """Everything the hard rules read about a node: its domains, and for the node key its
        group and shard pod counts instead of its name. Nodes with one signature get one verdict."""
        if values is None:
            values = tuple(self.domain(node, k) for k in self.keys)
        at = self.node_position
        if at is None or values[at] is None:
            return values
        key, name = self.keys[at], values[at]
        return values[:at] + ((self.counts[key].get(name, 0), self.shard_counts[key].get(name, 0)),) + values[at + 1 :]

    def domain(self, node: NodeInfo, key: str) -> str | None:
        return Topology.domain(node, key, self.zone_key, self.node_key)

    def placement_domain(self, p: Placement, key: str) -> str | None:
        if p.node is None:
            return p.domains.get(key) if p.domains else None
        node = self.snap.topology.nodes.get(p.node)
        if node is None:  # the node is gone; the pod will be too
            return None
        return self.domain(node, key)

    def common_domains(self, names: list[str]) -> dict[str, str]:
        """The domains every node of `names` shares (often their zone), by canonical key."""
        index = self.snap.topology.values_index(tuple(self.keys), self.zone_key, self.node_key)
        rows = [index.get(n) for n in names]
        shared: dict[str, str] = {}
        if rows and all(r is not None for r in rows):
            for i, key in enumerate(self.keys):
                first = rows[0][i]  # type: ignore[index]
                if first is not None and all(r[i] == first for r in rows):  # type: ignore[index]
                    shared[key] = first
        return shared

    def eligible_domains(self, key: str) -> dict[str, int]:
        return self.snap.topology.eligible_domains(key, self.zone_key, self.permitted, self.node_key)

    # -- group size --
    @property
    def group_size(self) -> int | None:
        return self.snap.group_size

    # -- ordinal zones --
    def shard_zone_order(self, shard: str) -> ZoneOrder:
        """Zone order for one StatefulSet, from its placed pods and bound volumes (see zone_order)."""
        evidence: dict[int, str] = dict(self.snap.volume_zones.get(shard, {}))
        nodes = self.snap.topology.nodes
        for ordinal, where in self.snap.ordinal_nodes(shard).items():
            if isinstance(where, str):
                node = nodes.get(where)
                zone = self.domain(node, self.zone_key) if node is not None else None
            else:
                zone = self.placement_domain(where, self.zone_key)
            if zone is not None:
                evidence[ordinal] = zone
        explicit = self.spec.ordinalZones.order if self.spec.ordinalZones else None
        return stable_zone_order(self.eligible_domains(self.zone_key), evidence, explicit)
