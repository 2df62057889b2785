"""A/B results as a table, JSON, and a PNG of both sides next to each other."""

from __future__ import annotations

import json
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


def group_of(pod: str) -> str:
    """The group (StatefulSet, or shard) a pod belongs to: its name without the ordinal."""
    name = pod.split("/", 1)[-1]
    head, _, tail = name.rpartition("-")
    return head if head and tail.isdigit() else name


def layout(result: dict[str, Any], nodes: dict[str, str]) -> dict[str, Any]:
    """What the picture shows, as data (tested without drawing): per side, the pods on each node
    (zones x nodes) and the pods left Pending, of the repetition worth seeing (the last with a
    violation, else the last with a Pending pod, else the last); one colour index per group,
    shared by both sides so a group has the same colour left and right."""
    zones = sorted(set(nodes.values()))
    by_zone = {z: sorted(n for n, zz in nodes.items() if zz == z) for z in zones}
    chosen = {side: _run_to_show(data["runs"]) for side, data in result["sides"].items()}
    groups = sorted({group_of(p) for run in chosen.values() for p in [*run["final"], *run.get("pendingPods", ())]})
    sides = {}
    for side, data in result["sides"].items():
        run = chosen[side]
        final = run["final"]
        on_node: dict[str, list[str]] = {}
        for pod, node in sorted(final.items()):
            if node:
                on_node.setdefault(node, []).append(pod.split("/", 1)[-1])
        # pods with no node after the last step (recorded since the colour chart; older results
        # list placed pods only)
        pending = sorted(p.split("/", 1)[-1] for p in run.get("pendingPods", ()))
        sides[side] = {
            "on_node": on_node,
            "pending": pending,
            "summary": data["summary"],
            "repetition": run.get("repetition", len(data["runs"]) - 1),
        }
    return {"zones": zones, "by_zone": by_zone, "colour": {g: i for i, g in enumerate(groups)}, "sides": sides}


def _run_to_show(runs: list[dict[str, Any]]) -> dict[str, Any]:
    def broke(run: dict[str, Any]) -> bool:
        return any(step.get("violations") for step in run.get("steps", ()))

    def left_pending(run: dict[str, Any]) -> bool:
        return bool(run.get("pendingPods"))

    return next((r for r in reversed(runs) if broke(r)), None) or next(
        (r for r in reversed(runs) if left_pending(r)), runs[-1]
    )


def write_png(result: dict[str, Any], nodes: dict[str, str], path: Path) -> None:
    """Left: the native scheduler, right: the extender; each the last repetition's placement as a
    zones x nodes grid where every pod is a chip coloured by its group (or shard), the pods left
    Pending in a row of their own, and the side's violations and pending pods in its title."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyBboxPatch, Patch, Rectangle

    shown = layout(result, nodes)
    zones, by_zone = shown["zones"], shown["by_zone"]
    width = max(1, max(len(v) for v in by_zone.values()))
    palette = plt.get_cmap("tab20" if len(shown["colour"]) > 10 else "tab10")
    most = max(
        [len(p) for s in shown["sides"].values() for p in s["on_node"].values()]
        + [1 + len(s["pending"]) // max(width, 1) for s in shown["sides"].values()]
    )
    rows = len(zones) + 1  # the last row: Pending
    cell_h = 0.32 * max(most, 1) + 0.3
    fig, axes = plt.subplots(
        1, len(shown["sides"]), figsize=(2.2 * width * len(shown["sides"]) + 1.5, 1.6 + cell_h * rows), squeeze=False
    )
    for ax, (side, data) in zip(axes[0], shown["sides"].items(), strict=True):
        for r, zone in enumerate([*zones, "Pending"]):
            y = (rows - 1 - r) * cell_h
            cells = by_zone.get(zone, []) if zone != "Pending" else ["pending"]
            for c, node in enumerate(cells):
                span = width if zone == "Pending" else 1
                ax.add_patch(Rectangle((c, y), span - 0.06, cell_h - 0.06, facecolor="#f4f4f4", edgecolor="#bbbbbb"))
                chips = data["pending"] if zone == "Pending" else data["on_node"].get(node, [])
                per_row = width * 2 if zone == "Pending" else 1
                for k, pod in enumerate(chips):
                    cx = c + 0.05 + (k % per_row) * ((span - 0.1) / per_row)
                    cy = y + cell_h - 0.36 - (k // per_row) * 0.32
                    colour = palette(shown["colour"][group_of(pod)] % palette.N)
                    ax.add_patch(
                        FancyBboxPatch(
                            (cx, cy),
                            (span - 0.1) / per_row - 0.04,
                            0.26,
                            boxstyle="round,pad=0.01",
                            facecolor=colour,
                            edgecolor="#c0392b" if zone == "Pending" else "none",
                            hatch="//" if zone == "Pending" else None,
                            linewidth=1.2,
                        )
                    )
                    ax.text(cx + 0.03, cy + 0.13, pod, va="center", fontsize=7)
        ax.set_xlim(0, width)
        ax.set_ylim(0, rows * cell_h)
        ax.set_yticks([(rows - 1 - r) * cell_h + cell_h / 2 for r in range(rows)], [*zones, "Pending"])
        ax.set_xticks([c + 0.5 for c in range(width)], [f"node {i + 1}" for i in range(width)])
        ax.tick_params(length=0)
        for spine in ax.spines.values():
            spine.set_visible(False)
        s = data["summary"]
        ax.set_title(
            f"{side}: {s['violations']} violations, {s['pending']} pending in {s['runs']} runs\n"
            f"(shown: run {data['repetition'] + 1}, {len(data['pending'])} pending; {s['emptiedZones']} zones emptied; "
            f"median {s['medianSecondsToPlace']}s)",
            fontsize=10,
            color="#c0392b" if s["violations"] else "black",
        )
    legend = [Patch(facecolor=palette(i % palette.N), label=g) for g, i in shown["colour"].items()]
    fig.legend(handles=legend, loc="lower center", ncol=min(len(legend), 8), fontsize=8, frameon=False)
    total = {side: data["summary"]["violations"] for side, data in shown["sides"].items()}
    fig.suptitle(
        f"A/B: {result['scenario']}: violations "
        + ", ".join(f"{side} {n}" for side, n in total.items())
        + " (a run with a violation or a Pending pod if any; a colour per group)"
    )
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
