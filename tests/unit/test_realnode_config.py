"""The real node's rendered configuration and host-state arithmetic (tests/realnode/harness/),
checked without a node: what keeps pods on this machine, what the kubelet needs here, and how the
host's iptables are given back."""

from __future__ import annotations

import ipaddress
import tempfile
import tomllib
from pathlib import Path

from extender.devcluster.cluster import WORKDIR_PREFIX
from realnode.harness import config as rn
from realnode.harness.host import HostState, compare

PATHS = rn.NodePaths(Path("/var/lib/placement-extender-realnode"))


def test_pods_get_no_route_off_the_machine() -> None:
    config = rn.cni_config(PATHS)
    bridge = config["plugins"][0]
    assert bridge["type"] == "bridge" and bridge["bridge"] == rn.BRIDGE
    assert bridge["ipMasq"] is False and bridge["isDefaultGateway"] is False
    ipam = bridge["ipam"]
    assert ipam["routes"] == [{"dst": rn.SERVICE_RANGE, "gw": rn.BRIDGE_IP}]  # no 0.0.0.0/0
    assert ipam["ranges"][0][0]["subnet"] == rn.POD_RANGE
    assert Path(ipam["dataDir"]).is_relative_to(PATHS.run_dir)  # not /var/lib/cni


def test_the_ranges_are_private_and_apart() -> None:
    pods, services = ipaddress.ip_network(rn.POD_RANGE), ipaddress.ip_network(rn.SERVICE_RANGE)
    assert pods.is_private and services.is_private and not pods.overlaps(services)
    assert ipaddress.ip_address(rn.BRIDGE_IP) in pods
    assert ipaddress.ip_address(rn.KUBERNETES_SERVICE_IP) == next(services.hosts())


