"""Dead-end avoidance: after this pod lands on a candidate, can the rest of the group still fit?

NetEase's 3-shard cluster (the NetEase Redis design, appendix 2) deadlocks when pods are placed greedily: every
step is legal, yet the last pod has nowhere to go. With the group's size known, the pods still to
come are known too (per StatefulSet: how many, and with ordinal zones which zone each needs), so
each candidate can be checked for a complete placement of the rest.

The question is answered by counting, never by placing pods one by one, so its cost does not
depend on how many pods are still to come (30 or a million):

* Pods still to come are *kinds* with multiplicities: (StatefulSet type, zones it may use) ->
  count. StatefulSets that look alike to the rules (same pods still to come, same domains already
  taken under required anti-affinity) form one type with a multiplicity.
* Nodes are *classes* with multiplicities: nodes with the same domains (zone, rack...) and the
  same number of the group's pods are interchangeable; a 5,000-node cluster has a handful.
* The hard rules become a flow network: source -> kind -> (type, domain) gate for required
  anti-affinity (capacity: the type's multiplicity where its StatefulSets have no pod yet) ->
  the domain tree down to node classes -> back up the domain tree, where each domain's edge
  carries its caps (limit minus pods already there) -> sink. Every placement of the rest is a
  flow saturating the source, and (by round-robin over interchangeable nodes and StatefulSets)
  every integral such flow is a placement. Keys must nest (node within rack within zone...),
  which is checked on the live topology.
* A hard spread (DoNotSchedule) depends on the order pods land in, but only through the final
  counts: pods can always be added emptiest domain first, so a final count vector f is
  reachable exactly when every domain that receives pods ends at most maxSkew above the final
  minimum L = min f. For each possible L (a window about maxSkew wide, found by two binary
  searches) the domain edges get the bounds L <= f(d) <= max(c(d), L + maxSkew).
* Which candidates keep the group feasible comes from one solved network per level L (and per
  anti-affinity domain of the pod itself): the pod is one more unit whose edges go to the
  candidate classes, and a candidate class can take it exactly when the residual graph lets the
  pod's unit be moved there (one breadth-first search, not one flow per candidate).

Cost: O(kinds x domains + domains x classes) vertices and edges per network, a few networks per
decision; Dinic's algorithm on them does not depend on the counts carried. The placed pods arrive
counted (engine.model.GroupCounts, kept current by the watch cache), so the model is built in
O(nodes holding the group + StatefulSets); the one pass that still grows with placed pods is the
StatefulSets' domains under anti-affinity above the node key (one set per StatefulSet).

Decided exactly: caps on nested keys, required anti-affinity on a key coarser than the node
(zone, rack), allowed zones, ordinal zones, and at most one hard spread. A relaxation (a dead end
it reports is certain, a "feasible" is not proven): required anti-affinity on the node key (which
StatefulSet sits on which node of a class is not tracked), two or more hard spreads (the orders
each needs may conflict), anti-affinity on a key coarser than the zone with ordinal zones.
Unknown, which never filters a node: keys that do not nest, a fractional cap without a group size,
more spread levels than `limits.MAX_SPREAD_LEVELS`, and a decision past its wall-time deadline
(then the hard rules alone decide, and the caller counts a fallback).
"""

from __future__ import annotations

import itertools
import time
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field
from enum import StrEnum
from typing import NamedTuple

from ..limits import MAX_SPREAD_LEVELS
from .context import Context
from .flow import INFINITE, DeadlineExceeded, Network
from .model import CandidateClass
from .rules import dead_end_terms
from .rules.base import SpreadTerm

Zones = frozenset[str] | None  # zones a pod may use; None = any
Values = tuple[str, ...]  # a node's domain for each chain key, finest first


class Certainty(StrEnum):
    EXACT = "exact"  # dead ends and feasible candidates are both proven
    RELAXED = "relaxed"  # dead ends are proven; feasible means feasible under a relaxation
    UNKNOWN = "unknown"  # the rules are outside what is decided here: nothing is filtered
    DEADLINE = "deadline"  # the wall-time deadline passed: nothing is filtered
    MOOT = "moot"  # the candidates the group can use are one class of nodes: nothing to choose between


@dataclass
class Analysis:
    """What the dead-end analysis found for one decision."""

    certainty: Certainty
    dead: list[int] = field(default_factory=list)  # indices of the candidate classes that are dead ends
    to_come: int = 0  # pods of the group still to come: what a dead end strands
    why: str = ""  # for UNKNOWN / RELAXED: the reason, for logs and explain
    stranded: int = 0  # candidate nodes in the dead classes

    @property
    def fell_back(self) -> bool:
        return self.certainty is Certainty.DEADLINE


class NodeClass(NamedTuple):
    """Interchangeable nodes: the same domains and the same number of the group's pods (a named
    tuple: it is hashed once per placed pod's node, and tuples hash in C)."""

    values: Values
    load: int


@dataclass(frozen=True, slots=True)
class Spread:
    level: int | None  # chain index, or None for the node key
    max_skew: int
    counts: dict[str, int] | None = None  # chain level: domain -> the pods the spread counts (its node view)
    missing: int = 0  # domains short of minDomains: they hold 0 pods and never grow


