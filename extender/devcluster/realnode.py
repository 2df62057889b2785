"""A real node for the local control plane, and the host state it changes.

kwok's nodes never run a container, so what users install (deploy/: the image, the probes, the
sidecar on loopback, the projected token) can only be proven on a real node: a real kubelet and
kube-proxy (the pinned binaries of the newest minor, `hack/kube/build.sh --node`) running real pods
through a containerd of our own, on a bridge whose addresses exist only on this machine (pods
POD_RANGE, services SERVICE_RANGE; pods get no default route, and an iptables guard drops anything
they send elsewhere).

All of that changes host-wide state: sysctls (the kubelet's own and IP forwarding), iptables rules,
links, mounts, cgroups, a few well-known paths. It is recorded in STATE_FILE before anything is
touched, and restored by `stop()`, by the next start after a crashed run, or by hand:

    python -m extender.devcluster.realnode --restore     # after a crashed run (or to check: nothing to do)
    python -m extender.devcluster.realnode --snapshot F  # the host state the restore must give back, as JSON
    python -m extender.devcluster.realnode --compare F   # differences from such a snapshot (exit 1 if any)

One real node per machine at a time (LOCK_FILE): the bridge, cgroups and rules are host-wide.
Needs root, and hack/realnode/install.sh's packages.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import ipaddress
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml

from .api import Api, wait_for
from .pki import PKI, ClientCert
from .processes import Process, free_port

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "hack" / "kube" / "build.sh"
IMAGE_BUILDER = REPO / "hack" / "image" / "build.py"
PAUSE_SOURCE = REPO / "hack" / "realnode" / "pause"

# Address ranges that exist only on this machine (checked free before use).
POD_RANGE = "10.213.0.0/24"
BRIDGE_IP = "10.213.0.1"
SERVICE_RANGE = "10.214.0.0/24"
KUBERNETES_SERVICE_IP = "10.214.0.1"  # the first service IP: the `kubernetes` Service
BRIDGE = "pxrn0"
GUARD_FORWARD = "PXRN-FORWARD"
GUARD_INPUT = "PXRN-INPUT"

STATE_DIR = Path("/run/placement-extender-realnode")
STATE_FILE = STATE_DIR / "state.json"
LOCK_FILE = STATE_DIR / "lock"
RUN_DIR = Path("/var/lib/placement-extender-realnode")  # on disk: images and pods' root filesystems
PAUSE_IMAGE = "localhost/placement-extender/pause:1"  # "localhost/": were it ever pulled, only loopback

# Paths outside the run dir that containerd, the CNI plugins or the kubelet create at fixed places;
# each one absent before the run is removed after it.
FIXED_PATHS = (
    "/run/containerd",
    "/run/netns",
    "/var/run/netns",
    "/var/lib/cni",
    "/var/lib/kubelet",
    "/var/log/containers",
    "/var/log/pods",
    "/usr/libexec/kubernetes",
    "/opt/containerd",
    "/etc/cni",
    "/etc/kubernetes",
)
# Sysctls the kubelet sets (protectKernelDefaults: false), IP forwarding (the bridge plugin), and
# what kube-proxy could set (its config here asks it to leave conntrack and route_localnet alone).
SYSCTLS = (
    "net/ipv4/ip_forward",
    "net/ipv6/conf/all/forwarding",
    "net/ipv6/conf/default/forwarding",
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
    "net/netfilter/nf_conntrack_max",
    "net/netfilter/nf_conntrack_tcp_timeout_established",
    "net/netfilter/nf_conntrack_tcp_timeout_close_wait",
    "net/netfilter/nf_conntrack_tcp_be_liberal",
    "net/netfilter/nf_conntrack_udp_timeout",
    "net/netfilter/nf_conntrack_udp_timeout_stream",
    "net/bridge/bridge-nf-call-iptables",
    "net/bridge/bridge-nf-call-ip6tables",
)
# Writing ip_forward resets every interface's forwarding (and accept_redirects on all), so the whole
# net/ipv4/conf/<all, default, each link> is recorded too, and ip_forward is restored first.
IPTABLES_TABLES = {
    "filter": ("INPUT", "FORWARD", "OUTPUT"),
    "nat": ("PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"),
    "mangle": ("PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"),
    "raw": ("PREROUTING", "OUTPUT"),
    "security": ("INPUT", "FORWARD", "OUTPUT"),
}
NFT_FAMILIES = {"iptables": "ip", "ip6tables": "ip6"}


class RealNodeError(RuntimeError):
    pass


# ------------------------------------------------------------------ commands


def _run(*argv: str, check: bool = True, input: str | None = None) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(argv, input=input, capture_output=True, text=True, check=False)
    if check and result.returncode != 0:
        raise RealNodeError(f"{' '.join(argv)} exited {result.returncode}: {result.stderr.strip()}")
    return result


def _ip_json(*args: str) -> list[dict[str, Any]]:
    return json.loads(_run("ip", "-j", *args).stdout or "[]")


# ------------------------------------------------------------------ rendering (pure)


@dataclass(frozen=True)
class NodePaths:
    """Everything of the node under one run dir: nothing of it is shared with the host's own."""

    run_dir: Path

    @property
    def containerd_config(self) -> Path:
        return self.run_dir / "containerd.toml"

    @property
    def containerd_root(self) -> Path:
        return self.run_dir / "containerd" / "root"

    @property
    def containerd_state(self) -> Path:
        return self.run_dir / "containerd" / "state"

    @property
    def containerd_socket(self) -> Path:
        return self.run_dir / "containerd.sock"

    @property
    def runc_root(self) -> Path:
        return self.run_dir / "runc"

    @property
    def cni_conf_dir(self) -> Path:
        return self.run_dir / "cni" / "net.d"

    @property
    def cni_ipam_dir(self) -> Path:
        return self.run_dir / "cni" / "ipam"

    @property
    def kubelet_root(self) -> Path:
        return self.run_dir / "kubelet"

    @property
    def pod_logs(self) -> Path:
        return self.run_dir / "pod-logs"

    @property
    def volume_plugins(self) -> Path:
        return self.run_dir / "volume-plugins"

    @property
    def opt(self) -> Path:
        return self.run_dir / "opt"


