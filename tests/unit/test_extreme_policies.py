"""No tenant's valid policy can hold the cache long: filter, with the remedy search a
pod no node takes triggers, holds the store's lock at most the decision deadline plus
LOCK_HOLD_MARGIN, for valid policies at their bounds (tests/extreme_policies.py), on the HTTP
benchmark's 1,000-node cluster with 10,000 cached pods (benchmarks/synthetic.py).

Before the bounds, one valid policy (zones.allowed listing 5,000 zones, none with nodes) held it
26.7 s: the remedy search decided again once per allowed zone without a node.
"""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import HealthCheck, given, settings

from benchmarks import synthetic
from extender.api.policy import INLINE_POLICY_ANNOTATION, POLICY_REF_ANNOTATION
from extender.api.wire import ExtenderArgs
from extender.limits import DEFAULT_DECISION_DEADLINE, LOCK_HOLD_MARGIN
from extender.server.verbs import Verbs
from extender.state.store import ClusterStore
from extreme_policies import extreme_policies

from fakes import RecordedEvents

pytestmark = pytest.mark.alone("bounds how long a decision holds the cache's lock, in wall-clock seconds")

CLUSTER = synthetic.cluster(1000, 10_000, rich=False, policy=synthetic.FULL_POLICY)
STORE = ClusterStore()
CLUSTER.load(STORE)
NAMES = CLUSTER.node_names()
HOLDS: list[tuple[float, str]] = []
VERBS = Verbs(STORE, binder=None, events=RecordedEvents())  # type: ignore[arg-type]
STORE.lock.observe = lambda seconds, holder: HOLDS.append((seconds, holder))
BOUND = DEFAULT_DECISION_DEADLINE + LOCK_HOLD_MARGIN


def _pod(policy: dict, n: int) -> dict:
    pod = copy.deepcopy(CLUSTER.pending)
    meta = pod["metadata"]
    meta["uid"] = f"extreme-{n}"
    annotations = meta.setdefault("annotations", {})
    annotations.pop(POLICY_REF_ANNOTATION, None)
    annotations[INLINE_POLICY_ANNOTATION] = json.dumps(policy)
    return pod


COUNTER = [0]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])  # ~1 s each, alone
@given(policy=extreme_policies(list(synthetic.ZONES)))
def test_filter_with_its_remedy_holds_the_cache_within_the_deadline_and_margin(policy: dict) -> None:
    COUNTER[0] += 1
    VERBS.remedies.last_computed = -1e9  # this pod's remedy is computed now, not deferred
    HOLDS.clear()
    args = ExtenderArgs.model_validate({"Pod": _pod(policy, COUNTER[0]), "NodeNames": NAMES})
    result = VERBS.filter(args)
    assert result.Error == "" or "invalid" not in result.Error, result.Error  # every policy here is valid
    longest = max(HOLDS, default=(0.0, "-"))
    assert longest[0] <= BOUND, f"{longest[1]} held the cache {longest[0]:.3f}s > {BOUND}s"
