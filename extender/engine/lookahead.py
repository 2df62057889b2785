"""Dead-end avoidance: will the rest of the group still fit after this pod lands here?

NetEase's 3-shard cluster (seed 002, appendix 2) deadlocks when pods are placed greedily: every
step is legal, yet the last pod has nowhere to go. With the group's size known, the pods still
to come are known too (per StatefulSet: which ordinals, hence which zones), so each candidate
can be checked by a bounded search for a complete placement of the rest.

The search runs over node *classes*, not nodes: nodes that agree on every non-node domain the
hard rules use and hold the same group pods are interchangeable, so a 5,000-node cluster with
three zones has a handful of classes. A class is (domain values, pods on the node, shards on the
node). The search is depth-first, most constrained pod first, emptiest domain first, memoises
dead states, and stops after a budget of expansions: an exhausted budget is "unknown", which
never filters a node.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from .context import Context
from .model import NodeInfo

DEFAULT_BUDGET = 3000


@dataclass(frozen=True, slots=True)
class FuturePod:
    shard: str | None
    zones: frozenset[str] | None  # zones it may use (ordinal zones), None = any


# A node class: (non-node domain values in `Plan.keys` order, pods on the node, shards on the node)
Klass = tuple[tuple[str | None, ...], int, tuple[str, ...]]


@dataclass
class Plan:
    """The hard rules, compiled for fast repeated checks."""

    keys: list[str]  # non-node canonical keys the hard rules use
    zone_index: int | None  # position of the zone key in keys
    caps: list[tuple[int | None, int]]  # (index in keys or None for node key, limit)
    spreads: list[tuple[int | None, int, list[str]]]  # (index or None, maxSkew, eligible domains)
    anti: list[int | None]  # required anti-affinity keys (index or None for node)
    tracks_node: bool  # whether any rule looks at the node key


def _compile(ctx: Context) -> Plan | None:
    spec = ctx.spec
    node_key = spec.canonical_key(ctx.node_key)
    keys: list[str] = []

    def index(key: str) -> int | None:
        key = spec.canonical_key(key)
        if key == node_key:
            return None
        if key not in keys:
            keys.append(key)
        return keys.index(key)

    if ctx.permitted is not None or ctx.zone_order is not None or spec.ordinalZones is not None:
        index(ctx.zone_key)
    caps = []
    for cap in spec.caps:
        limit = cap.limit(ctx.group_size)
        if limit is None:
            return None
        caps.append((index(cap.topologyKey), limit))
    spreads = []
    for s in spec.spread:
        if s.whenUnsatisfiable == "DoNotSchedule":
            i = index(s.topologyKey)
            spreads.append((i, s.maxSkew, [] if i is None else sorted(ctx.eligible_domains(keys[i]))))
    anti = [index(a.topologyKey) for a in spec.shardAntiAffinity if a.mode == "Required"]
    zone_index = keys.index(ctx.zone_key) if ctx.zone_key in keys else None
    tracks_node = any(i is None for i, _ in caps) or any(i is None for i, _, _ in spreads) or any(i is None for i in anti)
    return Plan(keys, zone_index, caps, spreads, anti, tracks_node)


def future_pods(ctx: Context) -> list[FuturePod]:
    """The group's pods that are neither placed, in flight, nor the pod being scheduled."""
    snap, pod = ctx.snap, ctx.pod
    present: dict[str | None, set[int]] = defaultdict(set)
    for p in snap.placements:
        if p.ordinal is not None:
            present[p.shard].add(p.ordinal)
    if pod.ordinal is not None:
        present[pod.shard].add(pod.ordinal)
    out: list[FuturePod] = []

    def future(shard: str, ordinal: int) -> FuturePod:
        zones = None
        if ctx.spec.ordinalZones is not None:
            order = ctx.shard_zone_order(shard)
            allowed = {order.zone_for(ordinal)} - {None}
            volume = snap.volume_zones.get(shard, {}).get(ordinal)
            if volume is not None:
                allowed.add(volume)
            zones = frozenset(allowed)  # type: ignore[arg-type]
        return FuturePod(shard, zones)

    for shard, replicas in sorted(snap.shard_replicas.items()):
        out.extend(future(shard, o) for o in range(replicas) if o not in present[shard])
    if snap.group_size is None:
        return out
    extra = snap.group_size - len(snap.placements) - 1 - len(out)
    # The group will be larger than its StatefulSets declare (replicas raised one at a time, or
    # a StatefulSet not created yet). Shards of one cluster are alike, so assume the short ones
    # grow to the largest one's size, lowest ordinal first; a pod with a known shard is what
    # anti-affinity needs to see a dead end (seed 002's 3-shard case). The rest are shardless.
    if extra > 0 and snap.shard_replicas:
        target = max(snap.shard_replicas.values())
        for ordinal in range(target):
            for shard, replicas in sorted(snap.shard_replicas.items()):
                if extra > 0 and replicas <= ordinal and ordinal not in present[shard]:
                    out.append(future(shard, ordinal))
                    extra -= 1
    out.extend(FuturePod(None, None) for _ in range(max(0, extra)))
    return out