@dataclass
class Model:
    """The hard rules and the group's state, in counts (see the module docstring)."""

    chain: list[str]  # non-node keys, finest first; each domain lies in one domain of the next
    zone_level: int | None
    caps: dict[int | None, int]  # level -> tightest limit (None: the node key)
    spreads: list[Spread]
    anti_level: int | None  # the coarsest required anti-affinity key (None: the node key)
    has_anti: bool
    classes: Counter[NodeClass]
    counts: list[dict[str, int]]  # per chain level: domain -> the group's pods there now
    parents: list[dict[str, str]]  # per chain level: domain -> its domain one level up
    dead: list[tuple[int | None, int]]  # (level, count) of eligible spread domains no node class can grow
    kinds: Counter[tuple[str | None, Zones]]  # (type id or None, zones) -> pods still to come
    types: dict[str, tuple[int, frozenset | Counter]]  # type id -> (StatefulSets, domains they hold)
    my_shard_futures: Counter[Zones]  # the scheduled pod's StatefulSet, kept apart from the types
    my_shard_taken: frozenset | Counter  # what its StatefulSet holds already (as in `types`)
    node_load: Counter[str]  # node -> the group's pods on it
    index: dict[str, tuple]  # node -> its domains in `order` (the topology's per-version index)
    order: list[int]  # where each chain key sits in the index's tuples
    eligible: frozenset[str]  # schedulable nodes in the permitted zones
    tracks_load: bool  # a rule reads the node key, so a node's class includes the group pods it holds
    relaxed: list[str] = field(default_factory=list)
    chained: dict[tuple, Values | None] = field(default_factory=dict)  # memo: index tuple -> chain order
    node_class: dict[str, NodeClass] = field(default_factory=dict)  # with tracks_load: loaded node -> class

    @property
    def to_come(self) -> int:
        return sum(self.kinds.values()) + sum(self.my_shard_futures.values())


class _Unknown(Exception):
    """The rules are outside what the model decides; the message says why."""


def dead_ends(ctx: Context, candidates: Sequence[CandidateClass], deadline: float | None = None) -> Analysis:
    """The candidate classes after which the rest of the group cannot be placed, but only when
    another candidate keeps the group feasible.

    A filter class (one signature: the same domains, and for the node key the same load; all of
    its nodes usable by the group or none, see evaluate.classify) maps to one node class of the
    model, read from its representative; a class the group cannot use is never a dead end."""
    # A dead end is refused only when another candidate keeps the group feasible: with one class
    # of candidates the group can use (the usual case under ordinal zones and per-node caps) the
    # answer is the same whatever the rest of the group needs, so it is not computed. First from
    # the filter classes alone (each is usable by the group as a whole or not at all), then from
    # the model's classes, which may merge filter classes.
    usable = ctx.usable_names()
    if sum(candidate.node.name in usable for candidate in candidates) < 2:
        return Analysis(Certainty.MOOT)
    try:
        model = _node_model(ctx)
    except _Unknown as why:
        return Analysis(Certainty.UNKNOWN, why=str(why))
    of = [_class_of(ctx, model, candidate.node.name) for candidate in candidates]
    if len(set(of) - {None}) < 2:
        return Analysis(Certainty.MOOT)
    _add_pods_to_come(ctx, model)
    if model.to_come == 0:
        return Analysis(Certainty.EXACT)
    try:
        feasible = feasible_classes(ctx, model, list({k for k in of if k is not None}), deadline)
    except DeadlineExceeded:
        return Analysis(Certainty.DEADLINE, to_come=model.to_come, why="deadline passed during the dead-end analysis")
    except _Unknown as why:
        return Analysis(Certainty.UNKNOWN, to_come=model.to_come, why=str(why))
    certainty = Certainty.RELAXED if model.relaxed else Certainty.EXACT
    why = "; ".join(model.relaxed)
    if not feasible:
        return Analysis(certainty, to_come=model.to_come, why=why)  # all alike: filtering would only strand this pod
    dead = [i for i, klass in enumerate(of) if klass is not None and klass not in feasible]
    return Analysis(certainty, dead, model.to_come, why, sum(len(candidates[i].names) for i in dead))


# ---------------------------------------------------------------------------------------- the model
def build_model(ctx: Context) -> Model:
    """The whole model: the nodes' side, then the pods still to come."""
    model = _node_model(ctx)
    _add_pods_to_come(ctx, model)
    return model


@dataclass
class _RuleKeys:
    """The hard rules' topology keys, each rule's key read once: `keys` holds the non-node keys in
    the order first named; a None key is the node key, which has a domain per node, not a level."""

    keys: list[str]
    caps: list[tuple[str | None, int]]  # (key, most pods of the group per domain)
    spreads: list[tuple[str | None, SpreadTerm]]
    anti: list[str | None]  # keys of required shard anti-affinity


