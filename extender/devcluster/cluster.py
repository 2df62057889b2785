"""A real, local control plane: etcd, kube-apiserver, kube-controller-manager, the default
kube-scheduler, our kube-scheduler (config/scheduler-config.yaml) calling the extender, and kwok
for fake nodes. Every component is the pinned upstream binary; nothing is mocked.

Used by `make demo`, `python -m extender dev up`, and the e2e tests' fixtures.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import requests
import yaml

from ..api.policy import OPT_IN_RESOURCE, PLACEABLE_GATE, SCHEDULER_NAME
from ..limits import IN_SCHEDULER_DECISION_DEADLINE
from .api import Api, wait_for
from .pki import PKI, ClientCert
from .processes import Process, SigtermAsInterrupt, free_port

log = logging.getLogger(__name__)

WORKDIR_PREFIX = "placement-extender-"  # the temp work directories (a real node's restore removes a crashed run's)

REPO = Path(__file__).resolve().parents[2]
SCHEDULER_CONFIG = REPO / "config" / "scheduler-config.yaml"
IN_SCHEDULER_CONFIG = REPO / "config" / "in-scheduler" / "scheduler-config.yaml"
GATE_ADMISSION = REPO / "deploy" / "components" / "placeable-gate" / "placeable-gate.yaml"
BUILD_SCRIPT = REPO / "hack" / "kube" / "build.sh"
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
SYSTEM_NAMESPACE = "placement-system"
STORAGE_CLASS = "zonal-wffc"
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"


def kube_binaries() -> Path:
    """The pinned binaries: $KUBE_BIN_DIR if set, else built (or reused) by hack/kube/build.sh."""
    override = os.environ.get("KUBE_BIN_DIR")
    if override:
        missing = [b for b in BINARIES if not (Path(override) / b).exists()]
        if missing:
            raise RuntimeError(f"KUBE_BIN_DIR={override} lacks {', '.join(missing)}")
        return Path(override)
    if not BUILD_SCRIPT.exists():
        raise RuntimeError(f"{BUILD_SCRIPT} is missing; set KUBE_BIN_DIR to prebuilt binaries")
    result = subprocess.run(["bash", str(BUILD_SCRIPT)], stdout=subprocess.PIPE, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"building the Kubernetes binaries failed (exit {result.returncode}); see the output above")
    return Path(result.stdout.strip().splitlines()[-1])


KWOK_STAGES = (
    "node/fast/node-initialize.yaml",
    "pod/fast/pod-ready.yaml",
    "pod/fast/pod-complete.yaml",
    "pod/fast/pod-delete.yaml",
)


def kwok_stages(bin_dir: Path) -> str:
    """kwok's own "fast" lifecycle stages (nodes Ready, pods Running, deletions finished), read
    from the pinned kwok module (or from kwok-stages.yaml beside prebuilt binaries)."""
    beside = bin_dir / "kwok-stages.yaml"
    if beside.exists():
        return beside.read_text()
    gomod = (REPO / "hack" / "kube" / "kwok" / "go.mod").read_text()
    version = re.search(r"sigs\.k8s\.io/kwok (v[0-9][^\s]*)", gomod).group(1)  # type: ignore[union-attr]
    cache = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True, check=True).stdout.strip()
    root = Path(cache) / f"sigs.k8s.io/kwok@{version}" / "kustomize" / "stage"
    if not root.exists():
        subprocess.run(
            ["go", "mod", "download", f"sigs.k8s.io/kwok@{version}"], check=True, cwd=REPO / "hack" / "kube" / "kwok"
        )
    return "\n---\n".join((root / stage).read_text() for stage in KWOK_STAGES)


@dataclass
class NodeSpec:
    name: str
    zone: str | None
    labels: dict[str, str] = field(default_factory=dict)
    cpu: str = "32"
    memory: str = "256Gi"
    pods: str = "110"

    def manifest(self) -> dict[str, Any]:
        labels = {HOSTNAME: self.name, "type": "kwok", **self.labels}
        if self.zone is not None:
            labels[ZONE] = self.zone
        resources = {"cpu": self.cpu, "memory": self.memory, "pods": self.pods}
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": self.name, "labels": labels, "annotations": {"kwok.x-k8s.io/node": "fake"}},
            "spec": {},
            "status": {"allocatable": resources, "capacity": resources},
        }


def _gates_a_new_pod(api: Api) -> bool:
    """Whether the API server gives an opted-in pod the placeable gate at create (a dry run)."""
    probe = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": "gate-probe-"},
        "spec": {
            "containers": [
                {
                    "name": "probe",
                    "image": "registry.invalid/probe:1",
                    "resources": {"requests": {OPT_IN_RESOURCE: "1"}, "limits": {OPT_IN_RESOURCE: "1"}},
                }
            ]
        },
    }
    created = api.create("/api/v1/namespaces/default/pods", probe, dryRun="All")
    return PLACEABLE_GATE in str((created or {}).get("spec", {}).get("schedulingGates"))


def serves_gate_admission(api: Api) -> bool:
    """The API server serves MutatingAdmissionPolicy v1 (Kubernetes 1.36 and later, on by default)."""
    found = api.get("/apis/admissionregistration.k8s.io/v1")
    return any(r.get("name") == "mutatingadmissionpolicies" for r in (found or {}).get("resources") or [])


def zoned_nodes(layout: dict[str, int], prefix: str = "node") -> list[NodeSpec]:
    """{'zone-a': 2, 'zone-b': 2} -> node-a1, node-a2, node-b1, node-b2."""
    out = []
    for zone, count in layout.items():
        short = zone.rsplit("-", 1)[-1]
        out.extend(NodeSpec(f"{prefix}-{short}{i}", zone) for i in range(1, count + 1))
    return out


class RealNode(Protocol):
    """A real kubelet and kube-proxy on this machine, beside kwok's fake nodes: the harness of
    tests/realnode (tests/realnode/harness: RealNode), which configures the host's containerd, CNI
    and iptables as root. It is not part of the installed package; the tests hand one in."""

    state: Any  # the host state it recorded (prepare), told of every process the plane starts
    processes: list[Process]
    address: str
    service_range: str
    serving_ips: tuple[str, ...]

    def prepare(self, log_dir: Path) -> None: ...
    def start(self, cluster: Any) -> None: ...
    def stop(self) -> Any: ...
    def apiserver_args(self, pki: PKI) -> list[str]: ...
    def controller_manager_args(self, pki: PKI, workdir: Path) -> list[str]: ...


class LocalCluster:
    def __init__(
        self,
        workdir: Path | None = None,
        *,
        bin_dir: Path | None = None,
        extender: bool = True,
        extender_args: Iterable[str] = (),
        keep_workdir: bool = False,
        scheduler_qps: float | None = None,
        scheduler_burst: int | None = None,
        leader_election: dict[str, str] | None = None,
        apiserver_args: Iterable[str] = (),
        extender_config: dict[str, Any] | None = None,
        mode: str = "second-scheduler",
        real_node: RealNode | None = None,
        gate_admission: bool = True,
    ) -> None:
        if isinstance(real_node, bool):  # a flag cannot make one: the node is a test harness, outside the package
            raise TypeError(
                "real_node takes a node, not a flag: tests/realnode/harness's RealNode() (needs root and "
                "hack/realnode/install.sh's packages; `REALNODE=1 make test` runs the real-node tests)"
            )
        self.owns_workdir = workdir is None and not keep_workdir  # a temp dir we remove on stop
        self._sigterm = SigtermAsInterrupt()  # a SIGTERM to the harness stops the plane, as Ctrl-C does
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix=WORKDIR_PREFIX))
        self.bin_dir = bin_dir
        self.with_extender = extender
        self.extender_args = list(extender_args)
        # Both kube-schedulers' client rate limit (KubeSchedulerConfiguration clientConnection
        # qps/burst). None keeps kube-scheduler's own default (50 QPS, burst 100), as deployed.
        self.scheduler_qps = scheduler_qps
        self.scheduler_burst = scheduler_burst
        # Our kube-scheduler's lease timing (leaseDuration, renewDeadline, retryPeriod), merged into
        # config/scheduler-config.yaml's leaderElection; None keeps kube-scheduler's (15s/10s/2s).
        self.leader_election = dict(leader_election or {})
        self.apiserver_args = list(apiserver_args)  # appended to kube-apiserver's flags
        # Merged into config/scheduler-config.yaml's extender stanza, e.g. {"nodeCacheCapable": False}.
        self.extender_config = dict(extender_config or {})
        # "second-scheduler": a kube-scheduler of our own (schedulerName placement-scheduler) beside
        # the default one; "in-scheduler": the default kube-scheduler itself calls the extender for
        # the pods requesting the opt-in resource (config/in-scheduler/scheduler-config.yaml);
        # "both": the two at once, one extender, as while workloads move from one mode to the other.
        if mode not in ("second-scheduler", "in-scheduler", "both"):
            raise ValueError(f"mode must be second-scheduler, in-scheduler or both, not {mode!r}")
        self.mode = mode
        # In-scheduler mode: the install's MutatingAdmissionPolicy that creates every opted-in pod
        # held by the placeable gate (deploy/components/placeable-gate), where the API server serves
        # it (1.36+), as deploy/overlays/in-scheduler installs it. False: as on 1.34 and 1.35.
        self.gate_admission = gate_admission
        # A real kubelet and kube-proxy on this machine (RealNode) beside kwok's fake nodes: the API
        # server then serves on its bridge, every default controller runs, and deploy/ (applied by the
        # test) runs the extender and our kube-scheduler as pods, so the harness starts neither.
        self.real_node = real_node
        self.processes: list[Process] = []
        self.ports: dict[str, int] = {}
        self.admin: Api | None = None
        self.kubeconfig = self.workdir / "admin.kubeconfig"
        self.log_dir = self.workdir / "logs"

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> LocalCluster:
        self._sigterm.install()
        try:
            self.start()
        except BaseException:
            self.stop()
            self._sigterm.restore()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.stop()
        finally:
            self._sigterm.restore()

    def start(self) -> None:
        started = time.monotonic()
        self.bin_dir = self.bin_dir or kube_binaries()
        node = self.real_node
        if node is not None:
            node.prepare(self.log_dir)  # before the API server: it serves on the node's bridge
            if self.owns_workdir and node.state is not None:
                node.state.owns(self.workdir)  # a crashed harness's restore removes it too
        self.pki = PKI(self.workdir / "pki")
        self.pki.create(node.serving_ips if node else ())
        self.ports = {
            name: free_port()
            for name in ("etcd", "etcd-peer", "apiserver", "kcm", "scheduler", "placement", "extender")
        }
        self.address = node.address if node else "127.0.0.1"
        self.server = f"https://{self.address}:{self.ports['apiserver']}"
        admin = self.pki.client("admin", "placement-e2e-admin", "system:masters")
        self._write_kubeconfig(self.kubeconfig, admin)
        self.admin = Api(self.server, str(self.pki.ca_cert), str(admin.cert), str(admin.key))

        self._start_etcd()
        self._start_apiserver()
        kcm = self._write_kubeconfig(
            self.workdir / "kcm.kubeconfig", self.pki.client("kcm", "system:kube-controller-manager")
        )
        sched = self._write_kubeconfig(
            self.workdir / "scheduler.kubeconfig", self.pki.client("scheduler", "system:kube-scheduler")
        )
        self._start_controller_manager(kcm)
        self._start_default_scheduler(sched)
        stages = self.workdir / "kwok-stages.yaml"
        stages.write_text(kwok_stages(self.bin_dir))
        # Beside a real node, kwok manages only its own (NodeSpec's annotation), never the kubelet's.
        managed = (
            "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake" if node else "--manage-all-nodes=true"
        )
        self._spawn("kwok", [self._bin("kwok"), f"--kubeconfig={self.kubeconfig}", managed, f"--config={stages}"])
        self._bootstrap_objects()
        if node is not None:
            node.start(self)
        elif self.with_extender:
            self.start_extender()
        if self.mode in ("second-scheduler", "both") and node is None:
            self._start_placement_scheduler(self.service_account_kubeconfig("placement-scheduler"))
        log.info("control plane up in %.1fs (workdir %s)", time.monotonic() - started, self.workdir)

    def stop(self) -> None:
        try:
            if self.real_node is not None:
                self.real_node.stop()  # first: its pods and containerd go, and the host is given back
        finally:  # whatever the node's stop raised, the control plane stops and its workdir goes
            self._stop_control_plane()

    def _stop_control_plane(self) -> None:
        # Every client of the API server at once (told together, they stop in the time of the
        # slowest), then the API server, then etcd: a kube-scheduler told to stop after its API
        # server has gone waits 5 s for it.
        store = [p for p in self.processes if p.name in ("kube-apiserver", "etcd")]
        clients = [p for p in reversed(self.processes) if p not in store]
        for process in clients:
            process.signal_stop()
        for process in clients:
            process.stop()
        for process in reversed(store):
            process.stop(timeout=0.5)  # nothing of a throwaway control plane is kept: no need to drain
        self.processes.clear()
        if self.owns_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def alive(self) -> list[str]:
        return [p.name for p in self._all_processes() if p.alive]

    def logs(self) -> dict[str, str]:
        return {p.name: p.tail(200) for p in self._all_processes()}

    def _all_processes(self) -> list[Process]:
        return self.processes + (self.real_node.processes if self.real_node else [])

    # ------------------------------------------------------------------ components
    def _bin(self, name: str) -> str:
        assert self.bin_dir is not None
        return str(self.bin_dir / name)

    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> Process:
        process = Process(name, argv, self.log_dir, env)
        process.start()
        self.processes.append(process)
        node = self.real_node
        if node is not None and node.state is not None and process.popen is not None:
            # Recorded with the node's own: after a crashed harness, the restore stops these too
            # (each runs in its own session, so nothing else would).
            node.state.started(f"control-plane {name}", process.popen.pid)
        return process

    def _write_kubeconfig(self, path: Path, client: ClientCert) -> Path:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": "local", "cluster": {"server": self.server, "certificate-authority": str(self.pki.ca_cert)}}
            ],
            "users": [
                {"name": "user", "user": {"client-certificate": str(client.cert), "client-key": str(client.key)}}
            ],
            "contexts": [{"name": "local", "context": {"cluster": "local", "user": "user"}}],
            "current-context": "local",
        }
        path.write_text(yaml.safe_dump(config))
        return path

    def _start_etcd(self) -> None:
        port, peer = self.ports["etcd"], self.ports["etcd-peer"]
        proc = self._spawn(
            "etcd",
            [
                self._bin("etcd"),
                f"--data-dir={self.workdir / 'etcd'}",
                "--name=default",
                f"--listen-client-urls=http://127.0.0.1:{port}",
                f"--advertise-client-urls=http://127.0.0.1:{port}",
                f"--listen-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-cluster=default=http://127.0.0.1:{peer}",
                "--unsafe-no-fsync",
                # One member: it elects itself after one election timeout (1 s by default, most of
                # etcd's start); 100 ms with a 20 ms heartbeat (etcd asks for at least 5x).
                "--heartbeat-interval=20",
                "--election-timeout=100",
                "--log-level=warn",
            ],
        )
        self._await(
            proc,
            "etcd health",
            lambda: requests.get(f"http://127.0.0.1:{port}/health", timeout=2).json().get("health") == "true",
        )

    def _start_apiserver(self) -> None:
        pki, node = self.pki, self.real_node
        proc = self._spawn(
            "kube-apiserver",
            [
                self._bin("kube-apiserver"),
                f"--etcd-servers=http://127.0.0.1:{self.ports['etcd']}",
                f"--secure-port={self.ports['apiserver']}",
                f"--bind-address={self.address}",
                f"--advertise-address={self.address}",
                f"--tls-cert-file={pki.serving_cert}",
                f"--tls-private-key-file={pki.serving_key}",
                f"--client-ca-file={pki.ca_cert}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={pki.sa_pub}",
                f"--service-account-signing-key-file={pki.sa_key}",
                f"--service-cluster-ip-range={node.service_range if node else '10.96.0.0/16'}",
                "--authorization-mode=Node,RBAC",
                "--enable-priority-and-fairness=false",
                # a real node's pods reach the API server through the `kubernetes` Service's endpoints
                f"--endpoint-reconciler-type={'lease' if node else 'none'}",
                # kwok nodes are Ready from birth and no node-lifecycle controller runs to lift the
                # not-ready taint this plugin would put on every new node.
                "--disable-admission-plugins=TaintNodesByCondition",
                *(node.apiserver_args(pki) if node else ()),
                *self.apiserver_args,
            ],
        )
        assert self.admin is not None
        self._await(
            proc,
            "kube-apiserver /readyz",
            lambda: self.admin.session.get(self.server + "/readyz", timeout=2).status_code == 200,
            90,
        )

    def _start_controller_manager(self, kubeconfig: Path) -> None:
        controllers = ",".join(
            [
                "statefulset-controller",
                "persistentvolume-binder-controller",
                "garbage-collector-controller",
                "serviceaccount-controller",
                "serviceaccount-token-controller",
                "namespace-controller",
                "replicaset-controller",
                "deployment-controller",
                "pod-garbage-collector-controller",
                "root-ca-certificate-publisher-controller",
                "persistentvolumeclaim-protection-controller",
                "persistentvolume-protection-controller",
            ]
        )
        if self.real_node:  # every default one (node lifecycle, endpoints, ...), as a real cluster runs
            controllers = "*"
        self._spawn(
            "kube-controller-manager",
            [
                self._bin("kube-controller-manager"),
                f"--kubeconfig={kubeconfig}",
                "--leader-elect=false",
                f"--controllers={controllers}",
                f"--service-account-private-key-file={self.pki.sa_key}",
                f"--root-ca-file={self.pki.ca_cert}",
                f"--secure-port={self.ports['kcm']}",
                "--bind-address=127.0.0.1",
                "--concurrent-statefulset-syncs=10",
                "--use-service-account-credentials=true",
                *(self.real_node.controller_manager_args(self.pki, self.workdir) if self.real_node else ()),
            ],
        )

    def _client_connection(self, kubeconfig: Path) -> dict[str, Any]:
        connection: dict[str, Any] = {"kubeconfig": str(kubeconfig)}
        if self.scheduler_qps is not None:
            connection["qps"] = self.scheduler_qps
        if self.scheduler_burst is not None:
            connection["burst"] = self.scheduler_burst
        return connection

    def _start_default_scheduler(self, kubeconfig: Path) -> None:
        """The default kube-scheduler: flags only, as ever, unless a client rate limit is asked
        for; then a KubeSchedulerConfiguration of its own carries clientConnection qps/burst."""
        argv = [self._bin("kube-scheduler")]
        if self.mode in ("in-scheduler", "both"):
            config = yaml.safe_load(IN_SCHEDULER_CONFIG.read_text())
            config["clientConnection"] = self._client_connection(kubeconfig)
            extender = config["extenders"][0]
            extender["urlPrefix"] = f"http://127.0.0.1:{self.ports['extender']}"  # loopback: no TLS here
            extender["enableHTTPS"] = False
            extender.pop("tlsConfig", None)
            extender.update(self.extender_config)
            path = self.workdir / "kube-scheduler.yaml"
            path.write_text(yaml.safe_dump(config))
            argv.append(f"--config={path}")
        elif self.scheduler_qps is None and self.scheduler_burst is None:
            argv += [f"--kubeconfig={kubeconfig}", "--leader-elect=false"]
        else:
            config = {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "leaderElection": {"leaderElect": False},
                "clientConnection": self._client_connection(kubeconfig),
            }
            path = self.workdir / "kube-scheduler.yaml"
            path.write_text(yaml.safe_dump(config))
            argv.append(f"--config={path}")
        argv += [f"--secure-port={self.ports['scheduler']}", "--bind-address=127.0.0.1"]
        self._spawn("kube-scheduler", argv)

    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        """The pinned kubectl against this control plane, as admin."""
        return subprocess.run(
            [self._bin("kubectl"), f"--kubeconfig={self.kubeconfig}", *args],
            input=input,
            capture_output=True,
            text=True,
            check=check,
        )

    def _bootstrap_objects(self) -> None:
        api = self.admin
        assert api is not None
        # The shipped namespace, CRD and RBAC, exactly as `kubectl apply -k deploy/` would create them:
        # the extender and our scheduler then run under deploy/'s ServiceAccounts, proving the RBAC.
        base = REPO / "deploy" / "base"
        self.kubectl(
            "apply",
            "-f",
            str(base / "namespace.yaml"),
            "-f",
            str(base / "crd.yaml"),
            "-f",
            str(base / "crd-zonerotation.yaml"),
            "-f",
            str(base / "rbac.yaml"),
            "-f",
            str(base / "admission.yaml"),
            "-f",
            str(base / "flowschema.yaml"),
        )
        if self.mode != "second-scheduler" and self.gate_admission and serves_gate_admission(api):
            self.kubectl("apply", "-f", str(GATE_ADMISSION))
            # The API server starts applying a new admission policy once its informer has it: a
            # loaded machine's first pods created right after the apply came without the gate (21 of
            # 40 in one run). A dry-run create shows when it is in force.
            wait_for("the placeable gate's admission policy in force", lambda: _gates_a_new_pod(api), 30)
        api.ensure(
            "/apis/storage.k8s.io/v1/storageclasses",
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "StorageClass",
                "metadata": {"name": STORAGE_CLASS},
                "provisioner": "kubernetes.io/no-provisioner",
                "volumeBindingMode": "WaitForFirstConsumer",
            },
        )
        wait_for(
            "the PlacementPolicy CRD to be served",
            lambda: api.get("/apis/placement.extender.dev/v1alpha1/placementpolicies") is not None,
            30,
        )
        wait_for(
            "the ZoneRotation CRD to be served",
            lambda: api.get("/apis/placement.extender.dev/v1alpha1/zonerotations") is not None,
            30,
        )

    def service_account_kubeconfig(
        self, name: str, namespace: str = SYSTEM_NAMESPACE, *, component: str | None = None
    ) -> Path:
        """A kubeconfig holding a fresh token (TokenRequest) of a ServiceAccount, and nothing else,
        written to <component or name>.kubeconfig (each process its own token, as each container
        mounts its own projected token in deploy/)."""
        api = self.admin
        assert api is not None
        review = api.create(
            f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 86400}},
        )
        path = self.workdir / f"{component or name}.kubeconfig"
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": "local", "cluster": {"server": self.server, "certificate-authority": str(self.pki.ca_cert)}}
            ],
            "users": [{"name": name, "user": {"token": review["status"]["token"]}}],
            "contexts": [{"name": "local", "context": {"cluster": "local", "user": name}}],
            "current-context": "local",
        }
        path.write_text(yaml.safe_dump(config))
        return path

    def start_extender(
        self, extra_args: Iterable[str] = (), *, name: str = "extender", wait_ready: bool = True
    ) -> Process:
        """An extender on port `self.ports[name]` (the second pair's is "extender-2"). With
        wait_ready=False it returns once the process is spawned, as a restarted container is
        called by its kube-scheduler as soon as it listens, before its cache has synced."""
        port = self.ports[name]
        # the pod's one identity, as deploy/ runs it (the kube-scheduler beside it uses it too)
        kubeconfig = self.service_account_kubeconfig("placement-scheduler", component=f"placement-{name}")
        proc = self._spawn(
            name,
            [
                sys.executable,
                "-m",
                "extender",
                "--log-level",
                os.environ.get("EXTENDER_LOG_LEVEL", "info"),
                "serve",
                f"--listen=127.0.0.1:{port}",
                f"--kubeconfig={kubeconfig}",
                # as deploy/overlays/in-scheduler runs it: a decision ends well within the stanza's 100 ms
                *([f"--decision-deadline={IN_SCHEDULER_DECISION_DEADLINE}"] if self.mode != "second-scheduler" else []),
                *self.extender_args,
                *extra_args,
            ],
            env={"PYTHONPATH": str(REPO)},
        )
        if not wait_ready:
            return proc
        self._await(
            proc,
            "extender /readyz",
            lambda: requests.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200,
            60,
        )
        return proc

    def extender_process(self, name: str = "extender") -> Process | None:
        return self.process(name)

    def process(self, name: str) -> Process | None:
        """The live process of that name (the latest started), else the latest that ran."""
        named = [p for p in self.processes if p.name == name]
        return next((p for p in reversed(named) if p.alive), named[-1] if named else None)

    def _start_placement_scheduler(
        self, kubeconfig: Path, *, name: str = "placement-scheduler", extender: str = "extender"
    ) -> Process:
        config = yaml.safe_load(SCHEDULER_CONFIG.read_text())
        config["clientConnection"] = self._client_connection(kubeconfig)
        config["leaderElection"].update(self.leader_election)
        config["extenders"][0]["urlPrefix"] = f"http://127.0.0.1:{self.ports[extender]}"
        config["extenders"][0].update(self.extender_config)
        self.adjust_extender_config(config["extenders"][0])
        path = self.workdir / f"{name}.yaml"
        path.write_text(yaml.safe_dump(config))
        port = self.ports.setdefault(name, free_port()) if name != "placement-scheduler" else self.ports["placement"]
        proc = self._spawn(
            name,
            [self._bin("kube-scheduler"), f"--config={path}", f"--secure-port={port}", "--bind-address=127.0.0.1"],
        )
        assert self.admin is not None
        wait_for("the placement scheduler's leader lease", lambda: self._lease_held(), 60)
        return proc

    # ------------------------------------------------------------------ faults
    # Which extender each of our kube-schedulers calls: a replica of deploy/ is one such pair.
    PAIRS = {"placement-scheduler": "extender", "placement-scheduler-2": "extender-2"}

    def start_standby(self) -> None:
        """A second kube-scheduler + extender pair on the same leader lease, as deploy/ runs two
        replicas: the extender syncs its cache (warm), the scheduler waits for the lease."""
        assert self.with_extender, "a standby pair needs the extender"
        self.ports.setdefault("extender-2", free_port())
        self.start_extender(name="extender-2")
        standby = self._start_placement_scheduler(
            self.service_account_kubeconfig("placement-scheduler", component="placement-scheduler-2"),
            name="placement-scheduler-2",
            extender="extender-2",
        )
        self._await(
            standby,
            "the standby scheduler to contend for the lease",
            lambda: "attempting to acquire leader lease" in standby.log_path.read_text(errors="replace").lower(),
        )

    def leader(self) -> str | None:
        """Which of our live kube-schedulers holds the lease (kube-scheduler logs "Successfully
        acquired lease" when it takes it; a standby that never took it has no such line)."""
        holders = [
            name
            for name in self.PAIRS
            if (proc := self.process(name)) is not None
            and proc.alive
            and "successfully acquired lease" in proc.log_path.read_text(errors="replace").lower()
        ]
        assert len(holders) <= 1, f"more than one live scheduler took the lease: {holders}"
        return holders[0] if holders else None

    def kill(self, name: str) -> None:
        """SIGKILL a component (its whole process group): a crash or a lost node, no clean exit."""
        proc = self.process(name)
        assert proc is not None and proc.alive, f"{name} is not running"
        proc.kill()

    def stop_apiserver(self) -> None:
        """Stop kube-apiserver (SIGTERM: its graceful shutdown, as a restart or upgrade does)."""
        proc = self.process("kube-apiserver")
        assert proc is not None
        proc.stop()

    def start_apiserver(self) -> None:
        """Start kube-apiserver again on the same port and etcd; returns once it is ready."""
        self._start_apiserver()

    def etcd_compact(self) -> int:
        """Compact etcd's history up to its current revision (etcd's maintenance API through its
        HTTP gateway, as `etcdctl compact` does): watches resuming from an older revision get
        410 Gone from then on. Returns the revision."""
        base = f"http://127.0.0.1:{self.ports['etcd']}/v3"
        header = requests.post(f"{base}/kv/range", json={"key": "AA=="}, timeout=10).json()["header"]
        revision = int(header["revision"])
        answer = requests.post(f"{base}/kv/compaction", json={"revision": revision, "physical": True}, timeout=30)
        answer.raise_for_status()
        return revision

    def adjust_extender_config(self, extender: dict[str, Any]) -> None:
        """A hook for harnesses that serve another extender (benchmarks/cluster.py's Go floor)."""

    def _lease_held(self) -> bool:
        assert self.admin is not None
        for p in self.processes:
            p.check()
        lease = self.admin.get(f"/apis/coordination.k8s.io/v1/namespaces/{SYSTEM_NAMESPACE}/leases/{SCHEDULER_NAME}")
        return bool((lease.get("spec") or {}).get("holderIdentity"))

    def _await(self, proc: Process, what: str, probe, timeout: float = 60) -> None:
        def checked():
            proc.check()
            return probe()

        wait_for(what, checked, timeout)

    # ------------------------------------------------------------------ fixtures of the cluster
    def add_nodes(self, nodes: Iterable[NodeSpec], *, wait_ready: bool = True) -> list[str]:
        api = self.admin
        assert api is not None
        names = []
        for node in nodes:
            api.ensure("/api/v1/nodes", node.manifest())
            names.append(node.name)
        if wait_ready:

            def ready() -> bool:
                items = {n["metadata"]["name"]: n for n in api.list("/api/v1/nodes")}
                return all(_node_ready(items.get(name)) for name in names)

            wait_for(f"{len(names)} nodes Ready (kwok)", ready, 60)
        return names

    def add_zonal_volumes(self, zone: str, count: int, *, prefix: str | None = None, size: str = "10Gi") -> list[str]:
        """Static PVs pinned to a zone, for the WaitForFirstConsumer storage class."""
        api = self.admin
        assert api is not None
        names = []
        for i in range(count):
            name = f"{prefix or 'pv-' + zone}-{i}"
            api.ensure(
                "/api/v1/persistentvolumes",
                {
                    "apiVersion": "v1",
                    "kind": "PersistentVolume",
                    "metadata": {"name": name, "labels": {ZONE: zone}},
                    "spec": {
                        "capacity": {"storage": size},
                        "accessModes": ["ReadWriteOnce"],
                        "storageClassName": STORAGE_CLASS,
                        "persistentVolumeReclaimPolicy": "Retain",
                        "hostPath": {"path": f"/tmp/{name}"},
                        "nodeAffinity": {
                            "required": {
                                "nodeSelectorTerms": [
                                    {"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]}
                                ]
                            }
                        },
                    },
                },
            )
            names.append(name)
        return names

    def namespace(self, name: str) -> str:
        api = self.admin
        assert api is not None
        api.ensure("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        wait_for(
            f"default ServiceAccount in {name}",
            lambda: api.get(f"/api/v1/namespaces/{name}/serviceaccounts/default"),
            30,
        )
        return name

    def keep_logs(self, destination: Path) -> Path:
        destination.mkdir(parents=True, exist_ok=True)
        for path in self.log_dir.glob("*.log"):
            shutil.copy(path, destination / path.name)
        return destination

    def describe(self) -> str:
        return json.dumps(
            {
                "workdir": str(self.workdir),
                "kubeconfig": str(self.kubeconfig),
                "server": self.server,
                "extender": f"http://127.0.0.1:{self.ports.get('extender')}",
            },
            indent=2,
        )


def _node_ready(node: dict[str, Any] | None) -> bool:
    if node is None:
        return False
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (node.get("status") or {}).get("conditions") or ()
    )
