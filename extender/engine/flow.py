"""A small max-flow solver with lower bounds, for the dead-end analysis (engine/lookahead.py).

Dinic's algorithm over integer capacities. Lower bounds are handled the textbook way: an edge
u->v with bounds [low, high] becomes an edge of capacity high-low, v is owed `low` from a super
source and u owes `low` to a super sink, and an uncapped edge t->s closes the circulation; a
flow that satisfies every bound exists exactly when the super source's edges can be saturated.

The networks here have tens to a few hundred vertices (pod kinds, domains, node classes), so
the recursion in `_push` is as deep as the network (about ten levels), never as deep as any
count of pods or nodes. Capacities may be large (a million pods): Dinic's running time does not
depend on them.
"""

from __future__ import annotations

import time
from collections import deque

INFINITE = 1 << 60


class DeadlineExceeded(Exception):
    """The wall-time deadline passed while a flow was being computed."""


class Network:
    def __init__(self) -> None:
        self._adjacent: list[list[int]] = []  # vertex -> ids of edges leaving it (residual pairs included)
        self._to: list[int] = []
        self._room: list[int] = []  # residual capacity per edge id; edge e's reverse is e ^ 1
        self._owed: list[int] = []  # per vertex: lower bounds flowing in minus lower bounds flowing out
        self._solved = False

    def vertex(self) -> int:
        self._adjacent.append([])
        self._owed.append(0)
        return len(self._adjacent) - 1

    def edge(self, tail: int, head: int, high: int, low: int = 0) -> int:
        """Add tail->head carrying between `low` and `high` units; returns the edge id."""
        if high < low:
            raise ValueError(f"edge bounds [{low}, {high}] are empty")
        self._owed[head] += low
        self._owed[tail] -= low
        return self._add(tail, head, high - low)

    def _add(self, tail: int, head: int, room: int) -> int:
        edge = len(self._to)
        self._to += (head, tail)
        self._room += (room, 0)
        self._adjacent[tail].append(edge)
        self._adjacent[head].append(edge + 1)
        return edge

    def used(self, edge: int) -> int:
        """Units the solved flow sends over `edge` beyond its lower bound."""
        return self._room[edge ^ 1]

    def feasible(self, source: int, sink: int, deadline: float | None = None) -> bool:
        """Is there a flow from source to sink meeting every edge's bounds (flow conservation
        everywhere else)? Solves once; the residual graph is then kept for `reaching`."""
        if self._solved:
            raise RuntimeError("a network is solved once")
        self._solved = True
        self._add(sink, source, INFINITE)
        top, bottom = self.vertex(), self.vertex()
        self._super = (top, bottom)
        needed = 0
        for v, owed in enumerate(self._owed):
            if owed > 0:
                self._add(top, v, owed)
                needed += owed
            elif owed < 0:
                self._add(v, bottom, -owed)
        return self._max_flow(top, bottom, deadline) == needed

    def reaching(self, target: int) -> set[int]:
        """Vertices with a residual path to `target`, outside the super source and sink: after a
        feasible solve, a unit on an edge x->y can be moved to x->z exactly when z is among
        `reaching(x)` (the residual cycle x->z ~> x exists)."""
        excluded = set(getattr(self, "_super", ()))
        seen = {target}
        queue = deque([target])
        to, room, adjacent = self._to, self._room, self._adjacent
        while queue:
            v = queue.popleft()
            for edge in adjacent[v]:
                w = to[edge]
                if w not in seen and w not in excluded and room[edge ^ 1] > 0:
                    seen.add(w)
                    queue.append(w)
        return seen

    # -- Dinic ------------------------------------------------------------------------------------
    def _max_flow(self, source: int, sink: int, deadline: float | None) -> int:
        total = 0
        while True:
            if deadline is not None and time.monotonic() > deadline:
                raise DeadlineExceeded
            level = self._levels(source, sink)
            if level is None:
                return total
            cursor = [0] * len(self._adjacent)
            while True:
                pushed = self._push(source, sink, INFINITE, level, cursor)
                if not pushed:
                    break
                total += pushed

    def _levels(self, source: int, sink: int) -> list[int] | None:
        level = [-1] * len(self._adjacent)
        level[source] = 0
        queue = deque([source])
        to, room, adjacent = self._to, self._room, self._adjacent
        while queue:
            v = queue.popleft()
            for edge in adjacent[v]:
                w = to[edge]
                if level[w] < 0 and room[edge] > 0:
                    level[w] = level[v] + 1
                    queue.append(w)
        return level if level[sink] >= 0 else None

    def _push(self, v: int, sink: int, limit: int, level: list[int], cursor: list[int]) -> int:
        if v == sink:
            return limit
        to, room, edges = self._to, self._room, self._adjacent[v]
        while cursor[v] < len(edges):
            edge = edges[cursor[v]]
            w = to[edge]
            if room[edge] > 0 and level[w] == level[v] + 1:
                pushed = self._push(w, sink, min(limit, room[edge]), level, cursor)
                if pushed:
                    room[edge] -= pushed
                    room[edge ^ 1] += pushed
                    return pushed
            cursor[v] += 1
        return 0
