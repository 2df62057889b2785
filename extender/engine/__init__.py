"""The placement engine: pure functions over plain data, no I/O.

`evaluate(spec, pod, snapshot, candidates)` is the whole interface; the HTTP server, the watch
cache and the CLI are thin layers around it.
"""

from .evaluate import evaluate
from .model import Decision, NodeInfo, Outcome, Placement, PlacementKind, PodRequest, Snapshot, Verdict
from .topology import Topology

__all__ = [
    "Decision",
    "NodeInfo",
    "Outcome",
    "Placement",
    "PlacementKind",
    "PodRequest",
    "Snapshot",
    "Topology",
    "Verdict",
    "evaluate",
]
