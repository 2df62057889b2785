"""Each verb answers a pod whose policy is valid at every bound within the decision deadline plus
LOCK_HOLD_MARGIN, over the HTTP fuzzer's fixture cluster (tests/unit/test_fuzz_http.py).

A module of its own because it measures wall-clock time and so runs alone under `make test`'s
workers (tests/parallel.py); the fuzzers beside it need not.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extender.server.app import create_app
from extreme_policies import extreme_policies

from .test_fuzz_http import FIXTURE_ZONES, fixture_verbs
from builders import pod

pytestmark = pytest.mark.alone("bounds each verb's answer by the decision deadline, in wall-clock seconds")

EXTREME_HOLDS: list[tuple[float, str]] = []
EXTREME_VERBS = fixture_verbs()
EXTREME_VERBS.store.lock.observe = lambda seconds, holder: EXTREME_HOLDS.append((seconds, holder))
EXTREME_CLIENT = create_app(EXTREME_VERBS).test_client()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(policy=extreme_policies(FIXTURE_ZONES), n=st.integers(0, 10**9))
def test_valid_extreme_policies_are_answered_within_the_deadline(policy: dict, n: int) -> None:
    """Each verb for a pod with a valid policy at its bounds: a 200, an answer that is no policy
    error, in at most the decision deadline plus LOCK_HOLD_MARGIN, and no hold of the cache's
    lock longer than that (the remedy search included: the pod's is computed each time)."""
    import time as clock

    from extender.limits import DEFAULT_DECISION_DEADLINE, LOCK_HOLD_MARGIN

    bound = DEFAULT_DECISION_DEADLINE + LOCK_HOLD_MARGIN
    verbs = EXTREME_VERBS
    verbs.remedies.last_computed = -1e9
    EXTREME_HOLDS.clear()
    obj = pod(f"crdb-{n % 3}", sts="crdb", policy=policy, uid=f"extreme-{n}")
    names = [f"node-{z}{i}" for z in "abc" for i in (1, 2)]
    verbs.store.apply("pods", "ADDED", obj)  # as the watch shows it
    meta = obj["metadata"]
    for verb, body in (
        ("/filter", {"Pod": obj, "NodeNames": names}),
        ("/prioritize", {"Pod": obj, "NodeNames": names}),
        ("/bind", {"PodName": meta["name"], "PodNamespace": "db", "PodUID": meta["uid"], "Node": names[0]}),
    ):
        started = clock.perf_counter()
        response = EXTREME_CLIENT.post(verb, data=json.dumps(body), content_type="application/json")
        took = clock.perf_counter() - started
        assert response.status_code == 200, response.get_data(as_text=True)
        answer = json.loads(response.get_data())
        error = (answer.get("Error") or "") if isinstance(answer, dict) else ""  # prioritize answers a list
        assert "invalid placement policy" not in error, answer
        assert took <= bound, f"{verb} took {took:.3f}s > {bound}s"
    verbs.store.apply("pods", "DELETED", obj)
    longest = max(EXTREME_HOLDS, default=(0.0, "-"))
    assert longest[0] <= bound, f"{longest[1]} held the cache {longest[0]:.3f}s > {bound}s"
