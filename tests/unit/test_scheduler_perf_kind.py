"""The scheduler_perf kind's rewriting of upstream's test cases per arm (benchmarks/kinds/scheduler_perf.py), on
a made-up upstream tree: no harness binary needed (tests/e2e/test_scheduler_perf.py runs the real one)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from benchmarks import workload
from benchmarks.kinds import scheduler_perf as sp

SPREAD = {"spread": [{"topologyKey": "topology.kubernetes.io/zone", "maxSkew": 5}]}
POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"generateName": "spreading-pod-", "labels": {"color": "blue"}},
    "spec": {
        "topologySpreadConstraints": [{"maxSkew": 5, "topologyKey": "topology.kubernetes.io/zone"}],
        "containers": [{"name": "pause", "image": "pause", "resources": {"requests": {"cpu": "100m"}}}],
    },
}
CASE = {
    "name": "TopologySpreading",
    "workloadTemplate": [
        {"opcode": "createNodes", "countParam": "$initNodes"},
        {"opcode": "createPods", "countParam": "$initPods", "podTemplatePath": "../templates/pod-default.yaml"},
        {
            "opcode": "createPods",
            "countParam": "$measurePods",
            "podTemplatePath": "../templates/pod-spread.yaml",
            "collectMetrics": True,
        },
    ],
    "workloads": [
        {"name": "5Nodes", "labels": ["integration-test"], "params": {"initNodes": 5}},
        {"name": "5000Nodes", "threshold": 460, "params": {"initNodes": 5000}},
    ],
}


@pytest.fixture
def upstream(tmp_path: Path) -> Path:
    data = tmp_path / "upstream"
    (data / "templates").mkdir(parents=True)
    (data / "templates" / "pod-spread.yaml").write_text(yaml.safe_dump(POD))
    (data / "templates" / "pod-default.yaml").write_text(yaml.safe_dump({**POD, "spec": {"containers": []}}))
    (data / "topology_spreading").mkdir()
    (data / "topology_spreading" / "performance-config.yaml").write_text(yaml.safe_dump([CASE]))
    batch = dict(CASE, name="HostPortConflict", schedulerConfigPath="scheduler-config-no-topology.yaml")
    (data / "batching").mkdir()
    (data / "batching" / "performance-config.yaml").write_text(yaml.safe_dump([batch]))
    (data / "batching" / "scheduler-config-no-topology.yaml").write_text(
        yaml.safe_dump({**sp.SCHEDULER_CONFIG, "profiles": [{"schedulerName": "default-scheduler"}]})
    )
    return data


def spec(**fields: object) -> workload.SchedPerfCase:
    base = {"family": "topology_spreading", "case": "TopologySpreading", "benchmark": "5000Nodes", "smoke": "5Nodes"}
    return workload.SchedPerfCase.model_validate(base | {"policy": SPREAD} | fields)


def written(cwd: Path) -> dict:
    return yaml.safe_load((cwd / "performance-config.yaml").read_text())[0]


def test_native_is_upstreams_case_with_one_workload_and_no_threshold(upstream: Path, tmp_path: Path) -> None:
    cwd, name = sp.write_case(tmp_path / "run", upstream, spec(), "5000Nodes", "shipped", "native", None)
    case = written(cwd)
    assert name == "5000Nodes" and case["workloads"] == [
        {"name": "5000Nodes", "params": {"initNodes": 5000}, "labels": ["performance"]}
    ]
    assert "schedulerConfigPath" not in case and case["workloadTemplate"] == CASE["workloadTemplate"]
    assert (cwd.parent / "templates").resolve() == (upstream / "templates").resolve()


def test_stanza_arms_add_the_shipped_extender_and_nothing_else(upstream: Path, tmp_path: Path) -> None:
    cwd, _ = sp.write_case(tmp_path / "a", upstream, spec(), "5Nodes", "shipped", "stanza-extender", 8123)
    config = yaml.safe_load(Path(written(cwd)["schedulerConfigPath"]).read_text())
    (extender,) = config["extenders"]
    assert extender["urlPrefix"] == "http://127.0.0.1:8123" and extender["preemptVerb"] == "preempt"
    assert "bindVerb" not in extender  # kube-scheduler binds to the one node filter chose
    assert extender["managedResources"][0]["name"] == "placement.extender.dev/opt-in"
    assert "tlsConfig" not in extender and extender["enableHTTPS"] is False and "profiles" not in config
    assert written(cwd)["workloadTemplate"] == CASE["workloadTemplate"]  # nobody opted in
    floor = sp.stanza(1, floor=True)
    assert "bindVerb" not in floor and "preemptVerb" not in floor


def test_configs_keep_or_drop_the_cases_own_scheduler_configuration(upstream: Path, tmp_path: Path) -> None:
    batching = spec(family="batching", case="HostPortConflict", configs=["shipped", "default"], arms=["native"])
    cwd, _ = sp.write_case(tmp_path / "s", upstream, batching, "5Nodes", "shipped", "native", None)
    assert Path(written(cwd)["schedulerConfigPath"]).is_absolute()
    cwd, _ = sp.write_case(tmp_path / "d", upstream, batching, "5Nodes", "default", "native", None)
    assert "schedulerConfigPath" not in written(cwd)
    cwd, _ = sp.write_case(tmp_path / "g", upstream, batching, "5Nodes", "shipped", "stanza-gofloor", 1)
    config = yaml.safe_load(Path(written(cwd)["schedulerConfigPath"]).read_text())
    assert config["profiles"] == [{"schedulerName": "default-scheduler"}] and len(config["extenders"]) == 1


def test_policy_arms_opt_the_measured_pods_in_with_the_rule_as_a_policy(upstream: Path, tmp_path: Path) -> None:
    cwd, _ = sp.write_case(tmp_path / "p", upstream, spec(), "5Nodes", "shipped", "policy-extender", 9)
    ops = written(cwd)["workloadTemplate"]
    assert ops[1] == CASE["workloadTemplate"][1]  # the pods placed first are upstream's
    pod = yaml.safe_load(Path(ops[2]["podTemplatePath"]).read_text())
    assert "topologySpreadConstraints" not in pod["spec"]
    resources = pod["spec"]["containers"][0]["resources"]
    assert resources["requests"] == {"cpu": "100m", "placement.extender.dev/opt-in": "1"}
    assert resources["limits"] == {"placement.extender.dev/opt-in": "1"}
    policy = json.loads(pod["metadata"]["annotations"]["placement.extender.dev/policy"])
    assert policy == SPREAD | {"group": {"selector": {"matchLabels": {"color": "blue"}}}}


def test_own_sizes_and_validation() -> None:
    size = {"name": "50Nodes", "params": {"initNodes": 50}, "featureGates": {"OpportunisticBatching": True}}
    assert sp.pick_workload(CASE, size) == {**size, "labels": ["performance"]}
    as_loaded = workload.SchedPerfSize.model_validate(size)  # what the runner passes, from the workload file
    assert sp.pick_workload(CASE, as_loaded) == {**size, "labels": ["performance"]}
    with pytest.raises(RuntimeError, match="no workload"):
        sp.pick_workload(CASE, "7Nodes")
    with pytest.raises(ValueError, match="policy"):
        spec(policy={})
    with pytest.raises(ValueError, match="native"):
        spec(arms=["stanza-gofloor"])
    with pytest.raises(ValueError, match="policy"):
        spec(policy={"spread": [{"topologyKey": "zone"}]})  # maxSkew is required
