"""The placement engine: pure functions over plain data, no I/O.

`evaluate(spec, pod, snapshot, candidates)` decides; the few functions beside it read a decision
(its broken rules, a node's zone, the pod's zone order, the domains some nodes share), break ties,
judge a preemption, and give a spread's eligible domains to a caller without a decision (the
checker). This package's exports are the whole interface: nothing outside the engine imports
its modules. The HTTP server, the watch cache and the CLI are thin layers around it.
"""

from .context import spread_eligibility
from .eligibility import NO_CONSTRAINTS, NodeConstraints, NodeView, Requirement, Toleration
from .evaluate import (
    broken_rules,
    candidate_names,
    evaluate,
    hard_rule_reason,
    ordinal_pod_zones,
    passed_domains,
    shared_domains,
    uncached_nodes,
    zone_of,
    zone_order,
)
from .lookahead import Certainty
from .model import (
    Decision,
    GroupCounts,
    NodeInfo,
    Outcome,
    Placement,
    PlacementKind,
    PodRequest,
    RecordedRotation,
    Snapshot,
    Taint,
    Verdict,
)
from .plan import Fit, group_fits, nodes_to_add, ordinal_pods_to_try, without_nodes
from .preemption import zone_left_empty
from .remedy import Remedy, remedies
from .resources import node_allocatable, pod_requests, resource_shortfall, sum_requests
from .rules import Exactness, Failure, Gap, ImpliedFragment, Mirror, NativeFragment, imply_rules, translate_rules
from .scale_down import deletion_costs, deletion_order
from .scoring import MAX_SCORE, break_tie
from .topology import Topology
from .zone_order import ZoneOrder, first_rotation, zone_order_for

__all__ = [
    "MAX_SCORE",
    "NO_CONSTRAINTS",
    "NodeConstraints",
    "NodeView",
    "Requirement",
    "Taint",
    "Toleration",
    "Certainty",
    "Decision",
    "Exactness",
    "Failure",
    "Gap",
    "GroupCounts",
    "ImpliedFragment",
    "Mirror",
    "NativeFragment",
    "NodeInfo",
    "Outcome",
    "Placement",
    "PlacementKind",
    "PodRequest",
    "RecordedRotation",
    "Snapshot",
    "Topology",
    "Verdict",
    "ZoneOrder",
    "break_tie",
    "broken_rules",
    "candidate_names",
    "evaluate",
    "hard_rule_reason",
    "Fit",
    "Remedy",
    "group_fits",
    "nodes_to_add",
    "ordinal_pods_to_try",
    "remedies",
    "node_allocatable",
    "pod_requests",
    "resource_shortfall",
    "sum_requests",
    "deletion_costs",
    "deletion_order",
    "without_nodes",
    "imply_rules",
    "ordinal_pod_zones",
    "passed_domains",
    "shared_domains",
    "uncached_nodes",
    "spread_eligibility",
    "first_rotation",
    "zone_order_for",
    "translate_rules",
    "zone_left_empty",
    "zone_of",
    "zone_order",
]
