"""What the real node's daemons read, rendered from plain values (no I/O): containerd's, the
kubelet's, kube-proxy's and CNI's configuration, the guard's iptables rules, and the checks on
address ranges and rule dumps. The addresses and paths every part shares are here too."""

from __future__ import annotations

import ipaddress
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


REPO = Path(__file__).resolve().parents[3]
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


# ------------------------------------------------------------------ rendering (pure)


@dataclass(frozen=True)
class NodePaths:
    """Everything of the node under one run dir: nothing of it is shared with the host's own."""

    run_dir: Path

    @property
    def containerd_config(self) -> Path:
        return self.run_dir / "containerd.toml"

    @property
    def static_pods(self) -> Path:
        """The kubelet's staticPodPath: a manifest here runs as kubeadm runs its control plane."""
        return self.run_dir / "manifests"

    @property
    def containerd_root(self) -> Path:
        return self.run_dir / "containerd" / "root"

    @property
    def registry_hosts(self) -> Path:
        """containerd's per-registry host configs (`<host>/hosts.toml`), read at each pull."""
        return self.run_dir / "containerd" / "certs.d"

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

  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "{paths.registry_hosts}"
"""


def tls_registry(host: str, ca: Path) -> str:
    """hosts.toml for a registry serving TLS on loopback with a certificate of a CA of its own (a
    test's, RealNode.trust_registry): `ca` is that CA's certificate, trusted for this host alone."""
    return f"""server = "https://{host}"

[host."https://{host}"]
  capabilities = ["pull", "resolve"]
  ca = "{ca}"
"""


def plain_http_registry(host: str) -> str:
    """hosts.toml for a registry served over plain HTTP on loopback (a test's own, RealNode.trust_registry)."""
    return f"""server = "http://{host}"

[host."http://{host}"]
  capabilities = ["pull", "resolve"]
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
        "staticPodPath": str(paths.static_pods),
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
