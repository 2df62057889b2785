"""A/B results as a table, JSON, and a PNG of both sides next to each other."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

FIELDS = [
    ("runs", "runs"),
    ("runsWithViolations", "runs breaking a hard rule"),
    ("violations", "hard-rule violations"),
    ("runsWithPending", "runs with pods left Pending"),
    ("pending", "pods left Pending"),
    ("emptiedZones", "zones a scale-down emptied needlessly"),
    ("medianSecondsToPlace", "median seconds to place"),
]


def table(result: dict[str, Any]) -> str:
    sides = result["sides"]
    names = list(sides)
    keys = sorted({k for s in sides.values() for k in s["summary"]["maxSkew"]})
    rows = [(label, *[str(sides[n]["summary"][field]) for n in names]) for field, label in FIELDS]
    rows += [(f"max skew {k}", *[str(sides[n]["summary"]["maxSkew"].get(k, "-")) for n in names]) for k in keys]
    width = max(len(r[0]) for r in rows)
    header = f"{'scenario ' + result['scenario']:<{width}}  " + "  ".join(f"{n:>10}" for n in names)
    lines = [header, "-" * len(header)]
    lines += [f"{r[0]:<{width}}  " + "  ".join(f"{v:>10}" for v in r[1:]) for r in rows]
    return "\n".join(lines)


def write_json(result: dict[str, Any], path: Path) -> None:
    path.write_text(json.dumps(result, indent=2) + "\n")


def write_png(result: dict[str, Any], nodes: dict[str, str], path: Path) -> None:
    """Left: the native scheduler, right: the extender; each the last repetition's placement as
    a zones x nodes grid of pod counts, with its side's totals in the title."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    zones = sorted(set(nodes.values()))
    by_zone = {z: sorted(n for n, zz in nodes.items() if zz == z) for z in zones}
    width = max(len(v) for v in by_zone.values())
    sides = list(result["sides"].items())
    fig, axes = plt.subplots(1, len(sides), figsize=(5.5 * len(sides), 1.4 + 0.9 * len(zones)), squeeze=False)
    for ax, (side, data) in zip(axes[0], sides, strict=True):
        last = data["runs"][-1]
        on_node: dict[str, list[str]] = {}
        for pod, node in sorted(last["final"].items()):
            if node:
                on_node.setdefault(node, []).append(pod.split("/", 1)[-1])
        counts = Counter({n: len(p) for n, p in on_node.items()})
        top = max(1, max(counts.values(), default=1))
        grid = [
            [counts.get(by_zone[z][i], 0) if i < len(by_zone[z]) else float("nan") for i in range(width)] for z in zones
        ]
        ax.imshow(grid, cmap="Blues", vmin=0, vmax=top * 1.6, aspect="auto")
        for r, z in enumerate(zones):
            for c, node in enumerate(by_zone[z]):
                ax.text(c, r, "\n".join(on_node.get(node, ["-"])), ha="center", va="center", fontsize=8)
        ax.set_yticks(range(len(zones)), zones)
        ax.set_xticks(range(width), [f"node {i + 1}" for i in range(width)])
        s = data["summary"]
        ax.set_title(
            f"{side}: {s['violations']} violations, {s['pending']} pending,\n"
            f"{s['emptiedZones']} zones emptied, median {s['medianSecondsToPlace']}s "
            f"({s['runs']} runs)",
            fontsize=10,
        )
    fig.suptitle(f"A/B: {result['scenario']} (last repetition's placement, pods per node)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