def _rule_keys(ctx: Context) -> _RuleKeys:
    """Each rule's own part of the model (engine/rules/), its keys made canonical (the legacy zone
    label is the zone key), so rules on either count one level. Raises _Unknown when a rule cannot
    be modelled."""
    spec, node_key = ctx.spec, ctx.node_key
    keys: list[str] = []

    def level_of(key: str) -> str | None:
        key = spec.canonical_key(key)
        if key == node_key:
            return None
        if key not in keys:
            keys.append(key)
        return key

    terms = dead_end_terms(ctx)
    if terms.unknown is not None:
        raise _Unknown(terms.unknown)
    if terms.zone_needed:
        level_of(ctx.zone_key)
    caps = [(level_of(key), limit) for key, limit in terms.caps]
    spreads = [(level_of(term.key), term) for term in terms.spreads]
    anti = [level_of(key) for key in terms.anti]
    return _RuleKeys(keys, caps, spreads, anti)


def _tracks_load(rules: _RuleKeys, anti_level: int | None) -> bool:
    """Whether a rule reads the node key: then a node's class includes the group's pods it holds,
    since a per-node cap, spread or anti-affinity treats a loaded node unlike an empty one."""
    return (
        any(k is None for k, _ in rules.caps)
        or any(k is None for k, _ in rules.spreads)
        or (bool(rules.anti) and anti_level is None)
    )


def _classes_with_load(
    classes: Counter[NodeClass],
    node_load: Counter[str],
    index: dict[str, tuple],
    eligible: frozenset[str],
    order: list[int],
) -> tuple[Counter[NodeClass], dict[tuple, Values | None], dict[str, NodeClass]]:
    """The node classes split by the group's pods each node holds, with the memo of each index
    tuple's chain order (None: a label missing) and each loaded node's class.

    One pass over the nodes holding the group's pods (up to one per node of the cluster): their
    classes are kept for the candidates and the anti-affinity types, not derived again."""
    chained_of: dict[tuple, Values | None] = {}
    node_class: dict[str, NodeClass] = {}
    interned: dict[tuple, NodeClass] = {}
    moved: Counter[NodeClass] = Counter()
    for name, load in node_load.items():
        values = index.get(name)
        if values is None or name not in eligible:
            continue
        chained = chained_of.get(values, ())
        if chained == ():
            chained = chained_of[values] = None if None in values else tuple(values[i] for i in order)
        if chained is None:
            continue
        klass = interned.get((chained, load))
        if klass is None:
            klass = interned[(chained, load)] = NodeClass(chained, load)
        node_class[name] = klass
        moved[klass] += 1
    for klass, n in moved.items():
        classes[NodeClass(klass.values, 0)] -= n
        classes[klass] += n
    return +classes, chained_of, node_class


def _parents(chain: list[str], classes: Counter[NodeClass]) -> list[dict[str, str]]:
    """Per chain level, each domain's domain one level up: how a pod placed in a fine domain
    also fills the coarser ones it lies in."""
    parents: list[dict[str, str]] = [{} for _ in chain]
    for klass in classes:
        for i in range(len(chain) - 1):
            parents[i][klass.values[i]] = klass.values[i + 1]
    return parents


def _tightest_caps(caps: list[tuple[int | None, int]]) -> dict[int | None, int]:
    """Per level, the smallest of the caps on it: two caps on one key hold together."""
    tightest: dict[int | None, int] = {}
    for level, limit in caps:
        tightest[level] = min(limit, tightest.get(level, limit))
    return tightest


def _relaxations(has_anti: bool, anti_level: int | None, spreads: list[Spread]) -> list[str]:
    """Where the model decides less than the rules say, in words: a feasible answer is then
    feasible under that relaxation (Certainty.RELAXED), while dead ends stay proven."""
    relaxed: list[str] = []
    if has_anti and anti_level is None:
        relaxed.append("required anti-affinity on the node key is checked per class of nodes, not per node")
    if len(spreads) > 1:
        relaxed.append("with several hard spreads, final counts are checked but not the order that reaches them")
    return relaxed