def test_containerd_config_is_its_own() -> None:
    config = tomllib.loads(rn.containerd_config(PATHS))
    assert config["version"] == 2
    assert config["grpc"]["address"] == str(PATHS.containerd_socket)
    for key in ("root", "state"):
        assert Path(config[key]).is_relative_to(PATHS.run_dir)
    cri = config["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["restrict_oom_score_adj"] is True
    assert cri["sandbox_image"] == rn.PAUSE_IMAGE and rn.PAUSE_IMAGE.startswith("localhost/")
    assert cri["netns_mounts_under_state_dir"] is True
    runc = cri["containerd"]["runtimes"]["runc"]["options"]
    assert runc["SystemdCgroup"] is False and Path(runc["Root"]).is_relative_to(PATHS.run_dir)
    assert cri["cni"]["conf_dir"] == str(PATHS.cni_conf_dir)
    assert Path(config["plugins"]["io.containerd.internal.v1.opt"]["path"]).is_relative_to(PATHS.run_dir)


def test_kubelet_config_fits_this_machine() -> None:
    config = rn.kubelet_config(PATHS, Path("/pki/ca.crt"), port=10250, healthz_port=10248)
    assert config["failCgroupV1"] is False and config["protectKernelDefaults"] is False
    assert config["failSwapOn"] is False and config["cgroupDriver"] == "cgroupfs"
    assert config["address"] == rn.BRIDGE_IP and config["healthzBindAddress"] == "127.0.0.1"
    assert config["readOnlyPort"] == 0 and config["authentication"]["anonymous"]["enabled"] is False
    assert config["containerRuntimeEndpoint"] == f"unix://{PATHS.containerd_socket}"
    assert config["imageGCHighThresholdPercent"] == 100  # never deletes the images we imported
    for key in ("podLogsDir", "volumePluginDir"):
        assert Path(config[key]).is_relative_to(PATHS.run_dir)


def test_kube_proxy_leaves_host_settings_alone() -> None:
    config = rn.kube_proxy_config(Path("/k"), "realnode", healthz_port=1, metrics_port=2)
    assert config["mode"] == "iptables" and config["clusterCIDR"] == rn.POD_RANGE
    assert config["nodePortAddresses"] == [f"{rn.BRIDGE_IP}/32"]
    assert config["iptables"]["localhostNodePorts"] is False  # else it sets route_localnet
    assert config["conntrack"]["maxPerCore"] == 0 and config["conntrack"]["tcpEstablishedTimeout"] == "0s"
    assert config["healthzBindAddress"].startswith("127.0.0.1:")


def test_guard_matches_the_bridge_not_the_source_address() -> None:
    """The host's own connections to the bridge IP carry it as their source: a guard on the pods'
    source range dropped the harness's watches to the API server."""
    rules = rn.guard_rules(6443)
    jumps = [r for r in rules if r[0] == "-I"]
    assert {r[1] for r in jumps} == {"INPUT", "FORWARD"}
    assert all(r[r.index("-i") + 1] == rn.BRIDGE and "-s" not in r for r in jumps)
    assert ["-A", rn.GUARD_FORWARD, "-j", "DROP"] in rules and ["-A", rn.GUARD_INPUT, "-j", "DROP"] in rules
    assert ["-A", rn.GUARD_INPUT, "-d", rn.BRIDGE_IP, "-p", "tcp", "--dport", "6443", "-j", "RETURN"] in rules


def test_range_clashes() -> None:
    addresses = [
        {"ifname": "eth0", "addr_info": [{"family": "inet", "local": "192.0.2.2", "prefixlen": 24}]},
        {"ifname": "tun0", "addr_info": [{"family": "inet", "local": "10.213.0.77", "prefixlen": 32}]},
    ]
    routes = [
        {"dst": "default", "gateway": "192.0.2.1"},
        {"dst": "10.0.0.0/8", "dev": "tun1"},
        {"dst": "10.214.0.5", "table": "local", "type": "local"},
    ]
    clashes = rn.range_clashes(addresses, routes, [rn.POD_RANGE, rn.SERVICE_RANGE])
    assert any("10.213.0.77" in c for c in clashes)
    assert any("10.0.0.0/8" in c and rn.POD_RANGE in c for c in clashes)
    assert any("10.0.0.0/8" in c and rn.SERVICE_RANGE in c for c in clashes)
    assert any("10.214.0.5" in c for c in clashes)
    assert rn.range_clashes(addresses[:1], routes[:1], [rn.POD_RANGE]) == []


BASELINE = """# Generated by iptables-save
*filter
:INPUT ACCEPT [10:20]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [5:6]
-A INPUT -i lo -j ACCEPT
COMMIT
"""
AFTER = """*nat
:PREROUTING ACCEPT [1:2]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
-A PREROUTING -j KUBE-SERVICES
COMMIT
*filter
:INPUT ACCEPT [99:99]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:PXRN-FORWARD - [0:0]
-A INPUT -i lo -j ACCEPT
-A FORWARD -i pxrn0 -j PXRN-FORWARD
-A PXRN-FORWARD -j DROP
COMMIT
"""


def test_restore_input_gives_back_the_baseline_and_empties_new_tables() -> None:
    text, created = rn.restore_input(BASELINE, AFTER)
    assert created == ["nat"]
    tables = rn._tables(text)
    assert tables["filter"] == [
        "*filter",
        ":INPUT ACCEPT [0:0]",
        ":FORWARD DROP [0:0]",  # the recorded policy, not the run's
        ":OUTPUT ACCEPT [0:0]",
        "-A INPUT -i lo -j ACCEPT",
        "COMMIT",
    ]
    # a table the run made: its built-in chains only, emptied (iptables-restore drops its own chains)
    assert tables["nat"] == [
        "*nat",
        ":PREROUTING ACCEPT [0:0]",
        ":INPUT ACCEPT [0:0]",
        ":OUTPUT ACCEPT [0:0]",
        ":POSTROUTING ACCEPT [0:0]",
        "COMMIT",
    ]
    assert rn.restore_input("", "") == ("\n", [])


def test_normalize_rules_ignores_counters_and_comments() -> None:
    assert rn.normalize_rules(BASELINE) == rn.normalize_rules(BASELINE.replace("[10:20]", "[0:0]") + "# x\n")
    assert rn.normalize_rules("") == ""


def test_compare_names_each_difference() -> None:
    before = {"sysctls": {"kernel/panic": "1", "vm/overcommit_memory": "0"}, "links": ["lo", "eth0"]}
    after = {"sysctls": {"kernel/panic": "10", "vm/overcommit_memory": "0"}, "links": ["lo", "eth0", "pxrn0"]}
    assert compare(before, after) == [
        "links: ['lo', 'eth0'] -> ['lo', 'eth0', 'pxrn0']",
        "sysctls.kernel/panic: '1' -> '10'",
    ]
    assert compare(before, before) == []


def test_unavailable_says_what_is_missing_and_what_to_do(monkeypatch) -> None:
    from realnode.harness import node

    monkeypatch.setattr(node.sys, "platform", "darwin")
    assert "needs Linux" in node.unavailable()
    monkeypatch.setattr(node.sys, "platform", "linux")
    monkeypatch.setattr(node.os, "geteuid", lambda: 1000)
    assert "needs root" in node.unavailable()
    monkeypatch.setattr(node.os, "geteuid", lambda: 0)
    monkeypatch.setattr(node.shutil, "which", lambda tool: None if tool == "containerd" else f"/usr/bin/{tool}")
    reason = node.unavailable()
    assert "containerd" in reason and "hack/realnode/install.sh" in reason


def test_a_restore_removes_the_crashed_runs_control_plane_workdir_and_nothing_else(tmp_path) -> None:
    """A harness killed mid-run leaves its LocalCluster's temp workdir (pki, etcd, kubeconfigs):
    the restore removes the ones its state file names, and only temp dirs named as LocalCluster
    names them, whatever else a state file holds."""
    ours = Path(tempfile.mkdtemp(prefix=WORKDIR_PREFIX))
    (ours / "etcd").mkdir()
    (ours / "admin.kubeconfig").write_text("x")
    elsewhere = tmp_path / (WORKDIR_PREFIX + "not-in-the-temp-dir")
    elsewhere.mkdir()
    unnamed = Path(tempfile.mkdtemp(prefix="someone-else-"))
    state = HostState("/nonexistent", 0, {}, {}, [], [], [], [], [], workdirs=[str(ours), str(elsewhere), str(unnamed)])
    try:
        state._remove_workdirs()
        assert not ours.exists()
        assert elsewhere.is_dir() and unnamed.is_dir()
    finally:
        for path in (ours, unnamed):
            if path.exists():
                path.rmdir()
