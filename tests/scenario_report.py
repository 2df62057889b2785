"""The e2e run's closing table and its E2E_RESULTS file, built from test reports.

A scenario fills in its counters in the process that runs it; with pytest-xdist that is a worker,
while the table and the results file are written by the controller. So the counters travel on the
test's teardown report (`user_properties`, which xdist carries to the controller), and this plugin,
loaded by tests/conftest.py in every process, reads them back from the reports: the same code path
serially and in parallel, and the closing table never depends on which process ran what.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

SCENARIO_KEY = "e2e-scenario"
KUBERNETES_KEY = "e2e-kubernetes"

# Filled on the process that reports (the controller under xdist, the only process otherwise).
SCENARIOS: dict[str, dict] = {}
KUBERNETES: list[str] = []
STARTED = time.monotonic()


def is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def plain_nodeid(nodeid: str) -> str:
    """The test's id without the `@group` suffix pytest-xdist's loadgroup adds to it."""
    head, sep, _ = nodeid.rpartition("@")
    return head if sep and "::" in head else nodeid


def attach(report: pytest.TestReport, scenario: dict | None, kubernetes: list[str]) -> None:
    """On the worker: the scenario's counters and the run's API server versions onto the report."""
    if scenario is not None:
        report.user_properties.append((SCENARIO_KEY, scenario))
    for version in kubernetes:
        report.user_properties.append((KUBERNETES_KEY, version))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    for key, value in report.user_properties:
        if key == SCENARIO_KEY:
            SCENARIOS[value["name"]] = value
        elif key == KUBERNETES_KEY and value not in KUBERNETES:
            KUBERNETES.append(value)


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:  # noqa: ANN001
    if not SCENARIOS or is_worker(config):
        return
    tr = terminalreporter
    tr.section("e2e scenario summary")
    tr.write_line(
        f"{'scenario':<58} {'kubernetes':<11} {'reps':>5} {'placed':>7} {'pending':>8} {'violations':>10} {'wall s':>8}"
    )
    for result in SCENARIOS.values():
        wall = f"{result['wall_time']:.1f}" if result.get("wall_time") is not None else "-"
        kube = result.get("kubernetes") or (KUBERNETES[-1] if KUBERNETES else "-")
        tr.write_line(
            f"{result['name']:<58} {kube:<11} {result['repetitions']:>5} {result['pods_placed']:>7} "
            f"{result['pending']:>8} {result['violations']:>10} {wall:>8}"
        )
        if result.get("note"):
            tr.write_line(f"    {result['note']}")


def counts_of(outcomes: dict[str, str]) -> dict[str, int]:
    return {s: sum(1 for v in outcomes.values() if v == s) for s in ("passed", "failed", "error", "skipped")}


def merged(earlier: dict, later: dict) -> dict:
    """make test's second phase (hack/run_phases.py) into the first's record: one for both runs.
    A failure in either stays; pytest's 5 (nothing collected) in a phase is none."""
    outcomes = {**earlier.get("tests", {}), **later["tests"]}
    worse = [code for code in (earlier.get("exitstatus", 0), later["exitstatus"]) if code not in (0, 5)]
    return {
        **later,
        "kubernetes": list(dict.fromkeys([*earlier.get("kubernetes", []), *later["kubernetes"]])),
        "exitstatus": max(worse, default=0),
        "seconds": round(earlier.get("seconds", 0) + later["seconds"], 1),
        "counts": counts_of(outcomes),
        "tests": outcomes,
        "scenarios": [*earlier.get("scenarios", []), *later["scenarios"]],
    }


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """E2E_RESULTS=<file>: the e2e outcome as JSON (per test: passed/failed/error/skipped), for the
    version matrix (hack/matrix.py turns the files into the support table)."""
    target = os.environ.get("E2E_RESULTS")
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if not target or reporter is None or is_worker(session.config):
        return
    outcomes: dict[str, str] = {}
    for status in ("passed", "failed", "error", "skipped"):
        for report in reporter.stats.get(status, ()):
            nodeid = plain_nodeid(getattr(report, "nodeid", ""))
            if not nodeid.startswith("tests/e2e/"):
                continue
            # A failed teardown after a passed call still fails the test; "error" wins over "passed".
            if status != "passed" or nodeid not in outcomes:
                outcomes[nodeid] = status
    record = {
        "kubernetes": list(KUBERNETES),
        "kube_version_requested": os.environ.get("KUBE_VERSION", ""),
        "exitstatus": int(exitstatus),
        "seconds": round(time.monotonic() - STARTED, 1),
        "counts": counts_of(outcomes),
        "tests": outcomes,
        "scenarios": list(SCENARIOS.values()),
    }
    if os.environ.get("E2E_RESULTS_MERGE") == "1" and Path(target).exists():
        record = merged(json.loads(Path(target).read_text()), record)
    Path(target).parent.mkdir(parents=True, exist_ok=True)
    Path(target).write_text(json.dumps(record, indent=2) + "\n")