def _node_model(ctx: Context) -> Model:
    """The model's node side: keys, node classes, domain counts, caps and spreads (no kinds yet)."""
    rules = _rule_keys(ctx)
    keys, node_key = rules.keys, ctx.node_key
    topology = ctx.snap.topology
    # Only nodes the pod could use (nodeSelector, required node affinity, tolerations): the pods
    # still to come share its template, so these are the nodes they could use too.
    value_counts = topology.value_counts(tuple(keys), ctx.zone_key, ctx.permitted, node_key, ctx.usable)
    chain, order = _nest(keys, value_counts)
    at = {key: i for i, key in enumerate(chain)}

    def level(key: str | None) -> int | None:
        return None if key is None else at[key]

    anti_levels = [level(k) for k in rules.anti]
    # One pod per domain of a key means one per domain of every finer key: the coarsest decides.
    anti_level = max((a for a in anti_levels if a is not None), default=None)

    # Node classes: schedulable nodes in the permitted zones, by domains and group pods held.
    node_load = ctx.node_load
    index = topology.values_index(tuple(keys), ctx.zone_key, node_key)
    eligible = ctx.usable_names()
    classes: Counter[NodeClass] = Counter(
        {NodeClass(tuple(v[i] for i in order), 0): n for v, n in value_counts.items()}
    )
    tracks_load = _tracks_load(rules, anti_level)
    chained_of: dict[tuple, Values | None] = {}  # index tuple -> chain order (None: a label missing)
    node_class: dict[str, NodeClass] = {}
    if tracks_load:
        classes, chained_of, node_class = _classes_with_load(classes, node_load, index, eligible, order)

    spreads = [
        Spread(
            level(key),
            term.max_skew,
            ctx.spread_counts(term.index) if key is not None else None,
            term.missing,
        )
        for key, term in rules.spreads
    ]
    return Model(
        chain=chain,
        zone_level=at.get(ctx.zone_key),
        caps=_tightest_caps([(level(key), limit) for key, limit in rules.caps]),
        spreads=spreads,
        anti_level=anti_level,
        has_anti=bool(anti_levels),
        classes=classes,
        counts=[dict(ctx.counts[key]) for key in chain],
        parents=_parents(chain, classes),
        dead=_dead_domains(ctx, [term for _, term in rules.spreads], spreads, classes, node_load, eligible, index),
        kinds=Counter(),  # the pod side, filled by _add_pods_to_come
        types={},
        my_shard_futures=Counter(),
        my_shard_taken=frozenset(),
        node_load=node_load,
        index=index,
        order=order,
        eligible=eligible,
        tracks_load=tracks_load,
        relaxed=_relaxations(bool(anti_levels), anti_level, spreads),
        chained=chained_of,
        node_class=node_class,
    )


def _add_pods_to_come(ctx: Context, model: Model) -> None:
    """The model's pod side: the kinds and types of the pods still to come."""
    _count_pods_to_come(ctx, model)
    anti_level, zone_level = model.anti_level, model.zone_level
    if (
        model.has_anti
        and anti_level is not None
        and zone_level is not None
        and anti_level > zone_level
        and any(z is not None for _, z in model.kinds)
    ):
        model.relaxed.append("anti-affinity on a key coarser than the zone, with ordinal zones")


def _nest(keys: list[str], value_counts: dict[tuple, int]) -> tuple[list[str], list[int]]:
    """Order the keys finest first and check that each domain lies within one domain of the next."""
    tuples = list(value_counts)
    sizes = {i: len({t[i] for t in tuples}) for i in range(len(keys))}
    order = sorted(range(len(keys)), key=lambda i: (-sizes[i], keys[i]))
    for finer, coarser in itertools.pairwise(order):
        parent: dict[str, str] = {}
        for t in tuples:
            if parent.setdefault(t[finer], t[coarser]) != t[coarser]:
                raise _Unknown(f"domains of {keys[finer]} do not nest within {keys[coarser]}")
    return [keys[i] for i in order], order


def _dead_domains(
    ctx: Context,
    terms: list,
    spreads: list[Spread],
    classes: Counter[NodeClass],
    node_load: Counter[str],
    eligible: frozenset[str],
    index: dict[str, tuple],
) -> list[tuple[int | None, int]]:
    """Eligible spread domains no node class can grow: their nodes cannot take the group's pods
    (a label another rule needs is missing, or the pod cannot use them while the spread's
    nodeAffinityPolicy / nodeTaintsPolicy still counts them). Their counts never grow, so the
    final minimum can be no higher."""
    dead: list[tuple[int | None, int]] = []
    for term, spread in zip(terms, spreads, strict=True):
        if spread.level is None:
            counted = ctx.snap.topology.schedulable_names(ctx.zone_key, ctx.permitted, ctx.spread_views[term.index])
            if len(counted) != sum(classes.values()):  # every usable node with its labels is counted
                dead += [
                    (None, node_load.get(n, 0)) for n in counted if n not in eligible or None in index.get(n, (None,))
                ]
            continue
        live = {k.values[spread.level] for k in classes}
        counts = spread.counts or {}
        dead += [(spread.level, counts.get(d, 0)) for d in ctx.spread_domains(term.index) if d not in live]
    return dead


