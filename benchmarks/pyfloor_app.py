"""The Python floor on the local control plane: the extender's own server with do-nothing verbs.

What the e2e kind's `py-floor` variant calls instead of the extender (benchmarks/cluster.py's
PyFloorCluster), as `go-floor` calls benchmarks/gofloor: filter passes every candidate, prioritize
scores each 0, kube-scheduler binds by itself (no bindVerb), and nothing is watched. Everything
else is the extender's: gunicorn with its ConnectionWorker and settings (ExtenderApplication),
the verbs answered from the route table in front of Flask (RouteTable: request id, metrics), each request parsed as the
verbs parse it (orjson, then the wire models) and answered through the same encoders. So its
CPU per placed pod is what serving the protocol costs in Python before any rule, watch or bind,
against the Go floor's in the same run.

With `--kubeconfig` it is the duties floor (the e2e's `py-duties` variant, cluster.PyDutiesCluster):
the same do-nothing filter and prioritize, plus what no rule can drop and the Python floor leaves
to kube-scheduler or skips: the extender's watch cache of every kind it reads (state/watcher.py)
and a bind verb that writes the Binding (effects.KubeBinder) for a pod the watch shows. No rule is
applied, nothing is re-checked or reserved. Its CPU per placed pod is what the extender's duties
cost before any decision: the part of the extender's own figure no faster engine can remove.

    python -m benchmarks.pyfloor_app --listen 127.0.0.1:18890 [--kubeconfig FILE]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):  # `python benchmarks/pyfloor_app.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from extender.api.wire import (  # noqa: E402
    ExtenderArgs,
    ExtenderBindingArgs,
    ExtenderBindingResult,
    ExtenderFilterResult,
    Priorities,
)
from extender.engine import candidate_names  # noqa: E402
from extender.logs import setup_logging  # noqa: E402
from extender.server.app import create_app  # noqa: E402
from extender.server.effects import DiscardEvents, KubeBinder  # noqa: E402
from extender.server.ports import BindError  # noqa: E402
from extender.server.serve import ExtenderApplication, ServeOptions, tune_collector  # noqa: E402
from extender.server.verbs import Verbs  # noqa: E402
from extender.server.wire_io import candidates_of, filter_result  # noqa: E402
from extender.state.reservations import Reservations  # noqa: E402
from extender.state.store import ClusterStore  # noqa: E402


class _NoBinder:
    def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        raise RuntimeError("the Python floor serves no bind verb: kube-scheduler binds")


class FloorVerbs(Verbs):
    """The verbs with nothing decided: every candidate passes, every score is 0."""

    def filter(self, args: ExtenderArgs) -> ExtenderFilterResult:
        return filter_result(args, candidate_names(candidates_of(args)), {}, {})

    def prioritize(self, args: ExtenderArgs) -> Priorities:
        return Priorities([(candidate_names(candidates_of(args)), 0)])


class DutiesVerbs(FloorVerbs):
    """FloorVerbs that also bind: the Binding of a pod the watch shows (the guest's one check, a
    lookup), waiting for the watch as the extender's bind does; nothing else."""

    def bind(self, args: ExtenderBindingArgs) -> ExtenderBindingResult:
        if args.PodUID not in self.store.pods and not self.store.wait_for_pod(args.PodUID, self.watch_wait):
            return ExtenderBindingResult(Error=f"pod {args.PodUID} is not in the cache; kube-scheduler will retry")
        try:
            self.binder.bind(args.PodNamespace, args.PodName, args.PodUID, args.Node)
        except BindError as err:
            return ExtenderBindingResult(Error=str(err))
        return ExtenderBindingResult()


class FloorApplication(ExtenderApplication):
    """ExtenderApplication's gunicorn configuration serving FloorVerbs, ready at once; with a
    kubeconfig, DutiesVerbs over a watched cache, ready once it has synced."""

    def load(self):  # inside the gunicorn worker, like the real build()
        tune_collector()
        store = ClusterStore(Reservations(self.options.tentative_ttl, self.options.committed_ttl))
        if self.options.kubeconfig is None:
            verbs = FloorVerbs(store, _NoBinder(), DiscardEvents())
            return create_app(verbs, ready=lambda: True, max_body=self.options.max_body)
        from extender.kube.client import connect
        from extender.state.watcher import Watcher

        api = connect(self.options.kubeconfig)
        Watcher(api, store, watch_timeout=self.options.watch_timeout).start()
        return create_app(DutiesVerbs(store, KubeBinder(api), DiscardEvents()), max_body=self.options.max_body)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--listen", default="127.0.0.1:18890")
    parser.add_argument("--log-level", default="warning")
    parser.add_argument("--kubeconfig", help="the duties floor: watch the cluster and bind (see above)")
    args = parser.parse_args(argv)
    setup_logging(args.log_level)
    FloorApplication(ServeOptions(listen=args.listen, events=False, kubeconfig=args.kubeconfig)).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