class _Search:
    def __init__(self, plan: Plan, pods: list[FuturePod], budget: int) -> None:
        self.plan = plan
        self.pods = pods
        self.order = list(dict.fromkeys(pods))  # distinct kinds, most constrained first
        self.budget = budget
        self.dead: set[tuple] = set()

    def fits(self, pod: FuturePod, klass: Klass, dom: list[Counter], shard_dom: list[Counter], node_min: int) -> bool:
        values, load, shards = klass
        plan = self.plan
        if pod.zones is not None and (plan.zone_index is None or values[plan.zone_index] not in pod.zones):
            return False
        for i, limit in plan.caps:
            have = load if i is None else dom[i][values[i]]
            if have + 1 > limit:
                return False
        for i, skew, domains in plan.spreads:
            if i is None:
                if load + 1 - node_min > skew:
                    return False
            else:
                low = min((dom[i][d] for d in domains), default=0)
                if dom[i][values[i]] + 1 - low > skew:
                    return False
        if pod.shard is not None:
            for i in plan.anti:
                if i is None:
                    if pod.shard in shards:
                        return False
                elif shard_dom[i][(pod.shard, values[i])] > 0:
                    return False
        return True

    def run(self, classes: Counter, dom: list[Counter], shard_dom: list[Counter], remaining: Counter | None = None) -> bool | None:
        """Can every remaining pod be placed? True / False, or None when the budget ran out.

        Caps and anti-affinity only bound final counts, so the order in which the remaining pods
        are tried does not matter and one fixed order (most constrained first) is complete. A hard
        spread's skew depends on the order pods land in, so with one the search also branches
        over which kind of pod comes next: a dead end must hold for every order, not just one.
        """
        if remaining is None:
            remaining = Counter(self.pods)
        if not +remaining:
            return True
        state = (frozenset((+remaining).items()), frozenset((+classes).items()),
                 tuple(frozenset((+c).items()) for c in dom), tuple(frozenset((+c).items()) for c in shard_dom))
        if state in self.dead:
            return False
        self.budget -= 1
        if self.budget < 0:
            return None
        kinds = [p for p in self.order if remaining[p] > 0]
        if not self.plan.spreads:
            kinds = kinds[:1]
        node_min = min((k[1] for k, n in classes.items() if n > 0), default=0)
        for pod in kinds:
            options = [k for k, n in classes.items() if n > 0 and self.fits(pod, k, dom, shard_dom, node_min)]
            options.sort(key=lambda k: (sum(dom[i][k[0][i]] for i in range(len(dom))), k[1], k))
            for klass in options:
                values, load, shards = klass
                new_class: Klass = (values, load + 1, tuple(sorted({*shards, pod.shard} - {None}))) if self.plan.tracks_node else klass
                classes[klass] -= 1
                classes[new_class] += 1
                remaining[pod] -= 1
                for i, v in enumerate(values):
                    dom[i][v] += 1
                    if pod.shard is not None:
                        shard_dom[i][(pod.shard, v)] += 1
                result = self.run(classes, dom, shard_dom, remaining)
                for i, v in enumerate(values):
                    dom[i][v] -= 1
                    if pod.shard is not None:
                        shard_dom[i][(pod.shard, v)] -= 1
                remaining[pod] += 1
                classes[new_class] -= 1
                classes[klass] += 1
                if result is None or result:
                    return result
        self.dead.add(state)
        return False


