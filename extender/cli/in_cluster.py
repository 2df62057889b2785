"""The other processes an install runs in the cluster: deletion-costs (the opt-in scale-down
controller) and label-namespace (the Helm chart's install hook)."""

from __future__ import annotations

import argparse

from .common import Subcommands, env, positive_seconds
from .errors import UsageError


def register(sub: Subcommands) -> None:
    """The other processes an install runs in the cluster: the scale-down controller and the
    Helm chart's namespace-labelling hook."""
    dc = sub.add_parser(
        "deletion-costs",
        help="opt-in scale-down controller: pod-deletion-cost on ReplicaSet pods of policy groups",
    )
    dc.add_argument("--kubeconfig", default=env("EXTENDER_KUBECONFIG", env("KUBECONFIG")))
    dc.add_argument("--interval", type=positive_seconds, default=2.0, help="seconds between passes (default 2)")
    dc.add_argument("--rate", type=float, default=10.0, help="most patches a second (default 10)")
    dc.set_defaults(func=_deletion_costs)

    ln = sub.add_parser(
        "label-namespace",
        help="merge labels into a namespace's (the Helm chart's install hook: Pod Security labels on its namespace)",
    )
    ln.add_argument("namespace", help="the namespace to label")
    ln.add_argument("labels", nargs="+", metavar="KEY=VALUE", help="each label to set (the others stay)")
    ln.add_argument("--kubeconfig", default=env("KUBECONFIG"), help="default: in-cluster credentials")
    ln.set_defaults(func=_label_namespace)


def _deletion_costs(args: argparse.Namespace) -> int:
    """The opt-in scale-down controller: watch like the extender, keep pod-deletion-cost current."""
    import time

    from ..kube.client import connect
    from ..server.deletion_costs import DeletionCostController
    from ..server.effects import KubeDeletionCostWriter
    from ..state.store import ClusterStore
    from ..state.watcher import Watcher

    api = connect(args.kubeconfig)
    store = ClusterStore()
    Watcher(api, store).start()
    DeletionCostController(store, KubeDeletionCostWriter(api), interval=args.interval, rate=args.rate).start()
    while True:
        time.sleep(3600)


def _label_namespace(args: argparse.Namespace) -> int:
    """The Helm chart's install hook: the Pod Security labels on the release's namespace, which
    `helm install --create-namespace` makes without them."""
    from ..kube.client import connect
    from ..server.effects import label_namespace

    labels: dict[str, str] = {}
    for pair in args.labels:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"{pair!r}: want KEY=VALUE")
        labels[key] = value
    label_namespace(connect(args.kubeconfig), args.namespace, labels)
    print(f"namespace {args.namespace} labelled " + ", ".join(f"{k}={v}" for k, v in labels.items()))
    return 0