def pods_to_come(ctx: Context) -> tuple[dict[str, Counter[Zones]], int]:
    """Pods of the group that are neither placed, in flight, nor this pod, counted by kind:
    per StatefulSet, how many may use which zones (None: any); and how many belong to none.

    Per StatefulSet: its missing ordinals below replicas (with ordinal zones, counted per residue
    of the zone rotation, never listed). Beyond what the StatefulSets declare (replicas raised
    one at a time, or a StatefulSet not created yet) the group size says more pods will come;
    shards of one cluster are alike, so the short StatefulSets are assumed to grow towards the
    largest one's size, lowest ordinal first (a pod with a known shard is what anti-affinity
    needs to see the NetEase design's dead end), and the rest are pods of no StatefulSet.
    """
    snap, pod = ctx.snap, ctx.pod
    walked = snap.ordinals()  # pods in flight (all pods, for a snapshot without counts)
    if pod.ordinal is not None and pod.shard is not None:
        walked.setdefault(pod.shard, set()).add(pod.ordinal)

    def present(shard: str, start: int, stop: int) -> list[int]:
        return snap.present(shard, start, stop, walked.get(shard, frozenset()))

    futures: dict[str, Counter[Zones]] = defaultdict(Counter)
    declared_missing = 0
    for shard, replicas in snap.shard_replicas.items():
        missing = _ordinal_kinds(ctx, shard, 0, replicas, present(shard, 0, replicas))
        futures[shard].update(missing)
        declared_missing += sum(missing.values())
    shardless = 0
    if snap.group_size is not None:
        extra = snap.group_size - snap.placed - 1 - declared_missing
        if extra > 0 and snap.shard_replicas:
            for shard, (start, stop) in _growth(snap.shard_replicas, extra).items():
                grown = _ordinal_kinds(ctx, shard, start, stop, present(shard, start, stop))
                futures[shard].update(grown)
                extra -= sum(grown.values())
        shardless = max(0, extra)
    return {shard: +zones for shard, zones in futures.items() if +zones}, shardless


def _count_pods_to_come(ctx: Context, model: Model) -> None:
    """Fill the model's kinds: StatefulSets that look alike to the rules become one type."""
    futures, shardless = pods_to_come(ctx)
    kinds: Counter[tuple[str | None, Zones]] = Counter()
    if shardless:
        kinds[(None, None)] += shardless
    if not model.has_anti:
        for zones_count in futures.values():
            for zones, n in zones_count.items():
                kinds[(None, zones)] += n
        model.kinds = kinds
        return
    my_shard = ctx.pod.shard
    if model.anti_level is None:
        _node_anti_types(ctx, model, futures, kinds)
        model.kinds = kinds
        return
    taken = _taken(ctx, model, futures.keys() | {my_shard} - {None})
    if my_shard is not None:
        model.my_shard_taken = taken.get(my_shard, frozenset())
    types: dict[tuple, str] = {}
    for shard, zones_count in futures.items():
        if shard == my_shard:
            model.my_shard_futures = zones_count
            continue
        held = taken.get(shard, frozenset())
        profile = (held, tuple(sorted(zones_count.items(), key=_zones_order)))
        type_id = types.get(profile)
        if type_id is None:
            type_id = types[profile] = f"t{len(types)}"
            model.types[type_id] = (0, held)
        count, held = model.types[type_id]
        model.types[type_id] = (count + 1, held)
        for zones, n in zones_count.items():
            kinds[(type_id, zones)] += n
    model.kinds = kinds


def _node_anti_types(
    ctx: Context, model: Model, futures: dict[str, Counter[Zones]], kinds: Counter[tuple[str | None, Zones]]
) -> None:
    """Types under required anti-affinity on the node key: StatefulSets alike in their pods to
    come, with the nodes they hold summed per node class. A type's gate into a class then admits
    (StatefulSets x nodes of the class) - (their nodes there), exactly the sum of what each of
    them may put there: a relaxation, like the per-class view of the node key itself.

    When one type holds every StatefulSet on a node (the usual case: the shards of one cluster
    are alike), the sum is the number of distinct StatefulSets per node, kept by the counts, and
    nothing here walks the placed pods."""
    snap, my_shard = ctx.snap, ctx.pod.shard
    where: Mapping[str, NodeClass | None] = model.node_class  # every node holding the group's pods, by class
    types: dict[tuple, str] = {}
    members: dict[str, list[str]] = {}
    for shard, zones_count in futures.items():
        if shard == my_shard:
            model.my_shard_futures = zones_count
            continue
        profile = tuple(sorted(zones_count.items(), key=_zones_order))
        type_id = types.get(profile)
        if type_id is None:
            type_id = types[profile] = f"t{len(types)}"
            members[type_id] = []
        members[type_id].append(shard)
        for zones, n in zones_count.items():
            kinds[(type_id, zones)] += n
    if my_shard is not None:
        model.my_shard_taken = _held_by_class(snap.shard_node_pods(my_shard), where)
    placed_shards = set(snap.counted.per_shard_node) - {my_shard} if snap.counted is not None else None
    for type_id, shards in members.items():
        if len(members) == 1 and placed_shards is not None and placed_shards <= set(shards):
            held = _held_by_class(snap.counted.shards_on_node, where, per_node=True)  # type: ignore[union-attr]
            if my_shard is not None:
                held.subtract(model.my_shard_taken)  # its own, counted apart above
            # pods in flight are left out: counting fewer held nodes only loosens the relaxation
        else:
            held = Counter()
            for shard in shards:
                held.update(_held_by_class(snap.shard_node_pods(shard), where))
        model.types[type_id] = (len(shards), +held)


def _held_by_class(nodes: Counter[str], where: Mapping[str, NodeClass | None], *, per_node: bool = False) -> Counter:
    """Held nodes per node class: each node once, or with per_node its count (node -> how many
    StatefulSets hold it)."""
    held: Counter = Counter()
    for node, n in nodes.items():
        klass = where.get(node)
        if klass is not None:
            held[klass] += n if per_node else 1
    return held


