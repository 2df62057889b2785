"""How `make test` shares two cores between test modules (pytest-xdist, `-n` workers).

Most of an e2e scenario's time is waiting: on kube-scheduler, on controllers, on watches. Several
modules at once use the machine that one leaves idle. Three rules keep that safe, and
`--machine-phase` splits the run in two (hack/run_phases.py says why):

- **A module is one unit of work** (ModuleScheduling below): its tests run in order on one
  worker, beside its own control plane, as they do serially. The real-node package is one unit: the
  machine has one real node, and its modules run in MODULE_ORDER (tests/realnode/conftest.py).
- **A test that measures time runs alone.** `@pytest.mark.alone("why")` (or a module's
  `pytestmark`) takes the machine for the test: an exclusive lock every other test holds shared
  (MachineLock), so it starts when the tests running beside it have ended, and none starts until
  it is done. Its figures are then what they are serially. A test idle for most of its time
  takes the machine only for its timed stretch, `with machine_alone():`, and a stretch that only
  waits holds nothing, `with machine_idle():`, so an alone test need not wait for it.
  tests/unit/test_test_layout.py holds that every module comparing wall-clock times does one or
  the other.
- **Alone first, then longest first.** The units with a test that runs alone (or uses
  machine_alone) go first, and within them those tests first: an alone test waits for every test
  running beside it to end, and at the start little is running, nothing long and idle. Then the rest
  in the order of their last measured time
  (tests/module_seconds.json, longest first; a module not measured yet counts as long), so the run does not end
  with one worker busy on a long module and the other idle. A wrong figure costs time, never a
  result. Each run writes its own measure to test-logs/module-seconds.json; copy it over
  tests/module_seconds.json when modules change a lot.

Serially (no `-n`) none of this does anything but the order, unless PLACEMENT_TEST_LOCK names a
lock that other runs share (hack/matrix.py's older minors, side by side).
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
MODULE_SECONDS_FILE = TESTS / "module_seconds.json"
MEASURED_FILE = TESTS.parent / "test-logs" / "module-seconds.json"
REALNODE_UNIT = "tests/realnode"
UNMEASURED_SECONDS = 600.0  # a new module counts as long: handed out early, never the tail


def unit_of_nodeid(nodeid: str) -> str:
    """The unit of work a test belongs to: its module, or the whole real-node package."""
    path = nodeid.split("::", 1)[0]
    return REALNODE_UNIT if path.startswith(REALNODE_UNIT + "/") else path


def unit_of(item: pytest.Item) -> str:
    return unit_of_nodeid(item.nodeid)


def module_seconds() -> dict[str, float]:
    try:
        return {str(k): float(v) for k, v in json.loads(MODULE_SECONDS_FILE.read_text()).items()}
    except (OSError, ValueError):
        return {}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--machine-phase",
        choices=("all", "alone", "shared"),
        default="all",
        help="all: every test; alone: the units with a test that runs alone (or a timed stretch, "
        "machine_alone) and the unit tests; shared: the others (make test runs alone, then shared)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "alone(reason): the test measures time, so it runs with no other test beside it")


def _alone(item: pytest.Item) -> bool:
    return item.get_closest_marker("alone") is not None


@pytest.hookimpl(trylast=True)  # after tests/realnode/conftest.py put its modules in their order
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    seconds = module_seconds()
    first_seen: dict[str, int] = {}
    alone_first: set[str] = set()
    position = {id(item): index for index, item in enumerate(items)}
    for index, item in enumerate(items):
        unit = unit_of(item)
        first_seen.setdefault(unit, index)
        if _alone(item) or getattr(getattr(item, "module", None), "machine_alone", None) is not None:
            alone_first.add(unit)

    def order(item: pytest.Item) -> tuple[bool, float, int, bool, int]:
        unit = unit_of(item)
        return (
            unit not in alone_first,
            -seconds.get(unit, UNMEASURED_SECONDS),
            first_seen[unit],
            not _alone(item),
            position[id(item)],
        )

    # The units with a test that runs alone (or a stretch of one, machine_alone) first, while little
    # is running for it to wait on; then the longest first. Within a unit, its alone tests first
    # (in their order), then the rest in collection order (the real node's MODULE_ORDER included).
    items.sort(key=order)
    phase = config.getoption("machine_phase")
    if phase != "all":
        # The first run: the units that time something, and the unit tests (no control plane, short)
        # to fill the gaps, the freeze's idle minutes above all.
        first = alone_first | {unit for unit in first_seen if unit.startswith("tests/unit/")}
        keep = [item for item in items if (unit_of(item) in first) == (phase == "alone")]
        dropped = [item for item in items if (unit_of(item) in first) != (phase == "alone")]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
        items[:] = keep


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist's: only called with `-n`
def pytest_xdist_make_scheduler(config: pytest.Config, log):  # noqa: ANN001, ANN201
    """Whole units to workers, in the collection's order (longest first, above)."""
    from xdist.scheduler import LoadScopeScheduling

    class ModuleScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of_nodeid(nodeid)

        def _reschedule(self, node) -> None:  # noqa: ANN001
            """The next unit only when the worker is on its unit's last test (it runs a test once it
            knows the next, so one must be there), not two tests ahead as xdist does: a worker with
            short units would otherwise take units out of the order above, a long idle one among
            them before the alone ones are done."""
            if node.shutting_down:
                return
            if not self.workqueue:
                node.shutdown()
                return
            if self._pending_of(self.assigned_work[node]) > 1:
                return
            self._assign_work_unit(node)

    config.option.loadscopereorder = False  # keep our order, not xdist's "most tests first"
    return ModuleScheduling(config, log)