def cni_config(paths: NodePaths) -> dict[str, Any]:
    """The pods' network: a bridge, host-local addresses, and a route to the service range only.
    No default route and no masquerade, so nothing a pod sends has a way off the machine. (The
    loopback plugin brings up each pod's lo: containerd runs it itself.)"""
    return {
        "cniVersion": "0.4.0",
        "name": "placement-realnode",
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": True,  # the bridge holds BRIDGE_IP; pods get no default route from it
                "isDefaultGateway": False,
                "ipMasq": False,
                "hairpinMode": True,  # a pod reaches itself through a Service
                "ipam": {
                    "type": "host-local",
                    "dataDir": str(paths.cni_ipam_dir),
                    "ranges": [[{"subnet": POD_RANGE, "gateway": BRIDGE_IP, "rangeStart": "10.213.0.10"}]],
                    "routes": [{"dst": SERVICE_RANGE, "gw": BRIDGE_IP}],
                },
            }
        ],
    }


def containerd_config(paths: NodePaths, pause_image: str = PAUSE_IMAGE) -> str:
    """containerd 1.6's config (version 2): its own dirs and socket, so it never meets the host's
    containerd; cgroupfs, as the kubelet; restrict_oom_score_adj, since root here lacks
    CAP_SYS_RESOURCE (without it every sandbox fails in runc: "can't get final child's PID")."""
    return f"""version = 2
root = "{paths.containerd_root}"
state = "{paths.containerd_state}"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", \
"io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]

[grpc]
  address = "{paths.containerd_socket}"

[ttrpc]
  address = "{paths.containerd_socket}.ttrpc"

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "{paths.opt}"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{pause_image}"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  disable_apparmor = true

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "{paths.runc_root}"

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{paths.cni_conf_dir}"
    max_conf_num = 1
"""


