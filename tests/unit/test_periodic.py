"""The background loops' shared shape (server/periodic.py): a pass that raises is logged and the
loop goes on; every loop of the serving process is one."""

from __future__ import annotations

import logging
import threading

import pytest

from extender.server.deletion_costs import DeletionCostController
from extender.server.gate_lifter import GateLifter
from extender.server.nudge import PolicyNudger
from extender.server.periodic import PeriodicPass
from extender.server.remedies import RemedyWorker


class Flaky(PeriodicPass):
    name = "flaky"

    def __init__(self) -> None:
        self.interval = 0.01
        self.calls = 0
        self.second = threading.Event()

    def pass_once(self) -> None:
        self.calls += 1
        if self.calls == 1:
            raise RuntimeError("one pod's bad data")
        self.second.set()


def test_a_failed_pass_is_logged_and_the_next_one_runs(caplog: pytest.LogCaptureFixture) -> None:
    loop = Flaky()
    with caplog.at_level(logging.ERROR):
        loop.start()
        assert loop.second.wait(10), "the loop stopped after the pass that raised"
    assert any("flaky pass failed" in r.getMessage() and r.exc_info for r in caplog.records)


def test_guarded_pass_never_raises() -> None:
    Flaky().guarded_pass()


@pytest.mark.parametrize("loop", [GateLifter, PolicyNudger, RemedyWorker, DeletionCostController])
def test_every_background_loop_is_a_periodic_pass(loop: type) -> None:
    assert issubclass(loop, PeriodicPass) and loop.name and "pass_once" in vars(loop)
