"""The release as docs/install/release.md gives it, run as written: in a clean clone of this
checkout, the maintainer's block (prepare, commit, tag, make release), then the platform team's
block (make release, the checksums, skopeo copy of the image and of the kube-scheduler mirror,
helm push of the chart) against the team's registry (registry.py). What the later real-node
modules install from is what that block pushed (conftest.py's `released`)."""

from __future__ import annotations

import os
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from extender.devcluster.cluster import REPO

from .installs import figure
from .registry import Registry

DOCS = REPO / "docs" / "install" / "release.md"
MAINTAINER = "maintainer-commands"
PLATFORM = "release-commands"
# the part of $REGISTRY after the host, as in the page's example (registry.example.com/platform)
NAMESPACE = "platform"


@dataclass(frozen=True)
class Released:
    registry: str  # $REGISTRY as the page sets it: <host:port>/platform
    version: str  # the tag's, v stripped
    extender_image: str  # $REGISTRY/placement-extender:<version>
    scheduler_image: str  # $REGISTRY/kube-scheduler:<tag deploy/ names>
    chart: str  # oci://$REGISTRY/charts/placement-scheduler
    client_env: dict[str, str]  # what helm and skopeo need to trust the registry (SSL_CERT_FILE)
    dist: Path  # the clone's dist/, as make release wrote it
    clone: Path
    log: str  # what the two blocks printed


def block(marker: str, page: Path = DOCS) -> str:
    """The ```sh block right after `<!-- marker: ... -->` on the page."""
    found = re.search(rf"<!-- {re.escape(marker)}:[^>]*-->\n```sh\n(.*?)```", page.read_text(), re.S)
    assert found, f"{page} has no `<!-- {marker}: ... -->` block"
    return found.group(1)


def _bash(script: str, cwd: Path, env: dict[str, str], timeout: float) -> str:
    run = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    output = f"$ {script}\n{run.stdout}{run.stderr}"
    assert run.returncode == 0, output[-6000:]
    return output


def release(registry: Registry, scheduler_archive: Path, helm: Path, workdir: Path) -> Released:
    clone = workdir / "clone"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True, capture_output=True)
    who = {"GIT_AUTHOR_NAME": "Release Test", "GIT_AUTHOR_EMAIL": "release@example.com"}
    who |= {"GIT_COMMITTER_NAME": "Release Test", "GIT_COMMITTER_EMAIL": "release@example.com"}
    # The machine's environment (its package index settings reach `make venv`'s pip), the
    # maintainer's editor a no-op (the release notes are the test's non-concern), the pinned helm
    # first on PATH as a team's own helm would be; nothing the commands name is set here.
    env = dict(os.environ, EDITOR="true", PATH=f"{helm.parent}:{os.environ['PATH']}", **who)
    for name in ("VIRTUAL_ENV", "KUBE_VERSION", "DEV", "REGISTRY", "SCHEDULER_SOURCE", "VERSION"):
        env.pop(name, None)
    started = time.monotonic()
    log = _bash(block(MAINTAINER), clone, env, timeout=3600)
    figure("release: maintainer's block, clone to make release (s)", time.monotonic() - started)
    env |= registry_env(registry)
    env["REGISTRY"] = f"{registry.host}/{NAMESPACE}"
    # No upstream registry is reachable here: the mirror copies the pinned kube-scheduler built
    # from source instead, through the one variable the page offers for that.
    env["SCHEDULER_SOURCE"] = f"oci-archive:{scheduler_archive}"
    started = time.monotonic()
    log += _bash(block(PLATFORM), clone, env, timeout=3600)
    figure("release: platform team's block, make release to helm push (s)", time.monotonic() - started)
    version = subprocess.run(
        ["git", "-C", str(clone), "describe", "--tags", "--exact-match"], check=True, capture_output=True, text=True
    ).stdout.strip()[1:]
    scheduler_tag = re.search(r"docker://\$REGISTRY/kube-scheduler:(\S+)", block(PLATFORM))
    assert scheduler_tag, "the page's block mirrors no kube-scheduler"
    return Released(
        registry=env["REGISTRY"],
        version=version,
        extender_image=f"{env['REGISTRY']}/placement-extender:{version}",
        scheduler_image=f"{env['REGISTRY']}/kube-scheduler:{scheduler_tag.group(1)}",
        chart=f"oci://{env['REGISTRY']}/charts/placement-scheduler",
        client_env=registry_env(registry),
        dist=clone / "dist",
        clone=clone,
        log=log,
    )


def registry_env(registry: Registry) -> dict[str, str]:
    return {"SSL_CERT_FILE": str(registry.bundle), "REQUESTS_CA_BUNDLE": str(registry.bundle)}
