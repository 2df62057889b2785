"""Node topology: which domain a node is in, and how many schedulable nodes each domain has.

Kept as an index that the watch cache updates node by node, so a request never scans the
whole node list to learn the zones.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import NamedTuple

from ..api.policy import HOSTNAME_KEY, LEGACY_ZONE_KEY, ZONE_KEY
from .eligibility import NodeView
from .model import NodeInfo

# Distinct node views (pods' node constraints) memoised per topology version. Pods of one
# template share one; past this many the memo starts over rather than grow with odd pods.
MAX_VIEWS = 64


class NodeClassTable(NamedTuple):
    """Nodes by their domains for some keys, the node key's domain reduced to whether it is set."""

    members: dict[tuple, frozenset[str]]  # base class -> its node names
    by_node_domain: dict[str, list[str]]  # node-key domain -> the nodes in it (usually one)
    base_of: dict[str, tuple]  # node name -> its base class
    node_domain_is_name: bool  # every node's node-key domain is its name (the usual hostname label)


class Topology:
    def __init__(self, nodes: Iterable[NodeInfo] = ()) -> None:
        self.nodes: dict[str, NodeInfo] = {}
        self.version = 0  # bumps when labels or schedulability change; memo key for derived counts
        self._memo: dict[tuple, object] = {}
        self._views: set[NodeView] = set()
        for node in nodes:
            self.upsert(node)

    # -- updates (the cache calls these) --
    def upsert(self, node: NodeInfo) -> None:
        old = self.nodes.get(node.name)
        self.nodes[node.name] = node
        if old is None or old.labels != node.labels or old.schedulable != node.schedulable or old.taints != node.taints:
            self._changed()

    def remove(self, name: str) -> None:
        if self.nodes.pop(name, None) is not None:
            self._changed()

    def _changed(self) -> None:
        self.version += 1
        self._memo.clear()
        self._views.clear()

    def admitted(self, view: NodeView | None) -> frozenset[str] | None:
        """The names of the nodes `view` admits (schedulable or not), once per topology version
        and view; None for no view (every node)."""
        if view is None:
            return None
        memo_key = ("admitted", view)
        cached = self._memo.get(memo_key)
        if cached is None:
            if view not in self._views and len(self._views) >= MAX_VIEWS:
                self._memo.clear()
                self._views.clear()
            self._views.add(view)
            cached = self._memo[memo_key] = frozenset(n.name for n in self.nodes.values() if view.admits(n))
        return cached  # type: ignore[return-value]

    # -- lookups --
    @staticmethod
    def domain(node: NodeInfo, key: str, zone_key: str = ZONE_KEY, node_key: str = HOSTNAME_KEY) -> str | None:
        """The node's value for a topology key; zone falls back to the legacy label, the node key
        (kubernetes.io/hostname unless the policy names another) to the node's name."""
        labels = node.labels
        value = labels.get(key)
        if value is not None:
            return value
        if key == zone_key or key == LEGACY_ZONE_KEY:
            return labels.get(LEGACY_ZONE_KEY) if key == zone_key else labels.get(zone_key)
        if key == node_key or key == HOSTNAME_KEY:
            return node.name
        return None

    def eligible_domains(
        self,
        key: str,
        zone_key: str,
        permitted_zones: frozenset[str] | None,
        node_key: str = HOSTNAME_KEY,
        view: NodeView | None = None,
    ) -> dict[str, int]:
        """Domain -> number of schedulable nodes in it, over nodes in the permitted zones (and
        admitted by `view`, if given)."""
        memo_key = ("domains", key, zone_key, permitted_zones, node_key, view)
        cached = self._memo.get(memo_key)
        if cached is not None:
            return cached  # type: ignore[return-value]
        counts: dict[str, int] = defaultdict(int)
        for node in self.schedulable_nodes(zone_key, permitted_zones, view):
            value = self.domain(node, key, zone_key, node_key)
            if value is not None:
                counts[value] += 1
        result = dict(counts)
        self._memo[memo_key] = result
        return result

    def values_index(
        self, keys: tuple[str, ...], zone_key: str, node_key: str = HOSTNAME_KEY
    ) -> dict[str, tuple[str | None, ...]]:
        """Node name -> its domain for each key, built once per topology version: a request then
        looks a node's domains up instead of recomputing them."""
        memo_key = ("values", keys, zone_key, node_key)
        cached = self._memo.get(memo_key)
        if cached is None:
            cached = {
                name: tuple(self.domain(n, k, zone_key, node_key) for k in keys) for name, n in self.nodes.items()
            }
            self._memo[memo_key] = cached
        return cached  # type: ignore[return-value]

    def classes(self, keys: tuple[str, ...], zone_key: str, node_key: str = HOSTNAME_KEY) -> NodeClassTable:
        """The nodes by their domains for `keys` (see NodeClassTable). Built once per topology
        version: a request intersects its candidates with a handful of classes instead of
        looking at each node (see engine.evaluate)."""
        memo_key = ("classes", keys, zone_key, node_key)
        cached = self._memo.get(memo_key)
        if cached is None:
            at = keys.index(node_key) if node_key in keys else None
            members: dict[tuple, set[str]] = defaultdict(set)
            by_node_domain: dict[str, list[str]] = defaultdict(list)
            base_of: dict[str, tuple] = {}
            is_name = at is not None
            for name, values in self.values_index(keys, zone_key, node_key).items():
                if at is None:
                    base = values
                else:
                    base = values[:at] + (values[at] is not None,) + values[at + 1 :]
                    if values[at] is not None:
                        by_node_domain[values[at]].append(name)
                    is_name = is_name and values[at] == name
                members[base].add(name)
                base_of[name] = base
            cached = self._memo[memo_key] = NodeClassTable(
                {b: frozenset(m) for b, m in members.items()}, dict(by_node_domain), base_of, is_name
            )
        return cached  # type: ignore[return-value]

    def split_classes(
        self, keys: tuple[str, ...], zone_key: str, node_key: str, parts: tuple[frozenset[str], ...]
    ) -> list[list[frozenset[str]]]:
        """The base classes of `classes(keys...)`, each cut by every set in `parts` (inside
        first, then outside; empty pieces left out), once per topology version: a request then
        intersects its candidates with the pieces instead of cutting them again. The parts are
        the topology's own memoised sets, so the memo key hashes and compares them by identity."""
        memo_key = ("split", keys, zone_key, node_key, parts)
        cached = self._memo.get(memo_key)
        if cached is None:
            cached = []
            for members in self.classes(keys, zone_key, node_key).members.values():
                pieces = [members]
                for part in parts:
                    cut = []
                    for piece in pieces:
                        inside = piece & part
                        cut += (inside, piece - inside) if inside and len(inside) < len(piece) else (piece,)
                    pieces = cut
                cached.append(pieces)
            self._memo[memo_key] = cached
        return cached  # type: ignore[return-value]

    def names(self) -> frozenset[str]:
        """Every node's name (a node added or removed bumps the version, clearing the memo)."""
        cached = self._memo.get(("names",))
        if cached is None:
            cached = self._memo[("names",)] = frozenset(self.nodes)
        return cached  # type: ignore[return-value]

    def value_counts(
        self,
        keys: tuple[str, ...],
        zone_key: str,
        permitted_zones: frozenset[str] | None,
        node_key: str = HOSTNAME_KEY,
        view: NodeView | None = None,
    ) -> dict[tuple[str | None, ...], int]:
        """How many schedulable nodes in the permitted zones (admitted by `view`) have each
        complete tuple of domains."""
        memo_key = ("value_counts", keys, zone_key, permitted_zones, node_key, view)
        cached = self._memo.get(memo_key)
        if cached is None:
            index = self.values_index(keys, zone_key, node_key)
            counts: dict[tuple[str | None, ...], int] = defaultdict(int)
            for node in self.schedulable_nodes(zone_key, permitted_zones, view):
                values = index[node.name]
                if None not in values:
                    counts[values] += 1
            cached = self._memo[memo_key] = dict(counts)
        return cached  # type: ignore[return-value]

    def schedulable_names(
        self, zone_key: str, permitted_zones: frozenset[str] | None, view: NodeView | None = None
    ) -> frozenset[str]:
        memo_key = ("names", zone_key, permitted_zones, view)
        cached = self._memo.get(memo_key)
        if cached is None:
            cached = self._memo[memo_key] = frozenset(
                n.name for n in self.schedulable_nodes(zone_key, permitted_zones, view)
            )
        return cached  # type: ignore[return-value]

    def schedulable_nodes(
        self, zone_key: str, permitted_zones: frozenset[str] | None, view: NodeView | None = None
    ) -> list[NodeInfo]:
        """Schedulable nodes in the permitted zones, admitted by `view` if given (memoised)."""
        memo_key = ("nodes", zone_key, permitted_zones, view)
        cached = self._memo.get(memo_key)
        if cached is not None:
            return cached  # type: ignore[return-value]
        if view is not None:
            admitted = self.admitted(view)
            result = [n for n in self.schedulable_nodes(zone_key, permitted_zones) if n.name in admitted]  # type: ignore[operator]
        else:
            result = [
                n
                for n in self.nodes.values()
                if n.schedulable and (permitted_zones is None or self.domain(n, zone_key, zone_key) in permitted_zones)
            ]
        self._memo[memo_key] = result
        return result