# ------------------------------------------------------------------ the machine lock


def _lock_path(config: pytest.Config) -> Path | None:
    """One lock per run, or PLACEMENT_TEST_LOCK's, shared by several runs at once (hack/matrix.py
    runs the older minors side by side with it)."""
    shared = os.environ.get("PLACEMENT_TEST_LOCK")
    if shared:
        return Path(shared)
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None:
        return None  # serial, alone on the machine: nothing runs beside anything
    return Path(tempfile.gettempdir()) / f"placement-tests-{workerinput['testrunuid']}.lock"


class MachineLock:
    """A readers-writer lock across processes (flock on two files), writers first: a test that
    must run alone takes the turnstile, so no test starts beside it while it waits for those
    running to end; without the turnstile a busy worker could start test after test and starve
    it (flock favours no one)."""

    def __init__(self, path: Path) -> None:
        self.main = open(path, "a+")  # noqa: SIM115 (held for the process's life)
        self.turnstile = open(f"{path}.turnstile", "a+")  # noqa: SIM115

    def acquire(self, alone: bool) -> None:
        fcntl.flock(self.turnstile, fcntl.LOCK_EX)  # behind any test waiting to run alone
        try:
            fcntl.flock(self.main, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            fcntl.flock(self.turnstile, fcntl.LOCK_UN)

    def release(self) -> None:
        fcntl.flock(self.main, fcntl.LOCK_UN)


_LOCKS: dict[Path, MachineLock] = {}
_HELD: list[MachineLock] = []  # the lock the running test holds shared, if it does


@contextmanager
def machine_alone(lock: MachineLock | None = None) -> Iterator[None]:
    """Within a test: the machine to itself for a timed stretch only (a test that is otherwise idle
    for minutes, a freeze, need not keep every other worker waiting). Its shared hold is given up
    first, then taken exclusive, writers first, and shared again after. Serially, nothing."""
    lock = lock or (_HELD[0] if _HELD else None)
    if lock is None:
        yield
        return
    lock.release()  # before waiting: two tests asking at once must not each hold what the other waits on
    lock.acquire(alone=True)
    try:
        yield
    finally:
        lock.release()
        lock.acquire(alone=False)


@contextmanager
def machine_idle(lock: MachineLock | None = None) -> Iterator[None]:
    """Within a test: a stretch that only waits (a freeze running out its time) holds nothing, so a
    test that must run alone need not wait minutes for it; shared again after, behind any test
    waiting to run alone. Serially, nothing."""
    lock = lock or (_HELD[0] if _HELD else None)
    if lock is None:
        yield
        return
    lock.release()
    try:
        yield
    finally:
        lock.acquire(alone=False)


def keeps_the_machine(item: pytest.Item, nextitem: pytest.Item | None) -> bool:
    """Whether an alone test keeps its exclusive hold for the next test: only for the next alone test
    of its own unit. Taken again per test, each of a module's alone tests waited for the next gap in
    a test beside it that takes the machine in stretches (machine_alone): test_worker.py's 30 tests
    of 0-6 s spread over 163 s of `make test`'s first run, one per gap, about 8 s apart."""
    return _alone(item) and nextitem is not None and _alone(nextitem) and unit_of(nextitem) == unit_of(item)


_EXCLUSIVE: list[MachineLock] = []  # the lock an alone unit holds exclusive from one of its tests to the next


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Each test's whole protocol (its setup, so a control plane's start, its call, its teardown)
    holds the lock: shared, or exclusive for a test marked `alone`, and from one alone test of a
    unit to the next (keeps_the_machine). Per test, not per module, otherwise: an alone test waits
    only for the tests running beside it to end, and between two tests a module's control plane
    sits idle."""
    path = _lock_path(item.config)
    if path is None:
        yield
        return
    lock = _LOCKS.get(path) or _LOCKS.setdefault(path, MachineLock(path))
    alone = _alone(item)
    if not (alone and _EXCLUSIVE):  # an alone test after its unit's last one holds it already
        lock.acquire(alone=alone)
    if alone:
        _EXCLUSIVE[:] = [lock]
    else:
        _HELD.append(lock)
    try:
        yield
    finally:
        _HELD.clear()
        if not keeps_the_machine(item, nextitem):
            _EXCLUSIVE.clear()
            lock.release()


# ------------------------------------------------------------------ measuring the units

_SPENT: dict[str, float] = defaultdict(float)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """A unit's time: its tests' setup, call and teardown (a wait for the machine lock comes
    before the setup, so it is not counted)."""
    _SPENT[unit_of_nodeid(report.nodeid)] += report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    if hasattr(session.config, "workerinput") or not _SPENT:
        return
    MEASURED_FILE.parent.mkdir(parents=True, exist_ok=True)
    try:  # a run of some modules updates theirs and keeps the others'
        measured = json.loads(MEASURED_FILE.read_text())
    except (OSError, ValueError):
        measured = {}
    measured.update({unit: round(s, 1) for unit, s in _SPENT.items()})
    ordered = dict(sorted(measured.items(), key=lambda kv: -kv[1]))
    MEASURED_FILE.write_text(json.dumps(ordered, indent=1) + "\n")
