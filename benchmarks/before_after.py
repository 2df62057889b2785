"""e2e_throughput, two versions of the code, one run: a change's cost measured against what it replaced.

(The HTTP pair's before/after is now the runner's `--base REV` mode:
`python -m benchmarks run pair-1k --base REV`; this script keeps the e2e mode until
e2e_throughput becomes a kind of the runner.)

The base revision is checked out into a temporary git worktree; then e2e_throughput runs from each
tree in turn, `--rounds` times, alternating (base, change, base, change, ...) so that drift in the
machine's load falls on both sides. Each side's figure is the median over its rounds: pods per
second on the local control plane, variant equal-qps (both kube-schedulers at client QPS 500), one
round per side per run; the extender's pods/s, the native scheduler's, and their ratio measured in
the same run.

    python -m benchmarks.before_after --base bcd0edb --rounds 2   # ~10 min
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


def run_side(tree: Path, args: argparse.Namespace, out: Path) -> dict:
    """The benchmark from `tree` (its own extender/ and benchmarks/), its JSON result."""
    knobs = ["--variants", "equal-qps", "--rounds", "1"]
    subprocess.run(
        [sys.executable, "-m", f"benchmarks.{args.benchmark}", *knobs, "--out", str(out)],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        check=True,
    )
    return json.loads(out.read_text())


def figures(result: dict) -> dict[str, dict[str, float]]:
    summary = result["summary"]["equal-qps"]
    return {
        "equal-qps": {
            key: summary[key]
            for key in ("extender_pods_per_second", "native_pods_per_second", "ratio_extender_over_native")
        }
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True, help="the revision to compare against (e.g. the last release)")
    parser.add_argument("--benchmark", choices=["e2e_throughput"], default="e2e_throughput")
    parser.add_argument("--rounds", type=int, default=2)
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
