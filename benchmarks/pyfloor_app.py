"""The Python floor on the local control plane: the extender's own server with do-nothing verbs.

What the e2e kind's `py-floor` variant calls instead of the extender (benchmarks/cluster.py's
PyFloorCluster), as `go-floor` calls benchmarks/gofloor: filter passes every candidate, prioritize
scores each 0, kube-scheduler binds by itself (no bindVerb), and nothing is watched. Everything
else is the extender's: gunicorn with its ConnectionWorker and settings (ExtenderApplication),
the verbs answered in front of Flask (VerbRoutes: request id, metrics), each request parsed as the
verbs parse it (orjson, then the wire models) and answered through the same encoders. So its
CPU per placed pod is what serving the protocol costs in Python before any rule, watch or bind,
against the Go floor's in the same run.

    python -m benchmarks.pyfloor_app --listen 127.0.0.1:18890
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):  # `python benchmarks/pyfloor_app.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from extender.api.wire import ExtenderArgs, ExtenderFilterResult, Priorities  # noqa: E402
from extender.engine import candidate_names  # noqa: E402
from extender.logs import setup_logging  # noqa: E402
from extender.server.app import create_app  # noqa: E402
from extender.server.effects import DiscardEvents  # noqa: E402
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


class FloorApplication(ExtenderApplication):
    """ExtenderApplication's gunicorn configuration serving FloorVerbs, ready at once."""

    def load(self):  # inside the gunicorn worker, like the real build()
        tune_collector()
        store = ClusterStore(Reservations(self.options.tentative_ttl, self.options.committed_ttl))
        verbs = FloorVerbs(store, _NoBinder(), DiscardEvents())
        return create_app(verbs, ready=lambda: True, max_body=self.options.max_body)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--listen", default="127.0.0.1:18890")
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args(argv)
    setup_logging(args.log_level)
    FloorApplication(ServeOptions(listen=args.listen, events=False)).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
