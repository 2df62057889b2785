"""A group's pods as a zones x nodes table, for people (demo, audit)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any


def zone_table(where: dict[str, str | None], zones: dict[str, str]) -> str:
    """Rows are zones, one column per node of the zone, each cell the pods on that node."""
    by_zone: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for node, zone in zones.items():
        by_zone[zone][node]  # every node shows, empty or not
    pending = []
    for pod, node in sorted(where.items(), key=lambda kv: _natural(kv[0])):
        if node is None:
            pending.append(pod)
        else:
            by_zone[zones.get(node, "(unknown)")][node].append(pod)
    lines = []
    width = max((len(z) for z in by_zone), default=4)
    for zone in sorted(by_zone):
        cells = [f"{node}: {', '.join(pods) if pods else '-'}" for node, pods in sorted(by_zone[zone].items())]
        count = sum(len(p) for p in by_zone[zone].values())
        lines.append(f"{zone:<{width}}  ({count} pod{'s' if count != 1 else ''})  " + "  |  ".join(cells))
    if pending:
        lines.append(f"{'Pending':<{width}}  {', '.join(pending)}")
    return "\n".join(lines)


def _natural(name: str) -> tuple[Any, ...]:
    head, _, tail = name.rpartition("-")
    return (head, int(tail)) if tail.isdigit() else (name, -1)
