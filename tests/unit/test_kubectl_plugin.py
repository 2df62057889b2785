"""`kubectl placement …` (extender/cli/kubectl_plugin.py): kubectl's flags become the CLI's arguments."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from extender.cli import kubectl_plugin


@pytest.fixture
def kubeconfig(tmp_path: Path) -> str:
    path = tmp_path / "config"
    cluster = {"name": "c", "cluster": {"server": "https://127.0.0.1:6443"}}
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [cluster],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [
                    {"name": "dev", "context": {"cluster": "c", "user": "u", "namespace": "db"}},
                    {"name": "prod", "context": {"cluster": "c", "user": "u", "namespace": "redis"}},
                    {"name": "bare", "context": {"cluster": "c", "user": "u"}},
                ],
                "current-context": "dev",
            }
        )
    )
    return str(path)


CASES = [
    # plugin arguments, CLI arguments (KC stands for --kubeconfig=<the fixture's file>)
    (["explain", "crdb-4"], ["explain", "db/crdb-4", "KC"]),
    (["explain", "pod/crdb-4", "-n", "other"], ["explain", "other/crdb-4", "KC"]),
    (["explain", "ns1/crdb-4", "-o", "json"], ["explain", "ns1/crdb-4", "KC", "--json"]),
    (["explain", "crdb-4", "--context", "prod"], ["explain", "redis/crdb-4", "KC", "--context=prod"]),
    (["explain", "crdb-4", "--context", "bare"], ["explain", "default/crdb-4", "KC", "--context=bare"]),
    (["audit"], ["audit", "-n", "db", "KC"]),
    (["audit", "-A", "-o", "json"], ["audit", "KC", "--json"]),
    (["audit", "--namespace", "x", "--context", "prod"], ["audit", "-n", "x", "KC", "--context=prod"]),
    (["translate", "statefulset/crdb"], ["translate", "statefulset/crdb", "-n", "db", "KC"]),
    (
        ["translate", "statefulset/crdb", "--size", "5", "--json"],
        ["translate", "statefulset/crdb", "-n", "db", "KC", "--size", "5", "--json"],
    ),
    (["check", "policy.yaml"], ["check", "policy.yaml"]),
    (
        ["adopt", "sts/crdb", "--policy-name", "crdb", "--dry-run"],
        ["adopt", "sts/crdb", "-n", "db", "KC", "--policy-name", "crdb", "--dry-run"],
    ),
    (["retire", "statefulset/crdb", "-n", "x"], ["retire", "statefulset/crdb", "-n", "x", "KC"]),
    (
        ["plan", "statefulset/crdb", "--replicas", "12", "-o", "json"],
        ["plan", "statefulset/crdb", "-n", "db", "KC", "--json", "--replicas", "12"],
    ),
    (["plan", "drain", "node/a1", "node/b1"], ["plan", "drain", "node/a1", "node/b1", "-n", "db", "KC"]),
    (["rotation", "export", "sts/crdb"], ["rotation", "export", "sts/crdb", "-n", "db", "KC"]),
    (["rotation", "export", "sts/crdb", "-n", "x"], ["rotation", "export", "sts/crdb", "-n", "x", "KC"]),
]


@pytest.mark.parametrize("plugin,expected", CASES, ids=[" ".join(c[0]) for c in CASES])
def test_kubectl_flags_become_the_cli_arguments(kubeconfig: str, plugin: list[str], expected: list[str]) -> None:
    args, rest = kubectl_plugin.parser().parse_known_args(
        [*plugin, *(["--kubeconfig", kubeconfig] if plugin[0] != "check" else [])]
    )
    want = [f"--kubeconfig={kubeconfig}" if a == "KC" else a for a in expected]
    assert kubectl_plugin.cli_arguments(args, rest) == want


def test_every_produced_command_is_one_the_cli_accepts(kubeconfig: str) -> None:
    from extender.cli.commands import parser

    for plugin, _ in CASES:
        extra = ["--kubeconfig", kubeconfig] if plugin[0] != "check" else []
        args, rest = kubectl_plugin.parser().parse_known_args([*plugin, *extra])
        parser().parse_args(kubectl_plugin.cli_arguments(args, rest))  # exits on an unknown option


def test_without_a_kubeconfig_the_namespace_is_default(tmp_path: Path) -> None:
    assert kubectl_plugin.context_namespace(str(tmp_path / "missing"), None) == "default"


def test_check_runs_through_the_cli(tmp_path: Path, capsys) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text("caps:\n- topologyKey: kubernetes.io/hostname\n  max: 1\n")
    assert kubectl_plugin.main(["check", str(policy)]) == 0
    bad = tmp_path / "bad.yaml"
    bad.write_text("caps:\n- topologyKey: kubernetes.io/hostname\n")
    assert kubectl_plugin.main(["check", str(bad)]) != 0


@pytest.mark.parametrize(
    ("argv", "level"),
    [
        (["plan", "statefulset/db", "--replicas", "3"], "warning"),
        (["plan", "statefulset/db", "--replicas", "3", "-v"], "info"),
        (["audit", "-vv"], "debug"),
        (["explain", "ns/pod"], "warning"),
        (["translate", "-"], "warning"),
        (["check", "-"], "warning"),
        (["adopt", "statefulset/db", "--policy-name", "p"], "warning"),
        (["--log-level", "info", "audit"], "info"),
        (["serve"], "info"),
        (["--log-level", "warning", "serve"], "warning"),
    ],
)
def test_operator_commands_log_only_warnings_unless_asked(argv: list[str], level: str, monkeypatch) -> None:
    """An operator command prints its answer and nothing else: the cache's progress lines are -v's."""
    from extender.cli.commands import log_level, parser

    monkeypatch.delenv("EXTENDER_LOG_LEVEL", raising=False)
    assert log_level(parser().parse_args(argv)) == level
    monkeypatch.setenv("EXTENDER_LOG_LEVEL", "debug")  # the server's variable: the operator commands keep quiet
    assert log_level(parser().parse_args(argv)) == (level if argv[0] != "serve" else "debug")


def test_adopt_parses_every_option_its_function_takes() -> None:
    """The CLI's adopt passes mode and node pool through (a missing flag once broke every adopt)."""
    from extender.cli.commands import parser
    from extender.cli.workloads import _node_pool

    args = parser().parse_args(
        ["adopt", "statefulset/db", "--policy-name", "p", "--mode", "in-scheduler", "--node-pool", "pool=db"]
    )
    assert (args.mode, _node_pool(args.node_pool)) == ("in-scheduler", ("pool", "db"))
    plain = parser().parse_args(["adopt", "statefulset/db", "--policy-name", "p"])
    assert (plain.mode, plain.node_pool) == ("second-scheduler", None)
    with pytest.raises(ValueError, match="KEY=VALUE"):
        _node_pool("pool")


def test_adopts_help_lists_adopts_own_options(capsys) -> None:  # noqa: ANN001
    """`kubectl placement adopt --help` showed none of adopt's options."""
    import pytest

    from extender.cli.kubectl_plugin import main

    with pytest.raises(SystemExit) as done:
        main(["adopt", "--help"])
    out = capsys.readouterr().out
    assert done.value.code == 0
    assert all(option in out for option in ("--policy-name", "--mode", "--dry-run", "--filename", "--output")), out
