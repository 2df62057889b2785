"""The machine lock `make test`'s workers share (tests/parallel.py): a test marked `alone` runs with
no other test beside it, and one waiting to run alone is not starved by tests that keep starting."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

import parallel
from parallel import MachineLock, unit_of_nodeid


def _holder(path: Path, alone: bool, log: list[str], name: str, hold: float, started: threading.Event) -> None:
    lock = MachineLock(path)
    lock.acquire(alone=alone)
    log.append(f"{name}+")
    started.set()
    time.sleep(hold)
    log.append(f"{name}-")
    lock.release()


def test_tests_beside_each_other_share_and_an_alone_test_waits_for_them(tmp_path: Path) -> None:
    path = tmp_path / "machine.lock"
    log: list[str] = []
    a, b, c = threading.Event(), threading.Event(), threading.Event()
    first = threading.Thread(target=_holder, args=(path, False, log, "a", 0.3, a))
    second = threading.Thread(target=_holder, args=(path, False, log, "b", 0.3, b))
    first.start(), second.start()
    assert a.wait(2) and b.wait(2), "two shared holders run at once"
    alone = threading.Thread(target=_holder, args=(path, True, log, "alone", 0.1, c))
    alone.start()
    for thread in (first, second, alone):
        thread.join(5)
    assert log.index("alone+") > max(log.index("a-"), log.index("b-")), log


def test_a_test_waiting_to_run_alone_goes_before_tests_that_start_later(tmp_path: Path) -> None:
    """Writer first: once the alone test waits, a test that asks after it waits behind it."""
    path = tmp_path / "machine.lock"
    log: list[str] = []
    events = [threading.Event() for _ in range(3)]
    running = threading.Thread(target=_holder, args=(path, False, log, "running", 0.5, events[0]))
    running.start()
    assert events[0].wait(2)
    alone = threading.Thread(target=_holder, args=(path, True, log, "alone", 0.2, events[1]))
    alone.start()
    time.sleep(0.1)  # the alone test is waiting now
    later = threading.Thread(target=_holder, args=(path, False, log, "later", 0.0, events[2]))
    later.start()
    for thread in (running, alone, later):
        thread.join(5)
    assert log.index("running-") < log.index("alone+") < log.index("alone-") < log.index("later+"), log


def test_a_module_is_a_unit_and_the_real_node_package_is_one() -> None:
    assert unit_of_nodeid("tests/e2e/test_drain.py::test_x[a]") == "tests/e2e/test_drain.py"
    assert unit_of_nodeid("tests/realnode/test_deploy_on_real_node.py::test_y") == "tests/realnode"
    assert unit_of_nodeid("tests/realnode/test_chart_on_real_node.py::test_z") == "tests/realnode"


def test_a_timed_stretch_inside_a_test_waits_for_the_others_and_holds_them_off(tmp_path: Path) -> None:
    """machine_alone(): a test holding the lock shared takes it exclusive for a stretch, without
    deadlocking against another test that asks at the same moment, and shares it again after."""
    path = tmp_path / "machine.lock"
    log: list[str] = []

    def timed(name: str) -> None:
        lock = MachineLock(path)
        lock.acquire(alone=False)  # as the test protocol takes it
        try:
            with parallel.machine_alone(lock):
                log.append(f"{name}+")
                time.sleep(0.2)
                log.append(f"{name}-")
        finally:
            lock.release()

    threads = [threading.Thread(target=timed, args=(n,)) for n in ("x", "y")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    assert not any(t.is_alive() for t in threads), "deadlocked"
    assert log in (["x+", "x-", "y+", "y-"], ["y+", "y-", "x+", "x-"]), log


def test_an_idle_stretch_lets_an_alone_test_run(tmp_path: Path) -> None:
    """machine_idle(): while a test only waits, a test that must run alone is not held off by it."""
    path = tmp_path / "machine.lock"
    log: list[str] = []
    idle_started = threading.Event()

    def idle_test() -> None:
        lock = MachineLock(path)
        lock.acquire(alone=False)
        try:
            with parallel.machine_idle(lock):
                log.append("idle+")
                idle_started.set()
                time.sleep(0.5)
                log.append("idle-")
        finally:
            lock.release()

    idle = threading.Thread(target=idle_test)
    idle.start()
    assert idle_started.wait(2)
    alone = threading.Thread(target=_holder, args=(path, True, log, "alone", 0.1, threading.Event()))
    alone.start()
    for thread in (idle, alone):
        thread.join(5)
    assert log.index("alone-") < log.index("idle-"), log


def test_the_two_phases_results_are_one_record_and_a_failure_in_either_stays() -> None:
    from scenario_report import merged

    first = {
        "kubernetes": ["v1.37.2"],
        "exitstatus": 0,
        "seconds": 100.0,
        "tests": {"tests/e2e/test_a.py::t": "passed"},
        "scenarios": [{"name": "t"}],
    }
    second = {
        "kubernetes": ["v1.37.2"],
        "kube_version_requested": "",
        "exitstatus": 1,
        "seconds": 500.0,
        "tests": {"tests/e2e/test_b.py::u": "failed", "tests/e2e/test_c.py::v": "passed"},
        "counts": {},
        "scenarios": [{"name": "u"}],
    }
    record = merged(first, second)
    assert record["counts"] == {"passed": 2, "failed": 1, "error": 0, "skipped": 0}
    assert record["exitstatus"] == 1 and record["seconds"] == 600.0 and record["kubernetes"] == ["v1.37.2"]
    assert [s["name"] for s in record["scenarios"]] == ["t", "u"]
    assert merged({**first, "exitstatus": 1}, {**second, "exitstatus": 5})["exitstatus"] == 1
    assert merged({**first, "exitstatus": 5}, {**second, "exitstatus": 0})["exitstatus"] == 0


class _Item:
    """What keeps_the_machine reads of a test: its node id and whether it is marked alone."""

    def __init__(self, nodeid: str, alone: bool) -> None:
        self.nodeid, self.alone = nodeid, alone

    def get_closest_marker(self, name: str) -> object | None:
        return object() if name == "alone" and self.alone else None


@pytest.mark.parametrize(
    ("item", "nextitem", "keeps"),
    [
        pytest.param(("m.py::a", True), ("m.py::b", True), True, id="next alone test of the same module"),
        pytest.param(("m.py::a", True), ("n.py::b", True), False, id="next alone test of another module"),
        pytest.param(("m.py::a", True), ("m.py::b", False), False, id="next test of the module not alone"),
        pytest.param(("m.py::a", False), ("m.py::b", True), False, id="a shared test holds nothing exclusive"),
        pytest.param(("m.py::a", True), None, False, id="the worker's last test"),
        pytest.param(
            ("tests/realnode/a.py::x", True), ("tests/realnode/b.py::y", True), True, id="the real node is one unit"
        ),
    ],
)
def test_an_alone_unit_keeps_the_machine_between_its_alone_tests(item, nextitem, keeps) -> None:  # noqa: ANN001
    after = _Item(*nextitem) if nextitem else None
    assert parallel.keeps_the_machine(_Item(*item), after) is keeps
