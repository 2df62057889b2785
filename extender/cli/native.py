"""translate and ab, the retire path: what the native scheduler would give instead of a policy, and
a scenario measured under both schedulers."""

from __future__ import annotations

import argparse
import json
import os
import sys

import yaml

from .common import Subcommands, env
from .errors import UsageError


def register(sub: Subcommands, quiet: argparse.ArgumentParser) -> None:
    """What the native scheduler would give instead: translate a policy to native constraints, and
    ab to measure both sides on a scenario."""
    tr = sub.add_parser(
        "translate",
        parents=[quiet],
        help="the closest native topologySpreadConstraints/affinity for a policy (the retire path)",
    )
    tr.add_argument(
        "source",
        help="a file (PlacementPolicy, StatefulSet with an inline policy, or a bare spec; '-' for stdin), "
        "or statefulset/NAME or placementpolicy/NAME in the live cluster",
    )
    tr.add_argument("-n", "--namespace", default="default")
    tr.add_argument("--kubeconfig", default=env("KUBECONFIG"))
    tr.add_argument("--context", help="the kubeconfig context to use (default: its current context)")
    tr.add_argument("--size", type=int, help="group size (default: group.size, else the StatefulSets' replicas)")
    tr.add_argument(
        "--match-labels", help="labels of the group's pods, k=v[,k=v] (default: the StatefulSet's selector)"
    )
    tr.add_argument(
        "--shard-label",
        default="controller-revision-hash",
        help="pod label that differs per shard, for anti-affinity's matchLabelKeys",
    )
    tr.add_argument("--json", action="store_true")
    tr.set_defaults(func=_translate)

    ab = sub.add_parser("ab", help="run a scenario under the native scheduler and under the extender, K times each")
    ab.add_argument("scenario", help="scenario YAML (see config/ab/)")
    ab.add_argument("-k", "--repetitions", type=int, help="repetitions per side (default: the scenario's)")
    ab.add_argument("--out", help="directory for ab-<scenario>.json and .png (default: .)")
    ab.add_argument("--no-png", action="store_true", help="skip the picture (no matplotlib needed)")
    ab.set_defaults(func=_ab)


def _labels(text: str | None) -> dict[str, str]:
    if not text:
        return {}
    pairs = [p.split("=", 1) for p in text.split(",") if p]
    if any(len(p) != 2 for p in pairs):
        raise UsageError(f"--match-labels takes key=value[,key=value]; got {text!r}")
    return {k: v for k, v in pairs}


def _translate_source(args: argparse.Namespace) -> tuple[object, dict[str, str], int | None, str]:
    """The policy, the group's labels and size, and a name, from a file or the live cluster."""
    from ..ops.translate_input import from_cluster, from_documents

    if args.source.count("/") == 1 and not os.path.exists(args.source):
        return from_cluster(args.source, args.namespace, args.kubeconfig, args.context)
    text = sys.stdin.read() if args.source == "-" else open(args.source, encoding="utf-8").read()
    return from_documents([d for d in yaml.safe_load_all(text) if d is not None], args.source)


def _translate(args: argparse.Namespace) -> int:
    from ..ops.translate import translate

    spec, labels, size, name = _translate_source(args)
    result = translate(
        spec,
        match_labels={**labels, **_labels(args.match_labels)},  # type: ignore[arg-type]
        group_size=args.size or size,
        shard_label=args.shard_label,
    )
    gaps = [{"rule": g.rule, "limitation": g.limitation, "cost": g.cost} for g in result.gaps]
    if args.json:
        print(
            json.dumps(
                {"source": name, "groupSize": result.group_size, "fragment": result.fragment, "gaps": gaps}, indent=2
            )
        )
        return 0
    print(f"# Native constraints closest to {name} (group size {result.group_size or 'unknown'}).")
    print("# Merge under spec.template.spec of every StatefulSet of the group, and set schedulerName back.")
    sys.stdout.write(yaml.safe_dump(result.fragment, sort_keys=False))
    print("# What the native scheduler cannot express, and what that costs:")
    for g in result.gaps:
        print(f"# - {g.rule}: {g.limitation}.")
        print(f"#   cost: {g.cost}.")
    return 0


def _ab(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..ab import load, run

    try:
        scenario = load(args.scenario)
    except (ValueError, OSError) as err:
        print(f"ab: {err}", file=sys.stderr)
        return 2
    out = Path(args.out or ".")
    out.mkdir(parents=True, exist_ok=True)
    run(
        scenario,
        repetitions=args.repetitions,
        json_path=out / f"ab-{scenario.name}.json",
        png_path=None if args.no_png else out / f"ab-{scenario.name}.png",
    )
    return 0
