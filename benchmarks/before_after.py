"""One benchmark, two versions of the code, one run: a change's cost measured against what it replaced.

The base revision is checked out into a temporary git worktree; then one benchmark runs from each
tree in turn, `--rounds` times, alternating (base, change, base, change, ...) so that drift in the
machine's load falls on both sides. Each side's figure is the median over its rounds.

- http_latency (default): the filter + prioritize pair over HTTP; the pair median and p99, and the
  pair over the Go floor measured in the same round (the ratio cancels the machine's speed).
- e2e_throughput: pods per second on the local control plane, variant equal-qps (both
  kube-schedulers at client QPS 500), one round per side per run; the extender's pods/s, the
  native scheduler's, and their ratio measured in the same run.

    python -m benchmarks.before_after --base bcd0edb            # http_latency 1k, 2 rounds, ~5 min
    python -m benchmarks.before_after --base HEAD~3 --configs 5k --rounds 3
    python -m benchmarks.before_after --base bcd0edb --benchmark e2e_throughput   # ~10 min
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import REPO, machine, write_result  # noqa: E402

FIGURES = (("pair", "median_of_medians"), ("pair", "median_p99"), ("ratios", "pair_over_go_pair_median"))


def run_side(tree: Path, args: argparse.Namespace, out: Path) -> dict:
    """The benchmark from `tree` (its own extender/ and benchmarks/), its JSON result."""
    if args.benchmark == "http_latency":
        knobs = ["--configs", args.configs, "--requests", str(args.requests), "--runs", str(args.runs)]
    else:
        knobs = ["--variants", "equal-qps", "--rounds", "1"]
    subprocess.run(
        [sys.executable, "-m", f"benchmarks.{args.benchmark}", *knobs, "--out", str(out)],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        check=True,
    )
    return json.loads(out.read_text())


def figures(result: dict) -> dict[str, dict[str, float]]:
    if result.get("benchmark") == "e2e_throughput":
        summary = result["summary"]["equal-qps"]
        return {
            "equal-qps": {
                key: summary[key]
                for key in ("extender_pods_per_second", "native_pods_per_second", "ratio_extender_over_native")
            }
        }
    out = {}
    for entry in result["results"]:
        summary = entry["summary"]
        out[entry["config"]] = {
            f"{section}.{key}": summary[section][key] for section, key in FIGURES if key in summary.get(section, {})
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True, help="the revision to compare against (e.g. the last release)")
    parser.add_argument("--benchmark", choices=["http_latency", "e2e_throughput"], default="http_latency")
    parser.add_argument("--configs", default="1k", help="http_latency's configurations")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout
    info = machine()
    print(f"machine: {info['nproc']} cpu ({info['cpu_model']}); base {args.base} vs working tree at {head.strip()}")
    sides: dict[str, list[dict]] = {"base": [], "change": []}
    with tempfile.TemporaryDirectory(prefix="before-after-") as tmp:
        base = Path(tmp) / "base"
        subprocess.run(["git", "worktree", "add", "--detach", str(base), args.base], cwd=REPO, check=True)
        try:
            for r in range(args.rounds):
                for side, tree in (("base", base), ("change", REPO)):
                    print(f"\n== round {r + 1}/{args.rounds}: {side} ==", flush=True)
                    result = run_side(tree, args, Path(tmp) / f"{side}-{r}.json")
                    sides[side].append(figures(result))
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=REPO, check=False)
    table = {}
    print(f"\n{'config':<12} {'figure':<36} {'base':>9} {'change':>9} {'change/base':>12}")
    for config in sides["base"][0]:
        for name in sides["base"][0][config]:
            b = statistics.median(s[config][name] for s in sides["base"])
            c = statistics.median(s[config][name] for s in sides["change"])
            table[f"{config} {name}"] = {"base": b, "change": c, "change_over_base": round(c / b, 3)}
            print(f"{config:<12} {name:<36} {b:>9.3f} {c:>9.3f} {c / b:>12.3f}")
    path = write_result(
        "before_after",
        {
            "benchmark": "before_after",
            "of": args.benchmark,
            "machine": info,
            "base": args.base,
            "head": head.strip(),
            "figures": table,
        },
        args.out,
    )
    print(f"\nJSON: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
