"""The mismatched-scheduler experiment: a newer kube-scheduler against an older kube-apiserver.

    make mismatch                                     # the newest scheduler vs the oldest API server
    python hack/mismatch.py --scheduler 1.37 --apiserver 1.34

Starts the e2e harness's control plane (extender/devcluster) from the API server's minor
(etcd, kube-apiserver, kube-controller-manager, kwok) with the other minor's kube-scheduler as
both schedulers, the extender included. Then records: does our scheduler take its leader lease
(kube-scheduler only campaigns once its informer caches have synced), does it bind a pod of
schedulerName placement-scheduler within --wait seconds, and what its log says about lists and
watches. Writes test-logs/mismatch/<scheduler>-on-<apiserver>.json (and the component logs
beside it) and prints the verdict. Exit status 0 whenever the experiment ran, whatever it found.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from extender.devcluster.api import ApiError  # noqa: E402
from extender.devcluster.cluster import (  # noqa: E402
    BINARIES,
    SCHEDULER_NAME,
    SYSTEM_NAMESPACE,
    LocalCluster,
    zoned_nodes,
)
from extender.kube.versions import SUPPORTED_MINORS  # noqa: E402

INTERESTING = re.compile(
    r"failed to list|Failed to watch|could not find the requested resource|Caches are synced|"
    r"Waiting for caches|successfully acquired lease|attempting to acquire leader lease|"
    r"Successfully bound|Unable to schedule|Error scheduling",
    re.I,
)


def bin_dir(minor: str) -> Path:
    out = subprocess.run(
        ["bash", str(REPO / "hack" / "kube" / "build.sh")],
        env={**_env(), "KUBE_VERSION": minor},
        stdout=subprocess.PIPE,
        text=True,
        check=True,
    )
    return Path(out.stdout.strip().splitlines()[-1])


def _env() -> dict[str, str]:
    import os

    env = dict(os.environ)
    env.pop("KUBE_BIN_DIR", None)
    return env


def mixed_bins(apiserver: Path, scheduler: Path, into: Path) -> Path:
    into.mkdir(parents=True, exist_ok=True)
    for name in (*BINARIES, "kubectl"):
        source = scheduler if name == "kube-scheduler" else apiserver
        (into / name).symlink_to(source / name)
    return into


def log_digest(text: str, limit: int = 12) -> list[str]:
    """The distinct interesting log lines, klog header and timestamps removed, most frequent first."""
    counts: dict[str, int] = {}
    for line in text.splitlines():
        if not INTERESTING.search(line):
            continue
        message = re.sub(r"^[IWEF]\d{4} [\d:.]+\s+\d+ [\w.]+:\d+\] ", "", line).strip()
        counts[message] = counts.get(message, 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: -kv[1])
    return [f"{n}x {m[:300]}" for m, n in ranked[:limit]]


def experiment(scheduler_minor: str, apiserver_minor: str, wait: float, out: Path) -> dict:
    api_bins, sched_bins = bin_dir(apiserver_minor), bin_dir(scheduler_minor)
    work = Path(tempfile.mkdtemp(prefix="placement-mismatch-"))
    bins = mixed_bins(api_bins, sched_bins, work / "bin")
    result: dict = {"scheduler": scheduler_minor, "apiserver": apiserver_minor}
    cluster = LocalCluster(work / "cluster", bin_dir=bins, extender_args=["--reservation-ttl=30"])
    started = time.monotonic()
    try:
        try:
            cluster.start()
            result["lease_acquired"] = True
        except (TimeoutError, RuntimeError) as err:
            result["lease_acquired"] = False
            result["start_error"] = str(err)
        result["startup_seconds"] = round(time.monotonic() - started, 1)
        assert cluster.admin is not None
        api = cluster.admin
        result["apiserver_version"] = api.get("/version")["gitVersion"]
        result["scheduler_version"] = subprocess.run(
            [str(bins / "kube-scheduler"), "--version"], capture_output=True, text=True
        ).stdout.strip()
        cluster.add_nodes(zoned_nodes({"zone-a": 1, "zone-b": 1}))
        namespace = cluster.namespace("mismatch")
        api.create(
            f"/api/v1/namespaces/{namespace}/pods",
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "probe"},
                "spec": {"schedulerName": "placement-scheduler", "containers": [{"name": "c", "image": "busybox"}]},
            },
        )
        deadline, node = time.monotonic() + wait, None
        while time.monotonic() < deadline and not node:
            try:
                node = api.get(f"/api/v1/namespaces/{namespace}/pods/probe")["spec"].get("nodeName")
            except ApiError:
                pass  # not created yet, or the API server is busy: ask again
            time.sleep(0.5)
        result["pod_bound_to"] = node
        result["waited_seconds"] = wait if not node else None
        scheduler_log = (cluster.log_dir / "placement-scheduler.log").read_text(errors="replace")
        result["scheduler_log"] = log_digest(scheduler_log)
        result["scheduler_alive"] = "placement-scheduler" in cluster.alive()
        try:
            lease = api.get(f"/apis/coordination.k8s.io/v1/namespaces/{SYSTEM_NAMESPACE}/leases/{SCHEDULER_NAME}")
        except ApiError:  # 404: never taken
            lease = {}
        result["lease_held_at_end"] = bool((lease.get("spec") or {}).get("holderIdentity"))
    finally:
        kept = cluster.keep_logs(out / f"{scheduler_minor}-on-{apiserver_minor}-logs")
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)
        result["logs"] = str(kept)
    result["syncs_and_schedules"] = bool(result.get("lease_acquired") and result.get("pod_bound_to"))
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scheduler", default=SUPPORTED_MINORS[0], choices=SUPPORTED_MINORS)
    parser.add_argument("--apiserver", default=SUPPORTED_MINORS[-1], choices=SUPPORTED_MINORS)
    parser.add_argument("--wait", type=float, default=60, help="seconds to wait for the pod to be bound")
    parser.add_argument("--out", type=Path, default=REPO / "test-logs" / "mismatch")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    result = experiment(args.scheduler, args.apiserver, args.wait, args.out)
    path = args.out / f"{args.scheduler}-on-{args.apiserver}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    verdict = "syncs and schedules" if result["syncs_and_schedules"] else "does NOT sync and schedule"
    print(f"\nkube-scheduler {args.scheduler} against kube-apiserver {args.apiserver}: {verdict}. ({path})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
