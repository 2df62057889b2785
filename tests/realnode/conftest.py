"""The real-node scenarios run in `make test` wherever a real node can run (Linux, root, the host
packages of hack/realnode/install.sh). Elsewhere (a laptop without root, macOS) they are skipped
with one line in the summary saying why and what to do, and the rest of the suite runs.

Under CI=true (or REALNODE=1) they are mandatory: a machine that cannot run them fails them, with
the same reason, so CI can never pass without them. REALNODE=0 skips them on a developer's
machine that could run them (not under CI=true)."""

from __future__ import annotations

import os

import pytest

from extender.devcluster.realnode import unavailable


def mandatory() -> bool:
    return os.environ.get("CI", "").lower() == "true" or os.environ.get("REALNODE") == "1"


def why_not() -> str | None:
    """Why the real-node scenarios do not run here, or None when they do."""
    if os.environ.get("REALNODE") == "0" and not mandatory():
        return "REALNODE=0: the real-node scenarios (deploy/ as real pods) were not run"
    return unavailable()


_REASON = why_not()
# Not collected where they cannot run (and are not mandatory): one summary line instead of a
# skip per test.
collect_ignore_glob = ["*"] if _REASON and not mandatory() else []


def pytest_terminal_summary(terminalreporter) -> None:  # noqa: ANN001 (pytest's hook)
    if _REASON and not mandatory():
        terminalreporter.write_line(f"SKIPPED real-node scenarios (tests/realnode) not run: {_REASON}", yellow=True)


@pytest.fixture(autouse=True, scope="session")
def _real_node_possible() -> None:
    if _REASON:  # only collected when mandatory
        pytest.fail(f"mandatory under CI=true / REALNODE=1, but {_REASON}", pytrace=False)
