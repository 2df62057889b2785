"""The grace a node gets that kube-scheduler offers before the extender's watch has shown it.

kube-scheduler's informer often shows a new node first: the very node that would free a Pending
pod. When no node the extender knows takes the pod, the filter answers an Error (retried from
kube-scheduler's backoff queue in seconds) while such a node is young, instead of refusing
(which parks the pod until a cluster event or the one-minute flush; the e2e remedy scenario
waited 60 s that way). Past its grace the node counts as refused, so a node the watch never
shows cannot hold a pod in retries, or hide it from autoscalers.
"""

from __future__ import annotations

import time
from collections.abc import Collection

from ..engine import Decision, uncached_nodes

# How long a node kube-scheduler names but the watch has not shown yet makes a pod no known node
# takes wait (an Error, retried in seconds) instead of being refused; past it the node counts as
# refused, so a node the watch never shows cannot hold a pod in retries (or hide it from autoscalers).
UNCACHED_NODE_GRACE = 30.0
UNCACHED_NODE_FORGET = 300.0  # a node not offered for this long is forgotten (a later miss starts a new grace)
UNCACHED_NODES_REMEMBERED = 4096


class UncachedNodes:
    """Node name -> (first miss, last miss), bounded. Called under the store lock."""

    def __init__(self) -> None:
        self.table: dict[str, tuple[float, float]] = {}

    def __len__(self) -> int:
        return len(self.table)

    def young(self, decision: Decision) -> str | None:
        """A node the decision could not judge, first missed less than UNCACHED_NODE_GRACE ago.

        A node's grace runs from its first miss. Its entry is dropped once the watch shows the
        node (a node deleted and created again later gets a new grace) or once kube-scheduler has
        not offered it for UNCACHED_NODE_FORGET (`forget`); a node the watch never shows keeps its
        entry while it is offered, so past its grace it is refused like any other. With the table
        full, a node not in it gets no grace: the bound on memory never becomes endless retries."""
        names = uncached_nodes(decision)
        if not names:
            return None
        now = time.monotonic()
        table = self.table
        found = None
        for name in names:
            first, _ = table.get(name, (None, None))
            if first is None:
                if len(table) >= UNCACHED_NODES_REMEMBERED:
                    continue
                first = now
            table[name] = (first, now)
            if found is None and now - first < UNCACHED_NODE_GRACE:
                found = name
        return found

    def forget(self, known: Collection[str]) -> None:
        """Drop the entries of nodes the watch now shows, and of nodes not offered for
        UNCACHED_NODE_FORGET (every filter while the table is not empty; it is almost always)."""
        now = time.monotonic()
        table = self.table
        for name in [n for n, (_, last) in table.items() if n in known or now - last > UNCACHED_NODE_FORGET]:
            del table[name]
