"""A harness killed mid-run (SIGKILL of its whole process group, as a CI job's end or a lost
terminal does) leaves nothing that breaks the next run: the next start restores what the crashed
one recorded (its node's processes, its control plane's orphans and work directory, containers and their shims,
mounts, the bridge, iptables, sysctls, cgroups), comes up, runs a pod, and on stop the host is
as it was before the crashed run.

It runs before the session's node (the machine has one real-node slot), with its own zone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from extender.devcluster.cluster import REPO, LocalCluster

from .crash_pod import run_pod
from .harness import STATE_FILE, RealNode, compare, restore_by_hand, snapshot
from .installs import figure

pytestmark = pytest.mark.e2e

# The crashed run: a node, a pod running on it, then it waits to be killed.
CRASHING = """
import sys, time
from extender.devcluster.cluster import LocalCluster
from tests.realnode.harness import RealNode
cluster = LocalCluster(real_node=RealNode(zone="zone-crash"))
cluster.start()
from tests.realnode.crash_pod import run_pod
run_pod(cluster, "before-the-crash")
print("up", flush=True)
time.sleep(3600)
"""


def test_a_harness_killed_mid_run_leaves_nothing_that_breaks_the_next_run(tmp_path) -> None:
    if STATE_FILE.exists():
        restore_by_hand()
    before = snapshot()
    crashed = subprocess.Popen(
        [sys.executable, "-c", CRASHING],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=open(tmp_path / "crashed-run.log", "wb"),  # noqa: SIM115 - the child's
        text=True,
        start_new_session=True,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
    )
    try:
        line = crashed.stdout.readline() if crashed.stdout else ""
        assert line.strip() == "up", (tmp_path / "crashed-run.log").read_text()[-3000:]
    finally:
        os.killpg(crashed.pid, signal.SIGKILL)
        crashed.wait()
    recorded = json.loads(STATE_FILE.read_text())
    left = {name: p["pid"] for name, p in recorded["processes"].items() if _alive(p["pid"])}
    assert any(n.startswith("control-plane") for n in left), left  # the orphans a crash leaves
    assert any(n in ("kubelet", "containerd") for n in left), left
    workdirs = [Path(p) for p in recorded["workdirs"]]
    assert workdirs and all(p.is_dir() for p in workdirs), recorded["workdirs"]  # its pki, etcd, kubeconfigs

    started = time.monotonic()
    cluster = LocalCluster(real_node=RealNode(zone="zone-after"))
    with cluster:
        figure("after a crashed harness: restore + control plane + node up (s)", time.monotonic() - started)
        assert not [name for name, pid in left.items() if _alive(pid)], "the crashed run's processes are gone"
        assert not [p for p in workdirs if p.exists()], "the crashed run's control plane workdir is gone"
        run_pod(cluster, "after-the-crash")
    differences = compare(before, snapshot())
    assert not differences, f"the host is not as it was before the crashed run: {differences}"
    assert not STATE_FILE.exists()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
