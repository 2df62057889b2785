"""The operator commands' expected failures: one line and the documented exit code
(extender/cli/errors.py, exit_codes.py), never a traceback. The same over a live control plane,
command by command: tests/e2e/test_cli_failures.py."""

from __future__ import annotations

import subprocess
import sys

import pytest
import requests
import yaml
from hypothesis import given
from hypothesis import strategies as st
from kubernetes.config import ConfigException

from extender.api.policy import PolicyError
from extender.cli.commands import main
from extender.cli.errors import UsageError, explained
from extender.cli.exit_codes import EXIT_CODES, ExitCode
from extender.kube.client import KubeApiError

CASES = [
    # (id, the error, exit code, words in the line)
    ("no kubeconfig", ConfigException("Invalid kube-config file. No configuration found."), 3, "KUBECONFIG"),
    ("unauthorized", KubeApiError(401, "Unauthorized", ""), 3, "credentials"),
    ("forbidden", KubeApiError(403, "Forbidden", "pods is forbidden"), 3, "forbidden"),
    ("not found", KubeApiError(404, "NotFound", 'statefulsets "x" not found'), 3, "not found"),
    ("conflict", KubeApiError(409, "Conflict", "the object has been modified"), 3, "run the command again"),
    ("server error", KubeApiError(500, "InternalError", "etcd"), 3, "500"),
    ("connection refused", requests.ConnectionError("Connection refused"), 3, "cannot reach the API server"),
    ("timeout", requests.Timeout("read timed out"), 3, "cannot reach the API server"),
    ("invalid policy", PolicyError("caps.0: a cap takes exactly one of max or fraction"), 1, "caps.0"),
    ("not yaml", yaml.YAMLError("mapping values are not allowed here"), 1, "not YAML"),
    ("no such pod", LookupError("pod db/x not found"), 3, "db/x"),
    ("unreadable file", FileNotFoundError(2, "No such file or directory", "policy.yaml"), 3, "policy.yaml"),
    ("bad argument", UsageError("name the workload as statefulset/NAME"), 2, "statefulset/NAME"),
]


@pytest.mark.parametrize(("err", "code", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_expected_failure_is_one_line_and_its_code(err, code, words) -> None:  # noqa: ANN001
    found = explained(err)
    assert found is not None
    assert found[0] == code and words in found[1] and "\n" not in found[1], found


def test_a_bug_keeps_its_traceback() -> None:
    assert explained(RuntimeError("unexpected")) is None
    assert explained(KeyError("x")) is None, "a missing key is a bug, not a missing object"


@given(st.text(max_size=2000))
def test_any_api_message_stays_one_short_line(message: str) -> None:
    code, line = explained(KubeApiError(403, "Forbidden", message))  # type: ignore[misc]
    assert code == ExitCode.COULD_NOT_RUN and "\n" not in line and len(line) < 800


def test_every_code_is_documented() -> None:
    assert set(EXIT_CODES) == set(ExitCode)


def test_without_a_kubeconfig_audit_says_so_in_one_line(tmp_path, monkeypatch, capsys) -> None:  # noqa: ANN001
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    import kubernetes.config.kube_config as kube_config

    monkeypatch.setattr(kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(tmp_path / ".kube" / "config"))
    assert main(["audit"]) == ExitCode.COULD_NOT_RUN
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("audit: no usable kubeconfig"), err


def test_a_closed_pipe_is_quiet_and_exits_141(tmp_path) -> None:  # noqa: ANN001
    """`python -m extender check` (no cluster needed) with its reader gone before it prints."""
    policy = tmp_path / "p.yaml"
    policy.write_text("caps: [{topologyKey: kubernetes.io/hostname, max: 1}]\n")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; time.sleep(0.3); from extender.cli.commands import main; "
            f"raise SystemExit(main(['check', {str(policy)!r}]))",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == ExitCode.CLOSED_PIPE and "Traceback" not in err, err


def test_explain_takes_a_pod_with_n_as_well_as_namespace_slash_pod(monkeypatch, capsys) -> None:  # noqa: ANN001
    seen = []
    monkeypatch.setattr("extender.cli.inspection.live_store", lambda args: None)
    monkeypatch.setattr("extender.ops.explain.explain", lambda store, ns, name: seen.append((ns, name)) or _Result())
    monkeypatch.setattr("extender.ops.explain.render", lambda result: "")
    assert main(["explain", "crdb-0", "-n", "demo"]) == 0
    assert main(["explain", "demo/crdb-0"]) == 0
    assert main(["explain", "pod/crdb-0", "-n", "demo"]) == 0
    assert main(["explain", "crdb-0"]) == 0
    assert seen == [("demo", "crdb-0"), ("demo", "crdb-0"), ("demo", "crdb-0"), ("default", "crdb-0")]
    assert main(["explain", "demo/crdb-0", "-n", "other"]) == ExitCode.USAGE
    assert "explain takes POD -n NAMESPACE" in capsys.readouterr().err


class _Result:
    def as_dict(self) -> dict:
        return {}


@pytest.mark.parametrize("flag", ["--policy-name", "--policy-file"])
def test_adopt_refuses_an_empty_policy_source_as_a_usage_error(flag: str, tmp_path, capsys) -> None:  # noqa: ANN001
    """An empty --policy-name once fell through to reading a policy file named None: a traceback."""
    workload = tmp_path / "sts.yaml"
    workload.write_text(
        "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: db}\nspec:\n  replicas: 3\n"
        "  selector: {matchLabels: {app: db}}\n  template:\n    metadata: {labels: {app: db}}\n"
        "    spec: {containers: [{name: m, image: x}]}\n"
    )
    with pytest.raises(SystemExit) as exited:
        main(["adopt", "-f", str(workload), flag, "", "--offline"])
    err = capsys.readouterr().err
    assert exited.value.code == ExitCode.USAGE and "is empty" in err and "Traceback" not in err, err