def _ordinal_kinds(ctx: Context, shard: str, start: int, stop: int, present: list[int]) -> Counter[Zones]:
    """Ordinals in [start, stop) not `present` (those in the range, distinct), by the zones each
    may use (None without ordinal zones): its rotation zone, and the zone its volume is in or the
    zone it ran in when the set was adopted, as the rule accepts them (rules/ordinal_zones.py).
    Counting an adopted ordinal to come in its rotation zone alone refused every adopted ordinal
    its own zone on a cluster where the set was recreated from its committed record: the zone
    looked needed by the rotation's ordinals, and all 9 pods landed by the rotation instead."""
    if stop <= start:
        return Counter()
    absent = present
    if ctx.spec.ordinalZones is None:
        return Counter({None: stop - start - len(absent)})
    zone_order = ctx.shard_zone_order(shard)
    order = zone_order.order
    volumes = ctx.snap.volume_zones.get(shard, {})
    out: Counter[Zones] = Counter()
    if not order:
        out[frozenset()] = stop - start - len(absent)  # no zone to go to: never placeable
        return out
    period = len(order)
    per_residue = [0] * period
    for r in range(period):
        first = start + (r - start) % period
        per_residue[r] = 0 if first >= stop else (stop - 1 - first) // period + 1
    for o in absent:
        per_residue[o % period] -= 1
    taken = set(present) if volumes else set()
    for o, zone in volumes.items():
        if start <= o < stop and o not in taken:
            per_residue[o % period] -= 1
            out[frozenset({order[o % period], zone})] += 1
    absent_set = set(absent)
    for o, zone in zone_order.adopted.items():
        if start <= o < stop and o not in absent_set and o not in volumes:
            per_residue[o % period] -= 1
            out[frozenset({order[o % period], zone})] += 1
    for r, n in enumerate(per_residue):
        if n > 0:
            out[frozenset({order[r]})] += n
    return out


def _growth(replicas: dict[str, int], extra: int) -> dict[str, tuple[int, int]]:
    """The ordinal range each short StatefulSet grows by when `extra` pods fill them level by level
    (ordinal 0 of every short one, then ordinal 1...) up to the largest one's size."""
    target = max(replicas.values())
    shards = sorted(replicas)
    thresholds = sorted({r for r in replicas.values() if r < target} | {target})
    level = min(replicas.values())
    for upper in thresholds:
        if upper <= level:
            continue
        active = [s for s in shards if replicas[s] <= level]
        band = (upper - level) * len(active)
        if extra < band:
            full, rest = divmod(extra, len(active))
            grown = {s: (replicas[s], level + full) for s in active}
            for s in active[:rest]:
                grown[s] = (replicas[s], level + full + 1)
            return {s: r for s, r in grown.items() if r[1] > r[0]}
        extra -= band
        level = upper
    return {s: (r, target) for s, r in replicas.items() if r < target}


def _taken(ctx: Context, model: Model, shards: Set[str]) -> dict[str, frozenset]:
    """Per StatefulSet among `shards`: the anti-affinity domains it holds (the key is coarser than
    the node). One pass over the StatefulSets' nodes: it grows with the placed pods of
    StatefulSets with pods to come, looking each node's domain up once."""
    snap = ctx.snap
    column = model.order[model.anti_level]  # type: ignore[index]  # where the key sits in the index's tuples
    where = {
        node: (values[column] if values is not None else None)
        for node, values in ((n, model.index.get(n)) for n in model.node_load)
    }
    key = model.chain[model.anti_level]  # type: ignore[index]
    held: dict[str, set] = {}
    if snap.counted is not None:
        for shard, nodes in snap.counted.per_shard_node.items():
            if shard in shards:
                held[shard] = set(map(where.get, nodes))
    for p in snap.placements:  # in flight (every placement, for a snapshot without counts)
        if p.shard in shards:
            if p.node is not None:
                found = where.get(p.node)
            else:
                found = p.domains.get(key) if p.domains else None
            held.setdefault(p.shard, set()).add(found)
    return {s: frozenset(d - {None}) for s, d in held.items()}


def _zones_order(item: tuple[Zones, int]) -> tuple:
    zones, n = item
    return (zones is None, sorted(zones or ()), n)


def _class_of(ctx: Context, model: Model, name: str) -> NodeClass | None:
    """The class of a node the group may use, or None (not schedulable, outside the permitted
    zones, or missing a label the rules read: the filter refuses those anyway)."""
    if model.tracks_load and name in model.node_load:
        return model.node_class.get(name)  # kept by _node_model (absent: not usable)
    values = model.index.get(name)
    if values is None or name not in model.eligible:
        return None
    chained = model.chained.get(values, ())
    if chained == ():
        chained = model.chained[values] = None if None in values else tuple(values[i] for i in model.order)
    if chained is None:
        return None
    klass = NodeClass(chained, 0)
    return klass if klass in model.classes else None


