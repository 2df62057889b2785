"""Placements chosen but not yet visible in the watch (kubernetes/kubernetes#82359).

kube-scheduler binds asynchronously: the next pod's filter can arrive before the previous pod's
binding is visible, or even before our bind verb was called (volume PreBind can take seconds).
A reservation stands in for such a pod until the watch shows it on a node, it is released, or it
expires. TENTATIVE ones come from filter/prioritize (the node may still be unknown: then only the
domains every remaining candidate shares are recorded); COMMITTED ones from a successful bind.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from ..engine import Placement, PlacementKind
from ..limits import DEFAULT_COMMITTED_TTL, DEFAULT_TENTATIVE_TTL
from .objects import PodRecord


@dataclass
class Reservation:
    pod: PodRecord
    kind: PlacementKind
    node: str | None
    domains: Mapping[str, str] | None
    expires: float
    written: bool = False  # COMMITTED and its Binding accepted by the API server (the watch may lag)

    def placement(self) -> Placement:
        return Placement(self.pod.key, self.node, self.pod.shard, self.pod.ordinal, self.kind, self.domains)


class Reservations:
    def __init__(
        self,
        tentative_ttl: float = DEFAULT_TENTATIVE_TTL,
        committed_ttl: float = DEFAULT_COMMITTED_TTL,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.tentative_ttl = tentative_ttl
        self.committed_ttl = committed_ttl
        self.clock = clock
        self._by_uid: dict[str, Reservation] = {}
        self.version = 0  # bumps on every change: part of the key of cached decisions
        # No reservation expires before this (a lower bound: a release leaves it as it was), so
        # expire(), called by every decision, looks at the table only when one may be due.
        self._due = math.inf

    def __len__(self) -> int:
        return len(self._by_uid)

    def __iter__(self) -> Iterator[Reservation]:
        self.expire()
        return iter(list(self._by_uid.values()))

    def get(self, uid: str) -> Reservation | None:
        self.expire()
        return self._by_uid.get(uid)

    def peek(self, uid: str) -> Reservation | None:
        """As get, without expiring first: for a caller that called expire() once for many lookups."""
        return self._by_uid.get(uid)

    def peek_all(self) -> list[Reservation]:
        return list(self._by_uid.values())

    def hold(self, pod: PodRecord, names: list[str], shared: Callable[[list[str]], Mapping[str, str]]) -> None:
        """Stand in for a pod its decision left `names` for: its node if one remains, else the
        domains all remaining nodes share (often its zone). A committed bind is never undone."""
        current = self._by_uid.get(pod.uid)
        if current is not None and current.kind is PlacementKind.COMMITTED:
            return
        if not names:
            self.release(pod.uid)
        elif len(names) == 1:
            self.tentative(pod, names[0], None)
        else:
            self.tentative(pod, None, shared(names))

    def tentative(self, pod: PodRecord, node: str | None, domains: Mapping[str, str] | None) -> None:
        current = self._by_uid.get(pod.uid)
        if current is not None and current.kind is PlacementKind.COMMITTED:
            return  # a bind already decided; a late filter/prioritize must not undo it
        expires = self.clock() + self.tentative_ttl
        self._by_uid[pod.uid] = Reservation(pod, PlacementKind.TENTATIVE, node, domains, expires)
        self._due = min(self._due, expires)
        self.version += 1

    def commit(self, pod: PodRecord, node: str) -> None:
        expires = self.clock() + self.committed_ttl
        self._by_uid[pod.uid] = Reservation(pod, PlacementKind.COMMITTED, node, None, expires)
        self._due = min(self._due, expires)
        self.version += 1

    def confirm(self, uid: str) -> None:
        """The API server accepted the pod's Binding: the pod is on its node, whether or not the
        watch shows it yet (the in-scheduler gate frees the lift's slot on this, not on the watch)."""
        current = self._by_uid.get(uid)
        if current is not None and current.kind is PlacementKind.COMMITTED:
            current.written = True

    def written(self, uid: str) -> bool:
        current = self._by_uid.get(uid)
        return current is not None and current.written

    def release(self, uid: str) -> None:
        if self._by_uid.pop(uid, None) is not None:
            self.version += 1

    def expire(self) -> None:
        now = self.clock()
        if now < self._due:
            return
        for uid in [u for u, r in self._by_uid.items() if r.expires <= now]:
            del self._by_uid[uid]
            self.version += 1
        self._due = min((r.expires for r in self._by_uid.values()), default=math.inf)

    def counts(self) -> dict[str, int]:
        """Reservations by kind, without the lock: /readyz and /metrics never wait on a decision.
        One copy of the table, made in C under the GIL, is read; ones past their time but not
        expired yet still count (the next decision expires them)."""
        out = {k.value: 0 for k in (PlacementKind.TENTATIVE, PlacementKind.COMMITTED)}
        for r in list(self._by_uid.values()):
            out[r.kind.value] += 1
        return out
