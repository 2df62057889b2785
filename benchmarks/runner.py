"""One runner for the workloads in benchmarks/workloads/ (modelled on Kubernetes'
test/integration/scheduler_perf: workloads as data, one runner).

    python -m benchmarks list
    python -m benchmarks run pair-1k                       # a name under benchmarks/workloads/, or a path
    python -m benchmarks run pair-5k --arms extender,noop --rounds 2 --out /tmp/p.json
    python -m benchmarks run pair-1k --set workload.gc_freeze=false
    python -m benchmarks run pair-1k --smoke               # the workload's own tiny size (seconds)
    python -m benchmarks run pair-1k --base bcd0edb --rounds 2   # before/after: REV against the working tree
    python -m benchmarks run e2e-equal-qps --base bcd0edb --rounds 2   # the same on the local control plane

`--base REV` checks REV out into a temporary git worktree and runs the workload alternately
against the extender served from that tree and from the working tree (base, change, base, ...),
one round at a time, so that drift in the machine's load falls on both sides; the measurement
code, the payloads and the floor arms are the working tree's on both sides (only the served
extender, with REV's benchmarks/extender_app.py, differs; the control-plane kind `e2e` serves
REV's extender/ beside the working tree's control plane and harness). Each side's figure is the
median over its rounds; the report gives change / base.

The JSON result (benchmarks/results/<workload>_<commit>_<date>.json unless `--out`; a before/after
run's commit is BASE..HEAD): `machine` (benchmarks/common.py),
`workload` as loaded (after `--smoke` / `--set`), `source`, `arms` (each arm's availability and
info), `figures` (flat name -> value), `targets` (each with its verdict), `detail` (the kind's own).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks import kinds
from benchmarks import workload as wl
from benchmarks.common import REPO, code_version, loadavg, machine, table, verdict, write_result


def judge_flat(targets: list[wl.Target], figures: dict[str, float]) -> list[dict[str, Any]]:
    out = []
    for t in targets:
        bound, higher = (t.min, True) if t.min is not None else (t.max, False)
        value = figures.get(t.figure)
        entry: dict[str, Any] = {"figure": t.figure, "min" if higher else "max": bound, "value": value}
        entry["verdict"] = "no figure" if value is None else verdict(value, bound, higher_is_better=higher)
        if t.note:
            entry["note"] = t.note
        out.append(entry)
    return out


def judge(kind: Any, workload: Any, result: dict[str, Any]) -> list[dict[str, Any]]:
    if hasattr(kind, "judge"):
        return kind.judge(workload.targets, result)
    return judge_flat(workload.targets, result["figures"])


def targets_table(verdicts: list[dict[str, Any]]) -> str:
    rows = [
        [
            v["figure"] + (f" [{v['rows']}]" if v.get("rows") else ""),
            f"<= {v['max']}" if "max" in v else f">= {v['min']}",
            "-" if v["value"] is None else v["value"],
            v["verdict"],
        ]
        for v in verdicts
    ]
    return table(["target", "bound", "value", "verdict"], rows) if rows else "(no target)"


def chosen_arms(workload: Any, text: str | None) -> list[str]:
    if not text:
        return list(workload.arms)
    data = workload.model_dump(mode="json") | {"arms": [a for a in text.split(",") if a]}
    return list(wl.validate(data, "--arms").arms)


def run(args: argparse.Namespace) -> int:
    path, workload = wl.load(args.workload, smoke=args.smoke, sets=args.set)
    kind = kinds.module(workload.kind)
    arms = chosen_arms(workload, args.arms)
    rounds = args.rounds or workload.rounds
    info = machine()
    print(
        f"machine: {info['nproc']} cpu ({info['cpu_model']}), Python {info['python']}, load {info['loadavg_at_start']}"
    )
    print(
        f"workload: {workload.name} ({workload.kind}): {workload.description}; arms {','.join(arms)}, {rounds} rounds"
    )
    data: dict[str, Any] = {
        "runner": 1,
        "machine": info,
        "source": str(path),
        "workload": workload.model_dump(mode="json"),
    }
    if args.base:
        if not getattr(kind, "SUPPORTS_BASE", False):
            print(f"--base: the {workload.kind} kind has no before/after mode", file=sys.stderr)
            return 2
        data |= before_after(kind, workload, arms, rounds, args.base)
        text = base_table(data["before_after"])
    else:
        with tempfile.TemporaryDirectory(prefix=f"bench-{workload.name}-") as tmp:
            result = kind.run(workload, arms=arms, rounds=rounds, workdir=Path(tmp))
        data |= {"arms": result["arms"], "figures": result["figures"], "detail": result["detail"]}
        data["targets"] = judge(kind, workload, result)
        text = kind.report(result) + "\n\n" + targets_table(data["targets"])
    info["loadavg_at_end"] = [round(x, 2) for x in loadavg()]
    info["code_at_end"] = code_version()
    if info["code_at_end"]["extender_sha256"] != info["code"]["extender_sha256"]:
        print("WARNING: extender/ changed on disk during the run; the figures mix two versions of the code")
    print()
    print(text)
    out = write_result(data, args.out)
    print(f"\nJSON: {out}")
    return 0


def before_after(kind: Any, workload: Any, arms: list[str], rounds: int, base: str) -> dict[str, Any]:
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout
    print(f"before/after: base {base} vs the working tree at {head.strip()}")
    sides: dict[str, list[dict[str, float]]] = {"base": [], "change": []}
    verdicts: dict[str, list[Any]] = {"base": [], "change": []}
    with tempfile.TemporaryDirectory(prefix="before-after-") as tmp:
        tree = Path(tmp) / "base"
        subprocess.run(["git", "worktree", "add", "--detach", str(tree), base], cwd=REPO, check=True)
        try:
            for r in range(rounds):
                for side, served in (("base", tree), ("change", REPO)):
                    print(f"\n== round {r + 1}/{rounds}: {side} ==", flush=True)
                    work = Path(tmp) / f"{side}-{r}"
                    work.mkdir()
                    result = kind.run(workload, arms=arms, rounds=1, workdir=work, tree=served)
                    sides[side].append(result["figures"])
                    verdicts[side].append(judge(kind, workload, result))
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=REPO, check=False)
    figures: dict[str, dict[str, float | None]] = {}
    for name in sides["base"][0]:
        if not all(name in s for s in sides["base"] + sides["change"]):
            continue
        b = statistics.median(s[name] for s in sides["base"])
        c = statistics.median(s[name] for s in sides["change"])
        figures[name] = {"base": b, "change": c, "change_over_base": round(c / b, 3) if b else None}
    return {
        "base": base,
        "head": head.strip(),
        "before_after": figures,
        "per_round": sides,
        "targets": verdicts,
    }


KEY_FIGURES = (
    "extender.pair.median",
    "extender.pair.p99",
    "ratio.pair_over_noop.median",
    "ratio.pair_over_gofloor.median",
)


def base_table(figures: dict[str, dict[str, Any]]) -> str:
    keys = [k for k in KEY_FIGURES if k in figures] + [k for k in figures if k not in KEY_FIGURES]
    return "medians over rounds; change / base\n" + table(
        ["figure", "base", "change", "change/base"],
        [[k, figures[k]["base"], figures[k]["change"], _or_dash(figures[k]["change_over_base"])] for k in keys],
    )


def _or_dash(value: float | None) -> Any:
    return "-" if value is None else value


def list_workloads() -> int:
    rows = []
    for path in wl.every():
        try:
            w = wl.parse(path.read_text(), str(path))
            rows.append([path.stem, w.kind, w.description])
        except wl.WorkloadError as exc:
            rows.append([path.stem, "INVALID", str(exc)])
    print(table(["workload", "kind", "description"], rows))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="the workloads in benchmarks/workloads/ with their one-line description")
    r = sub.add_parser("run", help="run one workload")
    r.add_argument("workload", help="a workload file, or a name under benchmarks/workloads/")
    r.add_argument(
        "--arms",
        help="comma-separated arms (default: the workload's), of extender, noop, gofloor (the HTTP kinds)",
    )
    r.add_argument("--rounds", type=int, help="rounds (default: the workload's)")
    r.add_argument("--out", type=Path, help="JSON output (default benchmarks/results/<workload>_<commit>_<date>.json)")
    r.add_argument("--base", metavar="REV", help="before/after: the extender at REV against the working tree")
    r.add_argument("--smoke", action="store_true", help="apply the workload's `smoke` overrides (a few seconds)")
    r.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="override a field (dotted path, YAML value)"
    )
    args = parser.parse_args(argv)
    if args.command == "list":
        return list_workloads()
    if args.rounds is not None and args.rounds < 1:
        parser.error("--rounds must be at least 1")
    try:
        return run(args)
    except wl.WorkloadError as exc:
        print(f"invalid workload: {exc}", file=sys.stderr)
        return 2