# ------------------------------------------------------------------------------------- the networks
def feasible_classes(
    ctx: Context, model: Model, candidates: Sequence[NodeClass], deadline: float | None
) -> set[NodeClass]:
    """The candidate classes on which the pod keeps the rest of the group placeable."""
    levels = _spread_levels(model)
    # Under required anti-affinity, the pod's own domain closes that domain to its StatefulSet's
    # other pods: one network per such domain among the candidates. On the node key, the domain
    # is the candidate's class: the pod takes one of its nodes from its StatefulSet's others.
    groups: dict[str | NodeClass | None, list[NodeClass]] = defaultdict(list)
    for klass in candidates:
        domain: str | NodeClass | None = None
        if model.has_anti and ctx.pod.shard:
            if model.anti_level is not None:
                domain = klass.values[model.anti_level]
            elif model.my_shard_futures:
                domain = klass
        groups[domain].append(klass)
    feasible: set[NodeClass] = set()
    for mins in levels:
        for domain, members in groups.items():
            open_members = [k for k in members if k not in feasible]
            if not open_members:
                continue
            if deadline is not None and time.monotonic() > deadline:
                raise DeadlineExceeded
            feasible |= _solve(model, open_members, domain, mins, deadline)
        if len(feasible) == len(candidates):
            break
    return feasible


def _spread_levels(model: Model) -> list[tuple[int, ...]]:
    """Every combination of final minimums (one per hard spread) the counts allow."""
    windows = [
        _level_window(model, spread, [c for lv, c in model.dead if lv == spread.level]) for spread in model.spreads
    ]
    combos = 1
    for window in windows:
        combos *= len(window)
    if combos > MAX_SPREAD_LEVELS:
        raise _Unknown(f"{combos} combinations of spread levels to try; the limit is {MAX_SPREAD_LEVELS}")
    return list(itertools.product(*windows))


def _level_window(model: Model, spread: Spread, dead: list[int]) -> range:
    """Final minimums L for which the pods can end between L and L + maxSkew in every domain
    that receives some, and at L or above everywhere (two monotone sums, two binary searches)."""
    if spread.level is None:
        domains = [(klass.load, n) for klass, n in model.classes.items()]
    else:
        present = spread.counts if spread.counts is not None else model.counts[spread.level]
        domains = [(present.get(d, 0), 1) for d in {k.values[spread.level] for k in model.classes}]
    if spread.missing:  # below minDomains: domains that hold 0 for good (the global minimum is 0)
        dead = [*dead, 0]
    counts = [c for c, _ in domains] + dead
    if not counts:
        return range(0)
    total = sum(c * n for c, n in domains) + sum(dead) + model.to_come + 1
    low = min(counts)
    ceiling = min(dead) if dead else low + total

    def floor_sum(level: int) -> int:  # pods needed for every domain to reach `level`
        return sum(max(c, level) * n for c, n in domains) + sum(max(c, level) for c in dead)

    def room_sum(level: int) -> int:  # most pods the domains hold with nobody above level + maxSkew
        return sum(max(c, level + spread.max_skew) * n for c, n in domains) + sum(dead)

    highest = _last_true(low, ceiling, lambda lv: floor_sum(lv) <= total)
    lowest = _first_true(low, highest, lambda lv: room_sum(lv) >= total)
    if highest is None or lowest is None:
        return range(0)
    return range(lowest, highest + 1)


