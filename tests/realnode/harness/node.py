"""The real node's lifecycle: its binaries and sandbox image, then prepare() (host state recorded,
the bridge and the guard), start() (containerd, kubelet, kube-proxy) and stop() (everything
restored)."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Protocol

import yaml

from extender.devcluster.api import Api, wait_for
from extender.devcluster.pki import PKI, ClientCert
from extender.devcluster.processes import Process, free_port

from .config import (
    BRIDGE,
    BRIDGE_IP,
    BUILD_SCRIPT,
    GUARD_FORWARD,
    GUARD_INPUT,
    IMAGE_BUILDER,
    KUBERNETES_SERVICE_IP,
    PAUSE_IMAGE,
    PAUSE_SOURCE,
    POD_RANGE,
    RUN_DIR,
    SERVICE_RANGE,
    STATE_FILE,
    NodePaths,
    RealNodeError,
    cni_config,
    containerd_config,
    guard_rules,
    kube_proxy_config,
    kubelet_config,
    plain_http_registry,
    range_clashes,
    tls_registry,
)
from .host import (
    HostState,
    cgroup_roots,
    ip_json,
    is_under,
    mountpoints,
    release_lock,
    run_command,
    take_lock,
)

log = logging.getLogger(__name__)


# ------------------------------------------------------------------ binaries and images


def node_binaries() -> Path:
    """kubelet and kube-proxy: $KUBE_NODE_BIN_DIR, else built (or reused) by hack/kube/build.sh --node."""
    result = subprocess.run(["bash", str(BUILD_SCRIPT), "--node"], stdout=subprocess.PIPE, text=True, check=False)
    if result.returncode != 0:
        raise RealNodeError(f"building kubelet and kube-proxy failed (exit {result.returncode}); see the output above")
    return Path(result.stdout.strip().splitlines()[-1])


def pause_binary() -> Path:
    """hack/realnode/pause built once per source and Go version, into the cache (it is the sandbox
    image's one file, so it must be static)."""
    go_version = run_command("go", "version").stdout.strip()
    digest = hashlib.sha256(go_version.encode())
    for name in ("go.mod", "main.go"):
        digest.update((PAUSE_SOURCE / name).read_bytes())
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "placement-extender" / "realnode"
    binary = cache / f"pause-{digest.hexdigest()[:12]}" / "pause"
    if binary.exists():
        return binary
    binary.parent.mkdir(parents=True, exist_ok=True)
    tmp = binary.with_name(f".pause.{os.getpid()}")
    result = subprocess.run(
        ["nice", "-n", "19", "go", "build", "-trimpath", "-ldflags=-s -w", "-o", str(tmp), "."],
        cwd=PAUSE_SOURCE,
        env=dict(os.environ, CGO_ENABLED="0"),
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise RealNodeError(f"go build of {PAUSE_SOURCE} failed: {result.stderr.strip()}")
    os.replace(tmp, binary)
    return binary


# ------------------------------------------------------------------ the node


HOST_TOOLS = ("containerd", "runc", "ctr", "iptables", "conntrack", "nft", "ip", "go")
CNI_PLUGINS = ("/usr/lib/cni/bridge", "/usr/lib/cni/host-local", "/usr/lib/cni/loopback")


def unavailable() -> str | None:
    """Why a real node cannot run on this machine (one line, with what to do), or None when it can.
    Checked before anything is touched, and by the tests to say so instead of failing."""
    if sys.platform != "linux":
        return f"a real node needs Linux (this is {sys.platform})"
    if os.geteuid() != 0:
        return "a real node needs root (containerd, kubelet, the bridge, iptables): run make test as root"
    missing = [t for t in HOST_TOOLS if not shutil.which(t)] + [p for p in CNI_PLUGINS if not Path(p).exists()]
    if missing:
        return f"a real node needs {', '.join(missing)}: run sudo hack/realnode/install.sh"
    if not Path("/sys/fs/cgroup/cgroup.controllers").exists() and not Path("/sys/fs/cgroup/memory").exists():
        return "a real node needs cgroups mounted at /sys/fs/cgroup"
    return None


class ControlPlane(Protocol):
    """What the node needs of the local control plane (cluster.LocalCluster)."""

    pki: PKI
    workdir: Path
    ports: dict[str, int]
    admin: Api | None

    def _write_kubeconfig(self, path: Path, client: ClientCert) -> Path: ...


class RealNode:
    """One real node: prepare() before the API server starts (host state recorded, the bridge,
    containerd), start() once it serves (kubelet, kube-proxy, Ready), stop() gives the host back."""

    def __init__(
        self,
        name: str = "realnode",
        zone: str = "zone-real",
        labels: dict[str, str] | None = None,
        run_dir: Path = RUN_DIR,
    ) -> None:
        self.name = name
        self.zone = zone
        self.labels = dict(labels or {})
        self.paths = NodePaths(run_dir)
        self.processes: list[Process] = []
        self.state: HostState | None = None
        self.bin_dir: Path | None = None
        self.log_dir = run_dir / "logs"
        self._lock: int | None = None
        self.timings: dict[str, float] = {}

    address = BRIDGE_IP
    service_range = SERVICE_RANGE
    serving_ips = (BRIDGE_IP, KUBERNETES_SERVICE_IP)

    # -------------------------------------------------------------- before the API server
    def prepare(self, log_dir: Path) -> None:
        reason = unavailable()
        if reason:
            raise RealNodeError(reason)
        self.log_dir = log_dir
        self._take_lock()
        leftover = HostState.load()
        if leftover is not None:
            log.warning("restoring the host state a crashed run (pid %s) left", leftover.owner_pid)
            problems = leftover.restore()
            if problems:
                raise RealNodeError(f"could not restore the state a crashed run left: {problems}")
        clashes = range_clashes(
            ip_json("addr", "show"), ip_json("route", "show", "table", "all"), [POD_RANGE, SERVICE_RANGE]
        )
        if BRIDGE in {link["ifname"] for link in ip_json("link", "show")}:
            clashes.append(f"a link named {BRIDGE} exists (not ours: no state file)")
        clashes += [f"{p} exists: another kubelet's pods run here" for p in cgroup_roots() if p.exists()]
        if clashes:
            raise RealNodeError("this host is not free for a real node: " + "; ".join(clashes))
        self.bin_dir = node_binaries()
        pause = pause_binary()
        stale = [p for p in mountpoints() if is_under(p, self.paths.run_dir)]
        if stale:
            raise RealNodeError(f"mounts under {self.paths.run_dir} with no state file: unmount them first: {stale}")
        self.state = HostState.record(self.paths.run_dir)
        self.state.save()  # from here on, a crash leaves enough to restore
        if self.paths.run_dir.exists():
            shutil.rmtree(self.paths.run_dir)
        for folder in (
            self.paths.cni_conf_dir,
            self.paths.cni_ipam_dir,
            self.paths.pod_logs,
            self.paths.opt,
            self.paths.static_pods,
        ):
            folder.mkdir(parents=True, exist_ok=True)
        run_command("ip", "link", "add", BRIDGE, "type", "bridge")
        run_command("ip", "addr", "add", f"{BRIDGE_IP}/{POD_RANGE.split('/')[1]}", "dev", BRIDGE)
        run_command("ip", "link", "set", BRIDGE, "up")
        # The service range is routed to the bridge, never by the default route: from the host, a
        # ClusterIP kube-proxy has not programmed yet (or no longer) must not leave the machine
        # (it reached whatever answers off it). Programmed, kube-proxy's DNAT reroutes it to a pod.
        # The route goes with the bridge.
        run_command("ip", "route", "add", SERVICE_RANGE, "dev", BRIDGE)
        (self.paths.cni_conf_dir / "10-placement-realnode.conflist").write_text(json.dumps(cni_config(self.paths)))
        self.paths.containerd_config.write_text(containerd_config(self.paths))
        started = time.monotonic()
        proc = self._spawn("containerd", ["containerd", f"--config={self.paths.containerd_config}"])
        wait_for(
            "containerd to serve",
            lambda: proc.check() or self.ctr("version", check=False).returncode == 0,
            30,
        )
        self.timings["containerd"] = time.monotonic() - started
        started = time.monotonic()
        self.load_image(
            self.build_image(
                "--static-binary", str(pause), "--name", PAUSE_IMAGE, "--entrypoint", "/usr/local/bin/pause"
            )
        )
        self.timings["pause image"] = time.monotonic() - started

    def apiserver_args(self, pki: PKI) -> list[str]:
        """Reach the kubelet by its InternalIP (else logs and exec look the node's name up), as a
        client the kubelet's webhook authorizer lets in."""
        client = pki.client("apiserver-kubelet-client", "kube-apiserver-kubelet-client", "system:masters")
        return [
            "--kubelet-preferred-address-types=InternalIP",
            f"--kubelet-client-certificate={client.cert}",
            f"--kubelet-client-key={client.key}",
        ]

    def controller_manager_args(self, pki: PKI, workdir: Path) -> list[str]:
        """No node CIDRs are allocated: the CNI config owns POD_RANGE. The CA signs CSRs (none is
        needed today: the kubelet serves a self-signed certificate and has its client one). The
        flex-volume dir goes into the harness's workdir, not /usr/libexec, which the controller
        manager would otherwise create (and recreate until it stops, after the host is restored)."""
        return [
            f"--flex-volume-plugin-dir={workdir / 'flex-volume'}",
            f"--service-cluster-ip-range={SERVICE_RANGE}",
            f"--cluster-cidr={POD_RANGE}",
            "--allocate-node-cidrs=false",
            f"--cluster-signing-cert-file={pki.ca_cert}",
            f"--cluster-signing-key-file={pki.ca_key}",
        ]

    # -------------------------------------------------------------- once the API server serves
    def start(self, cluster: ControlPlane) -> None:
        assert self.state is not None and self.bin_dir is not None, "prepare() first"
        for rule in guard_rules(cluster.ports["apiserver"]):
            run_command("iptables", "-w", *rule)
        pki = cluster.pki
        kubelet_kubeconfig = cluster._write_kubeconfig(
            cluster.workdir / "kubelet.kubeconfig", pki.client("kubelet", f"system:node:{self.name}", "system:nodes")
        )
        proxy_kubeconfig = cluster._write_kubeconfig(
            cluster.workdir / "kube-proxy.kubeconfig", pki.client("kube-proxy", "system:kube-proxy")
        )
        config = self.paths.run_dir / "kubelet.yaml"
        config.write_text(
            yaml.safe_dump(kubelet_config(self.paths, pki.ca_cert, port=free_port(), healthz_port=free_port()))
        )
        labels = {"topology.kubernetes.io/zone": self.zone, "type": "real", **self.labels}
        started = time.monotonic()
        kubelet = self._spawn(
            "kubelet",
            [
                str(self.bin_dir / "kubelet"),
                f"--config={config}",
                f"--kubeconfig={kubelet_kubeconfig}",
                f"--root-dir={self.paths.kubelet_root}",
                f"--cert-dir={self.paths.kubelet_root / 'pki'}",
                f"--hostname-override={self.name}",
                f"--node-ip={BRIDGE_IP}",
                "--node-labels=" + ",".join(f"{k}={v}" for k, v in sorted(labels.items())),
                "--v=2",
            ],
        )
        proxy_config = self.paths.run_dir / "kube-proxy.yaml"
        proxy_config.write_text(
            yaml.safe_dump(
                kube_proxy_config(proxy_kubeconfig, self.name, healthz_port=free_port(), metrics_port=free_port())
            )
        )
        proxy = self._spawn("kube-proxy", [str(self.bin_dir / "kube-proxy"), f"--config={proxy_config}", "--v=2"])
        api = cluster.admin
        assert api is not None

        def ready() -> bool:
            kubelet.check()
            proxy.check()
            node = api.get(f"/api/v1/nodes/{self.name}")
            return any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in (node.get("status") or {}).get("conditions") or ()
            )

        wait_for(f"the real node {self.name} Ready", ready, 180, 0.5)
        self.timings["node Ready"] = time.monotonic() - started
        self._guard_first()

    def _guard_first(self) -> None:
        """kube-proxy prepends its own jumps to INPUT and FORWARD: put the guard's back in front."""
        for chain, guard in (("FORWARD", GUARD_FORWARD), ("INPUT", GUARD_INPUT)):
            run_command("iptables", "-w", "-D", chain, "-i", BRIDGE, "-j", guard, check=False)
            run_command("iptables", "-w", "-I", chain, "1", "-i", BRIDGE, "-j", guard)

    # -------------------------------------------------------------- stop
    def stop(self) -> list[str]:
        """Stop the kubelet and kube-proxy, remove every container while containerd still runs,
        stop containerd, then restore the host (processes left in pods' cgroups are killed)."""
        problems: list[str] = []
        started = time.monotonic()
        try:
            for name in ("kubelet", "kube-proxy"):
                for proc in [p for p in self.processes if p.name == name]:
                    proc.stop()
            containerd = next((p for p in self.processes if p.name == "containerd" and p.alive), None)
            if containerd is not None:
                self._remove_containers()
            for proc in reversed(self.processes):
                proc.stop()
            log.info("real node stopped in %.1fs", time.monotonic() - started)
        finally:
            self.processes.clear()
            if self.state is not None:
                problems = self.state.restore()
                log.info("host state restored in %.1fs", time.monotonic() - started)
                if problems:
                    log.error("host state not fully restored: %s (state kept in %s)", problems, STATE_FILE)
                self.state = None
            self._release_lock()
        return problems

    def _remove_containers(self) -> None:
        tasks = [line.split()[0] for line in self.ctr("tasks", "ls", check=False).stdout.splitlines()[1:] if line]
        for task in tasks:
            self.ctr("tasks", "kill", "--all", "--signal", "SIGKILL", task, check=False)
        for task in tasks:
            self.ctr("tasks", "delete", "--force", task, check=False)
        for container in self.ctr("containers", "ls", "-q", check=False).stdout.split():
            self.ctr("containers", "delete", container, check=False)

    # -------------------------------------------------------------- helpers
    def ctr(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """containerd's ctr against our containerd, in the kubelet's namespace (k8s.io)."""
        return run_command("ctr", f"--address={self.paths.containerd_socket}", "--namespace=k8s.io", *args, check=check)

    def build_image(self, *args: str) -> Path:
        """hack/image/build.py ARGS (at nice 19: the machine is shared); returns the OCI archive."""
        result = subprocess.run(
            ["nice", "-n", "19", sys.executable, str(IMAGE_BUILDER), *args], stdout=subprocess.PIPE, text=True
        )
        if result.returncode != 0:
            raise RealNodeError(f"hack/image/build.py {' '.join(args)} failed (exit {result.returncode})")
        return Path(result.stdout.strip().splitlines()[-1])

    def trust_registry(self, host: str, ca: Path | None = None) -> None:
        """Let the node's containerd pull from `host` (HOST:PORT on loopback), as a cluster is
        configured for its own registry; the pods then pull what names it. With `ca` (a CA
        certificate), over TLS trusting that CA for this host alone (copied into the node's own
        config folder, which goes with the node); without, over plain HTTP."""
        folder = self.paths.registry_hosts / host
        folder.mkdir(parents=True, exist_ok=True)
        if ca is None:
            (folder / "hosts.toml").write_text(plain_http_registry(host))
            return
        shutil.copyfile(ca, folder / "ca.crt")
        (folder / "hosts.toml").write_text(tls_registry(host, folder / "ca.crt"))

    def load_image(self, archive: Path) -> None:
        """Import an OCI archive into our containerd, where the kubelet finds it (as build.py --load
        does for the host's containerd)."""
        self.ctr("images", "import", "--all-platforms", str(archive))

    def container_pid(self, container_id: str) -> int:
        """The host pid of a container's main process (from `ctr tasks ls`)."""
        for line in self.ctr("tasks", "ls").stdout.splitlines()[1:]:
            parts = line.split()
            if parts and parts[0] == container_id:
                return int(parts[1])
        raise RealNodeError(f"no task {container_id} in containerd")

    def _spawn(self, name: str, argv: list[str]) -> Process:
        process = Process(name, argv, self.log_dir)
        process.start()
        self.processes.append(process)
        assert self.state is not None and process.popen is not None
        self.state.started(name, process.popen.pid)
        return process

    def _take_lock(self) -> None:
        self._lock = take_lock()

    def _release_lock(self) -> None:
        if self._lock is not None:
            release_lock(self._lock)
            self._lock = None