def kubelet_config(paths: NodePaths, ca_file: Path, *, port: int, healthz_port: int) -> dict[str, Any]:
    """The kubelet as this machine allows it: cgroup v1 accepted (1.35+ refuses it by default), the
    kernel sysctls set by the kubelet rather than required of the host (recorded and restored), no
    swap check, and image garbage collection off, so it never deletes the images we imported (no
    registry to pull them back from)."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "failCgroupV1": False,
        "protectKernelDefaults": False,
        "failSwapOn": False,
        "cgroupDriver": "cgroupfs",
        "containerRuntimeEndpoint": f"unix://{paths.containerd_socket}",
        "address": BRIDGE_IP,  # the API server reaches it there (logs, exec); never 0.0.0.0
        "port": port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": healthz_port,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(ca_file)},
        },
        "authorization": {"mode": "Webhook"},
        "clusterDomain": "cluster.local",
        "clusterDNS": [],
        "resolvConf": "",  # no DNS for pods: they reach the API server by the kubernetes Service's IP
        "podLogsDir": str(paths.pod_logs),
        "volumePluginDir": str(paths.volume_plugins),
        "oomScoreAdj": 0,  # lowering it needs CAP_SYS_RESOURCE, which root lacks here
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "imageMinimumGCAge": "87600h",
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "nodefs.inodesFree": "1%",
            "imagefs.available": "1%",
        },
        "rotateCertificates": False,
        "serverTLSBootstrap": False,
        "registerNode": True,
        "maxPods": 110,
    }


def kube_proxy_config(kubeconfig: Path, node_name: str, *, healthz_port: int, metrics_port: int) -> dict[str, Any]:
    """kube-proxy in iptables mode, serving NodePorts on the bridge IP only and leaving conntrack
    sizing and route_localnet alone: the fewer host settings it changes, the fewer to restore."""
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "mode": "iptables",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "hostnameOverride": node_name,
        "bindAddress": BRIDGE_IP,
        "healthzBindAddress": f"127.0.0.1:{healthz_port}",
        "metricsBindAddress": f"127.0.0.1:{metrics_port}",
        "clusterCIDR": POD_RANGE,
        "nodePortAddresses": [f"{BRIDGE_IP}/32"],
        "iptables": {"localhostNodePorts": False, "masqueradeAll": False},
        "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
        "oomScoreAdj": 0,
    }


def guard_rules(apiserver_port: int) -> list[list[str]]:
    """iptables arguments (filter table) of the guard: pods may talk to pods and services, and to
    this host only on the API server's port (and in connections the host opened, as probes); the
    rest is dropped. Pods have no route off the machine anyway: this holds if one appears.
    It matches what comes in on the bridge, never by source address: the host's own connections
    to the bridge IP (the harness's clients) have that address as source too, and those opened
    before conntrack was first needed would look NEW to it, and be dropped."""
    return [
        ["-N", GUARD_FORWARD],
        ["-A", GUARD_FORWARD, "-d", POD_RANGE, "-j", "RETURN"],
        ["-A", GUARD_FORWARD, "-d", SERVICE_RANGE, "-j", "RETURN"],
        ["-A", GUARD_FORWARD, "-j", "DROP"],
        ["-I", "FORWARD", "1", "-i", BRIDGE, "-j", GUARD_FORWARD],
        ["-N", GUARD_INPUT],
        ["-A", GUARD_INPUT, "-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "RETURN"],
        ["-A", GUARD_INPUT, "-d", BRIDGE_IP, "-p", "tcp", "--dport", str(apiserver_port), "-j", "RETURN"],
        ["-A", GUARD_INPUT, "-j", "DROP"],
        ["-I", "INPUT", "1", "-i", BRIDGE, "-j", GUARD_INPUT],
    ]


def range_clashes(addresses: list[dict[str, Any]], routes: list[dict[str, Any]], ranges: list[str]) -> list[str]:
    """Which of `ranges` meet an address or a route already on this host (`ip -j addr`, `ip -j route
    show table all`); the default route meets everything and is not a clash."""
    nets = [ipaddress.ip_network(r) for r in ranges]
    out = []
    for link in addresses:
        for info in link.get("addr_info") or ():
            if info.get("family") != "inet":
                continue
            iface = ipaddress.ip_interface(f"{info['local']}/{info['prefixlen']}")
            out += [f"{net} meets {iface} on {link.get('ifname')}" for net in nets if iface.network.overlaps(net)]
    for route in routes:
        dst = route.get("dst")
        if not dst or dst == "default":
            continue
        try:
            network = ipaddress.ip_network(dst, strict=False)
        except ValueError:
            continue
        if network.version != 4 or network.prefixlen == 0:
            continue
        table = route.get("table", "main")
        out += [f"{net} meets the route {dst} (table {table})" for net in nets if network.overlaps(net)]
    return sorted(set(out))


def _tables(text: str) -> dict[str, list[str]]:
    """iptables-save output -> {table: its lines from *table to COMMIT}, comments dropped."""
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        if line.startswith("*"):
            current = out.setdefault(line[1:].strip(), [])
        if current is not None:
            current.append(line)
        if line == "COMMIT":
            current = None
    return out


def normalize_rules(text: str) -> str:
    """iptables-save output without comments and counters: what a restore must give back."""
    lines = []
    for _, body in sorted(_tables(text).items()):
        lines += [re.sub(r"\[\d+:\d+\]", "[0:0]", line) for line in body]
    return "\n".join(lines) + ("\n" if lines else "")


def restore_input(baseline: str, current: str) -> tuple[str, list[str]]:
    """The iptables-restore input giving back `baseline` (iptables-save before the run) over
    `current` (after): each table restores flushes it and drops its own chains, so a table the run
    created is written back empty. Returns it and the tables the run created (to delete after)."""
    before, now = _tables(baseline), _tables(current)
    lines: list[str] = []
    for table in sorted(set(before) | set(now)):
        if table in before:
            lines += [re.sub(r"\[\d+:\d+\]", "[0:0]", line) for line in before[table]]
            continue
        lines.append(f"*{table}")
        chains = [line.split()[0][1:] for line in now[table] if line.startswith(":") and line.split()[1] != "-"]
        lines += [f":{chain} ACCEPT [0:0]" for chain in chains or IPTABLES_TABLES.get(table, ())]
        lines.append("COMMIT")
    return "\n".join(lines) + "\n", sorted(set(now) - set(before))


# ------------------------------------------------------------------ host state


def _read_sysctl(key: str) -> str | None:
    try:
        return (Path("/proc/sys") / key).read_text().strip()
    except OSError:
        return None


def sysctl_keys() -> list[str]:
    keys = list(SYSCTLS)
    for conf in sorted(Path("/proc/sys/net/ipv4/conf").iterdir()):
        keys += [f"net/ipv4/conf/{conf.name}/{f.name}" for f in sorted(conf.iterdir()) if f.is_file()]
    return keys


def read_sysctls(keys: list[str]) -> dict[str, str]:
    return {k: v for k in keys if (v := _read_sysctl(k)) is not None}


def _nft_tables() -> list[str]:
    if not shutil.which("nft"):
        return []
    return sorted(line.strip() for line in _run("nft", "list", "tables", check=False).stdout.splitlines() if line)


def _rules() -> dict[str, str]:
    return {tool: _run(f"{tool}-save", check=False).stdout for tool in NFT_FAMILIES if shutil.which(f"{tool}-save")}


def _mountpoints() -> list[str]:
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4]
        out.append(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), point))
    return out


def _cgroup_roots() -> list[Path]:
    """The kubelet's kubepods cgroup in each cgroup v1 hierarchy (or the v2 root)."""
    base = Path("/sys/fs/cgroup")
    return [base / "kubepods"] + sorted(p / "kubepods" for p in base.iterdir() if p.is_dir() and not p.is_symlink())


def snapshot() -> dict[str, Any]:
    """The host state a run may change, as comparable JSON (before vs after a run)."""
    return {
        "sysctls": read_sysctls(sysctl_keys()),
        "iptables": {tool: normalize_rules(text) for tool, text in _rules().items()},
        "nft_tables": _nft_tables(),
        "links": sorted(link["ifname"] for link in _ip_json("link", "show")),
        "mounts_named_placement": sorted(p for p in _mountpoints() if "placement" in p),
        "kubepods_cgroups": sorted(str(p) for p in _cgroup_roots() if p.exists()),
        "paths": {p: os.path.lexists(p) for p in (*FIXED_PATHS, str(RUN_DIR), str(STATE_DIR))},
    }


def compare(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """What differs between two snapshots, one line each (empty: the host is as it was)."""
    out = []
    for key in sorted(set(before) | set(after)):
        a, b = before.get(key), after.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            out += [f"{key}.{k}: {a.get(k)!r} -> {b.get(k)!r}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
        elif a != b:
            out.append(f"{key}: {a!r} -> {b!r}")
    return out


@dataclass
class HostState:
    """What the host looked like before the run, and what the run started: STATE_FILE's content."""

    run_dir: str
    owner_pid: int
    sysctls: dict[str, str]
    rules: dict[str, str]
    nft_tables: list[str]
    links: list[str]
    mounts: list[str]
    absent_paths: list[str]
    absent_cgroups: list[str]
    processes: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def record(cls, run_dir: Path) -> HostState:
        return cls(
            run_dir=str(run_dir),
            owner_pid=os.getpid(),
            sysctls=read_sysctls(sysctl_keys()),
            rules=_rules(),
            nft_tables=_nft_tables(),
            links=sorted(link["ifname"] for link in _ip_json("link", "show")),
            mounts=_mountpoints(),
            absent_paths=[p for p in FIXED_PATHS if not os.path.lexists(p)],
            absent_cgroups=[str(p) for p in _cgroup_roots() if p.parent.exists() and not p.exists()],
        )

    def save(self) -> None:
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        tmp = STATE_FILE.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=1))
        os.replace(tmp, STATE_FILE)

    @classmethod
    def load(cls) -> HostState | None:
        try:
            return cls(**json.loads(STATE_FILE.read_text()))
        except FileNotFoundError:
            return None

    def started(self, name: str, pid: int) -> None:
        """Note a process we started (pid and start time, so a restore after a crash kills it and
        never a later process that reused the pid)."""
        self.processes[name] = {"pid": pid, "start": _start_time(pid)}
        self.save()

    # -------------------------------------------------------------- restore
    def restore(self) -> list[str]:
        """Give the host back as recorded; every step runs even if an earlier one failed. Returns
        the problems (empty: restored)."""
        problems: list[str] = []
        run_dir = Path(self.run_dir)
        for step in (
            self._kill_processes,
            self._unmount,
            self._delete_links,
            self._restore_rules,
            self._restore_sysctls,
            self._remove_cgroups,
            self._remove_paths,
        ):
            try:
                step()
            except Exception as err:  # noqa: BLE001 - restore the rest regardless, then report
                problems.append(f"{step.__name__}: {err}")
        left = [p for p in _mountpoints() if _under(p, run_dir)]
        if left:
            problems.append(f"still mounted under {run_dir}: {left}")
        elif run_dir.exists():
            shutil.rmtree(run_dir, ignore_errors=True)
        if not problems:
            STATE_FILE.unlink(missing_ok=True)
        return problems

    def _kill_processes(self) -> None:
        ours = [Path(p) for p in self.absent_cgroups]  # kubepods hierarchies our kubelet made
        # Frozen (cgroup v1 freezer) tasks take no signal until thawed.
        for root in ours:
            for freezer in root.rglob("freezer.state") if root.exists() else ():
                try:
                    freezer.write_text("THAWED")
                except OSError:
                    pass
        victims = {p["pid"] for p in self.processes.values() if _start_time(p["pid"]) == p["start"]}
        victims |= set(_pods_processes(ours)) | set(_shims(Path(self.run_dir)))
        victims.discard(os.getpid())
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and any(_alive(p) for p in victims):
            time.sleep(0.1)

    def _unmount(self) -> None:
        before = set(self.mounts)
        roots = [Path(self.run_dir)] + [Path(p) for p in self.absent_paths]
        points = [p for p in _mountpoints() if p not in before and any(_under(p, r) for r in roots)]
        points += [p for p in _mountpoints() if p.startswith("/run/netns/cni-") and p not in before]
        for point in sorted(set(points), key=lambda p: p.count("/"), reverse=True):
            if _run("umount", point, check=False).returncode != 0:
                _run("umount", "-l", point, check=False)

    def _delete_links(self) -> None:
        names = {link["ifname"] for link in _ip_json("link", "show")}
        if BRIDGE in names and BRIDGE not in self.links:
            for port in _ip_json("link", "show", "master", BRIDGE):
                _run("ip", "link", "delete", port["ifname"], check=False)
            _run("ip", "link", "delete", BRIDGE)

    def _restore_rules(self) -> None:
        for tool, baseline in self.rules.items():
            text, created = restore_input(baseline, _run(f"{tool}-save").stdout)
            _run(f"{tool}-restore", input=text)
            if created and "nf_tables" in _run(tool, "-V").stdout and shutil.which("nft"):
                family = NFT_FAMILIES[tool]
                for table in created:
                    if f"table {family} {table}" not in self.nft_tables:
                        _run("nft", "delete", "table", family, table, check=False)
        # nftables tables a component made itself (kube-proxy's own, were it ever in nftables mode)
        for line in _nft_tables():
            family, _, name = line.removeprefix("table ").partition(" ")
            if line not in self.nft_tables and name in ("kube-proxy", *IPTABLES_TABLES):
                _run("nft", "delete", "table", family, name, check=False)

    def _restore_sysctls(self) -> None:
        order = sorted(self.sysctls, key=lambda k: k != "net/ipv4/ip_forward")  # it resets the others
        failed = []
        for key in order:
            now = _read_sysctl(key)
            if now is None or now == self.sysctls[key]:
                continue
            try:
                (Path("/proc/sys") / key).write_text(self.sysctls[key] + "\n")
            except OSError as err:
                failed.append(f"{key}: {err}")
        if failed:
            raise RealNodeError(f"could not restore {failed}")

    def _remove_cgroups(self) -> None:
        left = []
        deadline = time.monotonic() + 20
        for root in map(Path, self.absent_cgroups):
            while root.exists():
                for folder, _, _ in os.walk(root, topdown=False):
                    try:
                        os.rmdir(folder)
                    except OSError:
                        pass
                if not root.exists() or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            if root.exists():
                left.append(str(root))
        if left:
            raise RealNodeError(f"cgroups still there (processes left in them?): {left}")

    def _remove_paths(self) -> None:
        for path in map(Path, self.absent_paths):
            if path.is_symlink() or path.is_file():
                path.unlink()
            elif path.exists() and not any(_under(p, path) for p in _mountpoints()):
                shutil.rmtree(path, ignore_errors=True)


def _under(path: str, root: Path) -> bool:
    return path == str(root) or path.startswith(str(root).rstrip("/") + "/")


def _start_time(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _pods_processes(roots: list[Path]) -> list[int]:
    """Every process in these kubepods cgroups: the pods our kubelet started (the hierarchies are
    ours: they did not exist before the run)."""
    pids: set[int] = set()
    for root in roots:
        for procs in root.rglob("cgroup.procs") if root.exists() else ():
            try:
                pids |= {int(p) for p in procs.read_text().split()}
            except OSError:
                pass
    return sorted(pids)


def _shims(run_dir: Path) -> list[int]:
    """containerd's shims of our containerd (their command line names its socket, in the run dir)."""
    socket = str(NodePaths(run_dir).containerd_socket)
    out = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and b"containerd-shim" in argv[0] and socket.encode() in argv:
            out.append(int(proc.name))
    return out


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
    go_version = _run("go", "version").stdout.strip()
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
        if os.geteuid() != 0:
            raise RealNodeError("the real node needs root (containerd, kubelet, the bridge, iptables)")
        missing = [t for t in ("containerd", "runc", "ctr", "iptables", "conntrack") if not shutil.which(t)]
        missing += [
            p
            for p in ("/usr/lib/cni/bridge", "/usr/lib/cni/host-local", "/usr/lib/cni/loopback")
            if not Path(p).exists()
        ]
        if missing:
            raise RealNodeError(f"missing {', '.join(missing)}: run hack/realnode/install.sh")
        self.log_dir = log_dir
        self._take_lock()
        leftover = HostState.load()
        if leftover is not None:
            log.warning("restoring the host state a crashed run (pid %s) left", leftover.owner_pid)
            problems = leftover.restore()
            if problems:
                raise RealNodeError(f"could not restore the state a crashed run left: {problems}")
        clashes = range_clashes(
            _ip_json("addr", "show"), _ip_json("route", "show", "table", "all"), [POD_RANGE, SERVICE_RANGE]
        )
        if BRIDGE in {link["ifname"] for link in _ip_json("link", "show")}:
            clashes.append(f"a link named {BRIDGE} exists (not ours: no state file)")
        clashes += [f"{p} exists: another kubelet's pods run here" for p in _cgroup_roots() if p.exists()]
        if clashes:
            raise RealNodeError("this host is not free for a real node: " + "; ".join(clashes))
        self.bin_dir = node_binaries()
        pause = pause_binary()
        stale = [p for p in _mountpoints() if _under(p, self.paths.run_dir)]
        if stale:
            raise RealNodeError(f"mounts under {self.paths.run_dir} with no state file: unmount them first: {stale}")
        self.state = HostState.record(self.paths.run_dir)
        self.state.save()  # from here on, a crash leaves enough to restore
        if self.paths.run_dir.exists():
            shutil.rmtree(self.paths.run_dir)
        for folder in (self.paths.cni_conf_dir, self.paths.cni_ipam_dir, self.paths.pod_logs, self.paths.opt):
            folder.mkdir(parents=True, exist_ok=True)
        _run("ip", "link", "add", BRIDGE, "type", "bridge")
        _run("ip", "addr", "add", f"{BRIDGE_IP}/{POD_RANGE.split('/')[1]}", "dev", BRIDGE)
        _run("ip", "link", "set", BRIDGE, "up")
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
            _run("iptables", "-w", *rule)
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
            _run("iptables", "-w", "-D", chain, "-i", BRIDGE, "-j", guard, check=False)
            _run("iptables", "-w", "-I", chain, "1", "-i", BRIDGE, "-j", guard)

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
        return _run("ctr", f"--address={self.paths.containerd_socket}", "--namespace=k8s.io", *args, check=check)

    def build_image(self, *args: str) -> Path:
        """hack/image/build.py ARGS (at nice 19: the machine is shared); returns the OCI archive."""
        result = subprocess.run(
            ["nice", "-n", "19", sys.executable, str(IMAGE_BUILDER), *args], stdout=subprocess.PIPE, text=True
        )
        if result.returncode != 0:
            raise RealNodeError(f"hack/image/build.py {' '.join(args)} failed (exit {result.returncode})")
        return Path(result.stdout.strip().splitlines()[-1])

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


# ------------------------------------------------------------------ the machine's one slot


def take_lock() -> int:
    """The machine's one real-node slot: an flock on LOCK_FILE, holding our pid. The file is removed
    on release (no trace left), so a lock taken on a file already unlinked is taken again."""
    while True:
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        fd = os.open(LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode(errors="replace").strip()
            os.close(fd)
            raise RealNodeError(
                f"a real node already runs on this machine (pid {holder or '?'}): one at a time"
            ) from None
        try:
            current = os.stat(LOCK_FILE).st_ino
        except FileNotFoundError:
            current = None
        if current == os.fstat(fd).st_ino:
            os.ftruncate(fd, 0)
            os.write(fd, str(os.getpid()).encode())
            return fd
        os.close(fd)  # released and removed by its holder meanwhile: take the new file


def release_lock(fd: int) -> None:
    """Remove LOCK_FILE (and STATE_DIR, once no state is kept in it) while still holding it."""
    LOCK_FILE.unlink(missing_ok=True)
    try:
        STATE_DIR.rmdir()
    except OSError:
        pass  # a state file kept for a later restore
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)


# ------------------------------------------------------------------ by hand


def restore_by_hand() -> int:
    """Restore what a crashed run left (refusing while a run holds the lock)."""
    try:
        fd = take_lock()
    except RealNodeError as err:
        print(f"{err}; stop it instead", file=sys.stderr)
        return 1
    try:
        state = HostState.load()
        if state is None:
            print(f"nothing to restore: no {STATE_FILE}")
            return 0
        problems = state.restore()
        for problem in problems:
            print(f"not restored: {problem}", file=sys.stderr)
        print("restored" if not problems else f"state kept in {STATE_FILE}")
        return 1 if problems else 0
    finally:
        release_lock(fd)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--restore", action="store_true", help="restore the host state a crashed run left")
    action.add_argument("--snapshot", metavar="FILE", help="write the host state a run may change as JSON")
    action.add_argument("--compare", metavar="FILE", help="print the differences from a --snapshot (exit 1 if any)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.restore:
        return restore_by_hand()
    if args.snapshot:
        Path(args.snapshot).write_text(json.dumps(snapshot(), indent=1, sort_keys=True))
        return 0
    differences = compare(json.loads(Path(args.compare).read_text()), snapshot())
    for line in differences:
        print(line)
    print(f"{len(differences)} differences")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
