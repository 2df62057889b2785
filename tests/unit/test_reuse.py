"""Prioritize's reuse of filter's decision (extender/server/reuse.py): `narrowed` answers every
candidate exactly as the decision did, whichever nodes prioritize is asked about."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from extender.api.policy import parse_spec
from extender.engine import evaluate
from extender.server.reuse import narrowed

from .test_properties import SETTINGS, Case, cases


def verdicts(decision) -> dict[str, tuple]:
    return {name: (v.outcome, v.rule, v.reason, v.score) for name, v in decision.verdicts.items()}


@SETTINGS
@given(cases(), st.randoms(use_true_random=False), st.sampled_from(["passed", "some", "all", "stranger"]))
def test_a_narrowed_decision_answers_each_candidate_as_the_decision_did(case: Case, rng, asked: str):
    """`passed` is what kube-scheduler sends (the nodes filter passed, in any order: the fast
    path), `some` a subset of the candidates, `all` every candidate, `stranger` one the decision
    never judged (no reuse: None)."""
    spec = parse_spec(case.policy, "property")
    names = [n.name for n in case.nodes]
    decision = evaluate(spec, case.pod, case.snapshot(), names)
    full = verdicts(decision)
    candidates = {
        "passed": decision.passed(),
        "some": rng.sample(names, rng.randint(1, len(names))),
        "all": list(names),
        "stranger": [*names[:1], "not-judged"],
    }[asked]
    rng.shuffle(candidates)
    again = narrowed(decision, candidates)
    if asked == "stranger":
        assert again is None
        return
    assert again is not None
    assert sorted(again.order) == sorted(candidates)
    assert verdicts(again) == {name: full[name] for name in candidates}
    assert set(again.passed()) == set(candidates) & set(decision.passed())