def _last_true(lo: int, hi: int, test) -> int | None:  # noqa: ANN001 - monotone predicate, true then false
    if hi < lo or not test(lo):
        return None
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if test(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _first_true(lo: int, hi: int | None, test) -> int | None:  # noqa: ANN001 - monotone predicate, false then true
    if hi is None or hi < lo or not test(hi):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if test(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def _solve(
    model: Model,
    candidates: list[NodeClass],
    my_domain: str | NodeClass | None,
    mins: tuple[int, ...],
    deadline: float | None,
) -> set[NodeClass]:
    """One network: the rest of the group plus this pod on one of `candidates`. Returns the
    candidates that can take the pod in some complete placement (empty if there is none)."""
    net = Network()
    source, sink = net.vertex(), net.vertex()
    chain = model.chain
    spread_at = {s.level: (s.max_skew, mins[i], s.counts) for i, s in enumerate(model.spreads)}

    # Up tree: class -> finest domain -> ... -> sink, each edge bounded by caps and spread levels.
    up: list[dict[str, int]] = [{} for _ in chain]
    for i in reversed(range(len(chain))):
        for domain in {k.values[i] for k in model.classes}:
            up[i][domain] = net.vertex()
    for i in range(len(chain)):
        for domain, vertex in up[i].items():
            spread = spread_at.get(i)
            counted = spread[2].get(domain, 0) if spread is not None and spread[2] is not None else None
            bounds = _bounds(model, i, model.counts[i].get(domain, 0), 1, spread_at, counted)
            if bounds is None:
                return set()
            low, high = bounds
            parent = up[i + 1][model.parents[i][domain]] if i + 1 < len(chain) else sink
            net.edge(vertex, parent, high, low)
    class_in: dict[NodeClass, int] = {}
    for klass, n in model.classes.items():
        vertex = class_in[klass] = net.vertex()
        bounds = _bounds(model, None, klass.load, n, spread_at)
        if bounds is None:
            return set()
        low, high = bounds
        net.edge(vertex, up[0][klass.values[0]] if chain else sink, high, low)

    # Down tree: the root, then each domain, finest last, then the classes.
    down: list[dict[str, int]] = [{} for _ in chain]
    root = net.vertex()
    for i in reversed(range(len(chain))):
        for domain in up[i]:
            down[i][domain] = net.vertex()
            parent = down[i + 1][model.parents[i][domain]] if i + 1 < len(chain) else root
            net.edge(parent, down[i][domain], INFINITE)
    for klass, vertex in class_in.items():
        net.edge(down[0][klass.values[0]] if chain else root, vertex, INFINITE)

    # Pods still to come, through their StatefulSet type's anti-affinity gates.
    gates: dict[tuple[str, object], int] = {}
    types = dict(model.types)
    kinds = Counter(model.kinds)
    if model.my_shard_futures:
        taken = model.my_shard_taken
        if my_domain is not None and isinstance(taken, frozenset):
            taken = taken | {my_domain}
        elif isinstance(my_domain, NodeClass) and isinstance(taken, Counter):
            taken = taken + Counter({my_domain: 1})  # the pod's own node, in its class
        types["me"] = (1, taken)
        for zones, n in model.my_shard_futures.items():
            kinds[("me", zones)] += n
    for (type_id, zones), n in kinds.items():
        kind = net.vertex()
        net.edge(source, kind, n, n)
        for target in _entries(model, zones, type_id is not None):
            if type_id is None:
                net.edge(kind, _down_vertex(model, target, down, root, class_in), INFINITE)
                continue
            gate = gates.get((type_id, target))
            if gate is None:
                gate = gates[(type_id, target)] = net.vertex()
                count, taken = types[type_id]
                net.edge(
                    gate, _down_vertex(model, target, down, root, class_in), _gate_room(model, target, count, taken)
                )
            net.edge(kind, gate, INFINITE)

    me = net.vertex()
    net.edge(source, me, 1, 1)
    to_candidate = {klass: net.edge(me, class_in[klass], 1) for klass in candidates if klass in class_in}
    if not net.feasible(source, sink, deadline):
        return set()
    reach = net.reaching(me)
    return {k for k, e in to_candidate.items() if net.used(e) or class_in[k] in reach}


def _bounds(
    model: Model, level: int | None, count: int, nodes: int, spread_at: dict, spread_count: int | None = None
) -> tuple[int, int] | None:
    """[low, high] new pods for a domain (or a class of `nodes` nodes, each holding `count`), or
    None when the spread level asks for more than the caps allow. `spread_count` is what the
    spread counts there when its node view leaves some of the domain's pods out (default `count`).

    Hard spread, for the final minimum L:  L <= f(d) <= max(c(d), L + maxSkew); a domain already
    above L + maxSkew takes no new pod (native PodTopologySpread: skew = count + 1 - global minimum).
    """
    high = INFINITE
    cap = model.caps.get(level)
    if cap is not None:
        high = max(0, cap - count) * nodes
    if level not in spread_at:
        return 0, high
    skew, minimum, _ = spread_at[level]
    counted = count if spread_count is None else spread_count
    high = min(high, max(0, minimum + skew - counted) * nodes)
    low = max(0, minimum - counted) * nodes
    return (low, high) if low <= high else None


def _entries(model: Model, zones: Zones, gated: bool) -> list[object]:
    """Where a kind enters the down tree: its gate domains (anti-affinity level) or its zones."""
    if gated:
        if model.anti_level is None:
            return [k for k in model.classes if zones is None or _zone(model, k) in zones]
        domains = {k.values[model.anti_level] for k in model.classes if zones is None or _zone(model, k) in zones}
        return sorted(domains)
    if zones is None:
        return [None]
    if model.zone_level is None:
        return []
    live = {k.values[model.zone_level] for k in model.classes}
    return [("zone", z) for z in sorted(zones) if z in live]


def _zone(model: Model, klass: NodeClass) -> str | None:
    return None if model.zone_level is None else klass.values[model.zone_level]


def _down_vertex(
    model: Model, target: object, down: list[dict[str, int]], root: int, class_in: dict[NodeClass, int]
) -> int:
    if target is None:
        return root
    if isinstance(target, NodeClass):
        return class_in[target]
    if isinstance(target, tuple):  # ("zone", z)
        return down[model.zone_level][target[1]]  # type: ignore[index]
    return down[model.anti_level][target]  # type: ignore[index]


def _gate_room(model: Model, target: object, count: int, taken: frozenset | Counter) -> int:
    """How many pods a type's StatefulSets may still put in one anti-affinity domain (or, on the
    node key, one class: count x its nodes, less the nodes they hold there)."""
    if isinstance(target, NodeClass):
        held = taken.get(target, 0) if isinstance(taken, Counter) else 0
        return max(0, count * model.classes[target] - held)
    return 0 if target in taken else count
