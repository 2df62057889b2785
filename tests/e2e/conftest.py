"""Fixtures for end-to-end scenarios on a real local control plane.

Each test module gets its own control plane (about 5 s to start): pinned upstream etcd,
kube-apiserver, kube-controller-manager, the default kube-scheduler, our kube-scheduler running
config/scheduler-config.yaml, kwok and the extender. Assertions read the API server.

When a test fails, every component's log is copied to test-logs/<test>/ (the path is printed).
At the end of the run a table summarises each scenario: the Kubernetes version it ran on (the
API server's /version; KUBE_VERSION=1.34 picks the minor, see hack/kube/README.md), repetitions,
pods placed, violations, and the wall time of the scenarios that measure one. With
E2E_RESULTS=<file> the run also writes its outcome there as JSON (hack/matrix.py reads it). Both
are written by tests/scenario_report.py from the test reports, so they are whole under pytest-xdist.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from extender.devcluster.cluster import LocalCluster
from extender.devcluster.processes import SigtermAsInterrupt
from scenario_report import attach

ROOT = Path(__file__).resolve().parents[2]
LOG_DIR = ROOT / "test-logs"


@dataclass
class ScenarioResult:
    name: str
    kubernetes: str = ""
    repetitions: int = 0
    pods_placed: int = 0
    violations: int = 0
    pending: int = 0
    note: str = ""
    # Seconds from the scenario's first create to its last pod bound, when it measures one.
    wall_time: float | None = None


SUMMARY: dict[str, ScenarioResult] = {}
# The API server versions the run's control planes reported (one, unless something is off).
KUBERNETES: list[str] = []


@pytest.fixture
def scenario(request: pytest.FixtureRequest) -> ScenarioResult:
    """Counters a scenario fills in; printed in the run's closing summary."""
    name = request.node.name
    SUMMARY[name] = ScenarioResult(name, kubernetes=KUBERNETES[-1] if KUBERNETES else "")
    return SUMMARY[name]


def pytest_configure(config):  # noqa: ANN001
    # A SIGTERM (CI's timeout, `timeout`, `kill`) ends the run the way Ctrl-C does: through the
    # fixtures' teardown, which stops every control plane, instead of leaving them running.
    SigtermAsInterrupt().install()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):  # noqa: ANN001
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)
    if report.when == "teardown":  # the counters are final: carried to whoever prints the table
        result = SUMMARY.get(item.name)
        attach(report, vars(result) if result is not None else None, KUBERNETES)


def _failed(request: pytest.FixtureRequest) -> bool:
    for node in (request.node, *getattr(request.node, "items", ())):
        for when in ("setup", "call"):
            report = getattr(node, f"rep_{when}", None)
            if report is not None and report.failed:
                return True
    return request.session.testsfailed > 0


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest) -> Iterator[LocalCluster]:
    failures_before = request.session.testsfailed
    os.environ.setdefault("EXTENDER_LOG_LEVEL", "debug")  # the opt-in scenario reads per-pod lines
    for attempt in (1, 2):
        # A module may ask for its own control plane's options (CLUSTER_OPTIONS: LocalCluster's
        # keyword arguments), e.g. short leader-election timing for a failover scenario.
        options = dict(getattr(request.module, "CLUSTER_OPTIONS", {}))
        local = LocalCluster(extender_args=["--reservation-ttl=30", *options.pop("extender_args", ())], **options)
        try:
            local.start()
            break
        except BaseException as err:
            kept = local.keep_logs(LOG_DIR / _safe(request.node.name))
            local.stop()
            print(f"\ncontrol plane failed to start; component logs kept in {kept}")
            # A port taken between choosing and binding it is the machine's doing, not ours: once more.
            if attempt == 1 and "address already in use" in str(err):
                continue
            raise
    assert local.admin is not None
    version = local.admin.get("/version")["gitVersion"]
    if version not in KUBERNETES:
        KUBERNETES.append(version)
    yield local
    if request.session.testsfailed > failures_before:
        kept = local.keep_logs(LOG_DIR / _safe(request.node.name))
        print(f"\ncomponent logs kept in {kept}")
    local.stop()
    leftovers = local.alive()
    assert not leftovers, f"processes outlived teardown: {leftovers}"


def _safe(name: str) -> str:
    """A log folder's name; the minor's too when one is asked for (hack/matrix.py runs several at
    once, and their logs of one module must not land in one folder)."""
    minor = os.environ.get("KUBE_VERSION", "")
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:120] + (f"-{minor}" if minor else "")
