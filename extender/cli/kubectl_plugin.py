r"""`kubectl placement …`: the operator commands as a kubectl plugin.

kubectl runs an executable named `kubectl-placement` found on PATH (installed with the package
as a console script) with the arguments that follow `kubectl placement`. This module speaks
kubectl's habits (`-n/--namespace`, `-A/--all-namespaces`, `--context`, `--kubeconfig`, a pod
named without its namespace, the context's own namespace as the default) and runs the CLI's
commands (extender/cli/commands.py) with them: one implementation, two spellings.

    kubectl placement explain crdb-4 -n db        python -m extender explain db/crdb-4
    kubectl placement audit -A                    python -m extender audit
    kubectl placement audit -n db --context prod  python -m extender audit -n db --context prod
    kubectl placement translate statefulset/crdb  python -m extender translate statefulset/crdb -n <ns>
    kubectl placement check policy.yaml           python -m extender check policy.yaml
    kubectl placement adopt sts/crdb -n db \      python -m extender adopt statefulset/crdb -n db ...
        --policy-name crdb
    kubectl placement retire sts/crdb -n db       python -m extender retire statefulset/crdb -n db
    kubectl placement rotation export sts/crdb \   python -m extender rotation export statefulset/crdb -n db
        -n db
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from .commands import main as cli_main

COMMANDS = ("explain", "audit", "plan", "translate", "check", "adopt", "retire", "rotation")


def _kubectl_flags() -> argparse.ArgumentParser:
    flags = argparse.ArgumentParser(add_help=False)
    flags.add_argument("-n", "--namespace", help="namespace (default: the context's, else 'default')")
    flags.add_argument("--context", help="the kubeconfig context to use (default: its current context)")
    flags.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"), help="path to the kubeconfig file")
    return flags


def parser() -> argparse.ArgumentParser:
    flags = _kubectl_flags()
    top = argparse.ArgumentParser(
        prog="kubectl placement",
        description="Placement extender commands for kubectl: explain a pod's verdicts, audit placements, "
        "translate a policy to native constraints, check a policy file.",
    )
    sub = top.add_subparsers(dest="command", required=True, metavar="{" + ",".join(COMMANDS) + "}")
    ex = sub.add_parser("explain", parents=[flags], help="each node's verdict for one pod, with the rule and numbers")
    ex.add_argument("pod", help="POD, pod/POD or NAMESPACE/POD")
    ex.add_argument("-o", "--output", choices=["text", "json"], default="text")
    au = sub.add_parser("audit", parents=[flags], help="every policy group's placement; exit 1 on a violation")
    au.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")
    au.add_argument("-o", "--output", choices=["text", "json"], default="text")
    tr = sub.add_parser(
        "translate",
        parents=[flags],
        help="the closest native constraints for a policy; other options as `python -m extender translate`",
    )
    tr.add_argument("source", help="a file, '-', or statefulset/NAME or placementpolicy/NAME in the cluster")
    pl = sub.add_parser("plan", parents=[flags], help="grow a StatefulSet or drain nodes: what it takes")
    pl.add_argument("target", nargs="+", help="statefulset/NAME --replicas N, or drain node/NAME ... | drain --all")
    pl.add_argument("-o", "--output", choices=["text", "json"], default="text")
    for verb, text in (
        ("adopt", "move a workload to the extender; other options as `python -m extender adopt`"),
        ("retire", "move a workload back to the native scheduler; as `python -m extender retire`"),
    ):
        cmd = sub.add_parser(verb, parents=[flags], help=text)
        cmd.add_argument("workload", nargs="?", help="statefulset/NAME or deployment/NAME (or -f FILE)")
    ro = sub.add_parser(
        "rotation", parents=[flags], help="export a StatefulSet's ZoneRotation as YAML to commit (read-only)"
    )
    ro.add_argument("action", choices=["export"])
    ro.add_argument("workload", help="statefulset/NAME")
    ch = sub.add_parser("check", help="validate a policy file ('-' for stdin)")
    ch.add_argument("file")
    return top


def context_namespace(kubeconfig: str | None, context: str | None) -> str:
    """The namespace kubectl would use: the context's, else "default" (as kubectl does)."""
    try:
        from kubernetes import config

        contexts, current = config.list_kube_config_contexts(config_file=kubeconfig)
    except Exception:  # no kubeconfig: the commands that need one say so themselves
        return "default"
    chosen = next((c for c in contexts if c.get("name") == context), None) if context else current
    return ((chosen or {}).get("context") or {}).get("namespace") or "default"


def cli_arguments(args: argparse.Namespace, rest: Sequence[str]) -> list[str]:
    """The extender CLI's arguments for a plugin invocation."""
    if args.command == "check":
        return ["check", args.file, *rest]
    connection = [f"--kubeconfig={args.kubeconfig}"] if args.kubeconfig else []
    connection += [f"--context={args.context}"] if args.context else []
    namespace = args.namespace or context_namespace(args.kubeconfig, args.context)
    if args.command == "explain":
        pod = args.pod.removeprefix("pod/").removeprefix("pods/")
        if "/" not in pod:
            pod = f"{namespace}/{pod}"
        return ["explain", pod, *connection, *(["--json"] if args.output == "json" else []), *rest]
    if args.command == "audit":
        scope = [] if args.all_namespaces else ["-n", namespace]
        return ["audit", *scope, *connection, *(["--json"] if args.output == "json" else []), *rest]
    if args.command == "plan":
        return [
            "plan",
            *args.target,
            "-n",
            namespace,
            *connection,
            *(["--json"] if args.output == "json" else []),
            *rest,
        ]
    if args.command == "rotation":
        return ["rotation", args.action, args.workload, "-n", namespace, *connection, *rest]
    if args.command in ("adopt", "retire"):
        workload = [args.workload] if args.workload else []
        return [args.command, *workload, "-n", namespace, *connection, *rest]
    return ["translate", args.source, "-n", namespace, *connection, *rest]


# Commands whose options are the CLI's own: their --help is the CLI's (it lists every option)
PASSED_THROUGH = ("translate", "adopt", "retire", "plan", "rotation")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in PASSED_THROUGH and {"-h", "--help"} & set(argv[1:]):
        print(
            f"kubectl placement {argv[0]} takes the options of `python -m extender {argv[0]}`, and kubectl's "
            "-n/--namespace, --context and --kubeconfig:\n"
        )
        return cli_main([argv[0], "--help"])
    args, rest = parser().parse_known_args(argv)
    if rest and args.command not in PASSED_THROUGH:
        parser().error(f"unrecognized arguments: {' '.join(rest)}")
    return cli_main(cli_arguments(args, rest))


if __name__ == "__main__":
    sys.exit(main())
