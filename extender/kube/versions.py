"""The Kubernetes minors the extender is tested against: the one source of truth.

hack/kube/build.sh reads SUPPORTED_MINORS (the line below, as text) to know which minors it can
build (hack/kube/v<minor>/ pins each) and which is the default (the first, the newest);
`make test-matrix` and .ci/run run the e2e scenarios on each; tests/unit/test_kube_versions.py
checks that deploy/ has a kube-scheduler overlay per minor with the tag hack/kube pins; and
`serve` warns at start when the API server's minor is not in it.
"""

from __future__ import annotations

import logging
import re
from typing import Any

log = logging.getLogger(__name__)

# Newest first. Keep on one line: hack/kube/build.sh parses it.
SUPPORTED_MINORS = ("1.37", "1.36", "1.35", "1.34")


def minor_of(git_version: str) -> str | None:
    """'v1.34.4' / 'v1.34.4-eks-1a2b3c' / 'v1.34.4+k3s1' -> '1.34' (None if unparsable)."""
    m = re.match(r"v?(\d+)\.(\d+)", git_version or "")
    return f"{m.group(1)}.{m.group(2)}" if m else None


def support_note(git_version: str) -> str | None:
    """None when the API server's minor was tested; else a one-line warning to log."""
    minor = minor_of(git_version)
    if minor in SUPPORTED_MINORS:
        return None
    tested = ", ".join(SUPPORTED_MINORS)
    return (
        f"the API server reports Kubernetes {git_version or '(no version)'}, outside the tested minors "
        f"({tested}); run the kube-scheduler of the cluster's minor (never newer than the API server), "
        "see docs/install/versions.md"
    )


def log_api_server_version(api: Any) -> str | None:
    """At start: GET /version, log it, and warn when its minor is outside SUPPORTED_MINORS.
    Never fatal: an API server that does not answer here will show up in the watch anyway."""
    try:
        info = api.call("GET", "/version", timeout=10)
        version = str((info or {}).get("gitVersion", ""))
    except Exception as err:  # noqa: BLE001 - a log line, whatever went wrong
        log.warning("could not read the API server's version (GET /version): %s", err)
        return None
    log.info("API server: Kubernetes %s (tested minors: %s)", version, ", ".join(SUPPORTED_MINORS))
    note = support_note(version)
    if note:
        log.warning(note)
    return version