class Lookahead:
    """Answers, per candidate node, whether the rest of the group still fits after it."""

    def __init__(self, ctx: Context, budget: int = DEFAULT_BUDGET) -> None:
        self.ctx = ctx
        self.plan = _compile(ctx)
        self.pods = future_pods(ctx) if self.plan is not None else []
        # Most constrained first: pinned zones, then shards with the most pods still to come.
        per_shard = Counter(p.shard for p in self.pods)
        self.pods.sort(key=lambda p: (p.zones is None, -per_shard[p.shard], p.shard or "", sorted(p.zones or ())))
        self.budget = budget
        self._base: tuple[Counter, list[Counter], list[Counter], dict[str, Klass]] | None = None
        self._memo: dict[Klass, bool | None] = {}

    @property
    def applies(self) -> bool:
        return self.plan is not None and bool(self.pods)

    def _state(self) -> tuple[Counter, list[Counter], list[Counter], dict[str, Klass]]:
        """Classes of the nodes future pods may use, and the group's domain counts.

        The classes of empty nodes come from a per-topology-version count of domain tuples, so a
        request only walks the group's own placements, never every node.
        """
        if self._base is not None:
            return self._base
        ctx, plan = self.ctx, self.plan
        assert plan is not None
        node_load: Counter = Counter()
        node_shards: dict[str, set[str]] = defaultdict(set)
        dom = [Counter() for _ in plan.keys]
        shard_dom = [Counter() for _ in plan.keys]
        for p in ctx.snap.placements:
            for i, key in enumerate(plan.keys):
                v = ctx.placement_domain(p, key)
                if v is not None:
                    dom[i][v] += 1
                    if p.shard is not None:
                        shard_dom[i][(p.shard, v)] += 1
            if p.node is not None:
                node_load[p.node] += 1
                if p.shard is not None:
                    node_shards[p.node].add(p.shard)
        topology = ctx.snap.topology
        keys = tuple(plan.keys)
        classes: Counter = Counter({(values, 0, ()): n for values, n in
                                    topology.value_counts(keys, ctx.zone_key, ctx.permitted, ctx.node_key).items()})
        eligible = topology.schedulable_names(ctx.zone_key, ctx.permitted)
        index = topology.values_index(keys, ctx.zone_key, ctx.node_key)
        loaded: dict[str, Klass] = {}
        if plan.tracks_node:
            for name, load in node_load.items():
                values = index.get(name)
                if name not in eligible or values is None or None in values:
                    continue
                klass: Klass = (values, load, tuple(sorted(node_shards[name])))
                classes[(values, 0, ())] -= 1
                classes[klass] += 1
                loaded[name] = klass
        self._base = (+classes, dom, shard_dom, loaded)
        self._index, self._eligible = index, eligible
        return self._base

    def _class_of(self, name: str) -> Klass | None:
        loaded = self._state()[3]
        if name in loaded:
            return loaded[name]
        values = self._index.get(name)
        if name not in self._eligible or values is None or None in values:
            return None
        return (values, 0, ())

    def keeps_feasible(self, node: NodeInfo) -> bool | None:
        """True/False when known; None when the search budget ran out or the node is unknown."""
        assert self.plan is not None
        return self.class_feasible(self._class_of(node.name))

    def class_feasible(self, klass: Klass | None) -> bool | None:
        """Does placing the pod on a node of this class keep the rest of the group placeable?"""
        if klass is None:
            return None
        if klass in self._memo:
            return self._memo[klass]
        classes, dom, shard_dom, _ = self._state()
        if classes[klass] <= 0:
            return None
        me = FuturePod(self.ctx.pod.shard, None)
        values, load, shards = klass
        classes = Counter(classes)
        dom = [Counter(c) for c in dom]
        shard_dom = [Counter(c) for c in shard_dom]
        new_class: Klass = (values, load + 1, tuple(sorted({*shards, me.shard} - {None}))) if self.plan.tracks_node else klass  # type: ignore[union-attr]
        classes[klass] -= 1
        classes[new_class] += 1
        for i, v in enumerate(values):
            dom[i][v] += 1
            if me.shard is not None:
                shard_dom[i][(me.shard, v)] += 1
        search = _Search(self.plan, self.pods, self.budget)  # type: ignore[arg-type]
        result = search.run(classes, dom, shard_dom)
        self.budget = max(search.budget, 0)  # one budget for the whole decision
        self._memo[klass] = result
        return result


def dead_ends(ctx: Context, candidates: Iterable[NodeInfo], budget: int = DEFAULT_BUDGET) -> dict[str, int]:
    """Names of candidates that lead to a dead end, with the number of pods left stranded,
    but only when another candidate is proven to keep the group feasible."""
    look = Lookahead(ctx, budget)
    if not look.applies:
        return {}
    look._state()
    class_of = look._class_of
    feasible = look.class_feasible
    results = {n.name: feasible(class_of(n.name)) for n in candidates}
    if not any(r is True for r in results.values()):
        return {}
    return {name: len(look.pods) for name, r in results.items() if r is False}
