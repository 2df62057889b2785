"""Every operator command fails like kubectl: one line on stderr saying what to do, the
documented exit code (extender/cli/exit_codes.py), never a traceback.

A table over each operator command (through `python -m extender`, and audit also through the
kubectl plugin) x each condition, run as an operator runs it, against this control plane:

- no kubeconfig: KUBECONFIG unset, an empty HOME (no ~/.kube/config), no in-cluster credentials;
- the API server down: a kubeconfig naming a loopback port nothing listens on;
- forbidden: a ServiceAccount token with no role at all, from the real API server;
- a closed pipe: the reader of stdout gone before the command prints (`... | head`).

The first three exit 3 ("could not run"), the closed pipe 141 quietly; a command that did run
still exits 0 or 1 as before (test_operations.py).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from extender.cli.exit_codes import ExitCode
from extender.devcluster.api import wait_for
from extender.devcluster.cluster import zoned_nodes

from .workloads import create_statefulset, pods, statefulset

pytestmark = pytest.mark.e2e

NS = "cli-failures"
POLICY = {"caps": [{"topologyKey": "kubernetes.io/hostname", "max": 2}]}
COMMANDS = {
    "audit": ["audit", "-n", NS],
    "explain": ["explain", "web-0", "-n", NS],
    "plan grow": ["plan", "statefulset/web", "--replicas", "4", "-n", NS],
    "plan drain": ["plan", "drain", "--all"],
    "translate": ["translate", "statefulset/web", "-n", NS],
    "adopt --dry-run": ["adopt", "statefulset/web", "-n", NS, "--policy-file", "POLICY_FILE", "--dry-run"],
    "retire --dry-run": ["retire", "statefulset/web", "-n", NS, "--dry-run"],
    "kubectl placement audit": ["PLUGIN", "audit", "-n", NS],
}
CONDITIONS = ("no kubeconfig", "API server down", "forbidden", "closed pipe")
SAYS = {"no kubeconfig": "kubeconfig", "API server down": "cannot reach the API server", "forbidden": "forbidden"}


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _kubeconfig(path: Path, server: str, ca: str, token: str | None = None) -> Path:
    user: dict = {"token": token} if token else {}
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server, "certificate-authority": ca}}],
                "users": [{"name": "u", "user": user}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return path


@pytest.fixture(scope="module")
def setting(cluster, tmp_path_factory):  # noqa: ANN001, ANN201
    """The workload the commands name, and a kubeconfig (or none) per condition."""
    api = cluster.admin
    tmp = tmp_path_factory.mktemp("cli-failures")
    cluster.add_nodes(zoned_nodes({"cf-a": 2}, prefix="cf"))
    ns = cluster.namespace(NS)
    create_statefulset(api, ns, statefulset("web", 2, policy=POLICY))
    wait_for("web's 2 pods placed", lambda: len([p for p in pods(api, ns) if p["spec"].get("nodeName")]) == 2, 120)
    api.create(f"/api/v1/namespaces/{ns}/serviceaccounts", {"metadata": {"name": "nobody"}})
    token = api.create(
        f"/api/v1/namespaces/{ns}/serviceaccounts/nobody/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}},
    )["status"]["token"]
    ca = api.session.verify
    policy_file = tmp / "policy.json"
    policy_file.write_text(json.dumps(POLICY))
    return {
        "home": tmp,
        "policy_file": str(policy_file),
        "no kubeconfig": None,
        "API server down": _kubeconfig(tmp / "down", f"https://127.0.0.1:{_closed_port()}", ca),
        "forbidden": _kubeconfig(tmp / "forbidden", api.server, ca, token),
        "closed pipe": cluster.kubeconfig,
    }


def _argv(name: str, setting: dict) -> list[str]:
    argv = [setting["policy_file"] if a == "POLICY_FILE" else a for a in COMMANDS[name]]
    if argv[0] == "PLUGIN":
        return [str(Path(sys.executable).parent / "kubectl-placement"), *argv[1:]]
    return [sys.executable, "-m", "extender", *argv]


@pytest.mark.parametrize("condition", CONDITIONS)
@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_command_that_cannot_run_says_what_to_do_in_one_line(setting, name: str, condition: str) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(setting["home"]), "LANG": "C.UTF-8"}
    if setting[condition] is not None:
        env["KUBECONFIG"] = str(setting[condition])
    if condition == "closed pipe":
        proc = subprocess.Popen(_argv(name, setting), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()  # the reader is gone before the command prints anything
        err = proc.stderr.read().decode()
        code = proc.wait(timeout=120)
        assert "Traceback" not in err and "BrokenPipe" not in err, err
        assert code == ExitCode.CLOSED_PIPE, (code, err)
        return
    done = subprocess.run(_argv(name, setting), capture_output=True, text=True, env=env, timeout=120)
    lines = done.stderr.strip().splitlines()
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == ExitCode.COULD_NOT_RUN, (done.returncode, done.stderr)
    assert len(lines) == 1 and SAYS[condition] in lines[0], done.stderr
