"""`adopt --kustomize` and `retire --kustomize` (extender/ops/component.py), checked with the real
kustomize (the one kubectl carries; no cluster): the app's own manifest built with the component
equals the workload adopt (and then retire) prints in full, for templates that already hold
spreads (two on one key), affinity, gates, tolerations, node selectors and several containers.
Strategic merge merges some lists by a key (spreads by topologyKey alone, containers by name);
this is where a patch that looks right folds or keeps what it should replace."""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from extender.api.policy import parse_spec
from extender.ops.adopt import adopt, retire
from extender.ops.component import (
    KUSTOMIZATION,
    PATCH,
    apply_patch,
    component_files,
    lists_component,
    read_component,
    workload_patch,
)
from extender.ops.manifests import committable

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


@pytest.fixture(scope="module")
def kubectl() -> Path:
    from extender.devcluster.cluster import kube_binaries

    return kube_binaries() / "kubectl"


def kustomize(kubectl: Path, folder: Path) -> dict:
    """The StatefulSet `kubectl kustomize folder` builds."""
    built = subprocess.run([str(kubectl), "kustomize", str(folder)], capture_output=True, text=True, check=False)
    assert built.returncode == 0, built.stderr
    (sts,) = [d for d in yaml.safe_load_all(built.stdout) if d and d["kind"] == "StatefulSet"]
    return sts


SPREAD = st.builds(
    lambda key, skew, mode: {
        "topologyKey": key,
        "maxSkew": skew,
        "whenUnsatisfiable": mode,
        "labelSelector": {"matchLabels": {"app": "crdb"}},
    },
    st.sampled_from([ZONE, HOST, "rack"]),
    st.integers(1, 3),
    st.sampled_from(["DoNotSchedule", "ScheduleAnyway"]),
)
CONTAINER = st.builds(
    lambda name, cpu: {"name": name, "image": f"registry.invalid/{name}:1", **({"resources": cpu} if cpu else {})},
    st.sampled_from(["db", "sidecar", "exporter"]),
    st.sampled_from([None, {"requests": {"cpu": "1"}}, {"limits": {"memory": "1Gi"}}]),
)
TEMPLATE_SPEC = st.fixed_dictionaries(
    {"containers": st.lists(CONTAINER, min_size=1, max_size=3, unique_by=lambda c: c["name"])},
    optional={
        "topologySpreadConstraints": st.lists(
            SPREAD, min_size=1, max_size=3, unique_by=lambda s: (s["topologyKey"], s["whenUnsatisfiable"])
        ),
        "schedulingGates": st.lists(
            st.sampled_from([{"name": "team.example/warmup"}, {"name": "other/x"}]),
            min_size=1,
            max_size=2,
            unique_by=str,
        ),
        "tolerations": st.lists(
            st.sampled_from(
                [
                    {"key": "dedicated", "operator": "Exists"},
                    {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},
                ]
            ),
            min_size=1,
            max_size=2,
            unique_by=str,
        ),
        "nodeSelector": st.just({"disk": "ssd"}),
        "affinity": st.sampled_from(
            [
                {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}
                            ]
                        }
                    }
                },
                {
                    "podAntiAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {
                                "weight": 10,
                                "podAffinityTerm": {
                                    "topologyKey": HOST,
                                    "labelSelector": {"matchLabels": {"app": "crdb"}},
                                },
                            }
                        ]
                    }
                },
            ]
        ),
        "schedulerName": st.just("default-scheduler"),
    },
)
POLICIES = [
    {"ordinalZones": {}, "caps": [{"topologyKey": HOST, "max": 1}]},
    {"ordinalZones": {}, "spread": [{"topologyKey": ZONE, "maxSkew": 1}]},
    {"caps": [{"topologyKey": ZONE, "max": 4}], "zones": {"allowed": ["zone-a", "zone-b"]}},
    {"spread": [{"topologyKey": HOST, "maxSkew": 1, "whenUnsatisfiable": "ScheduleAnyway"}]},
]


def statefulset(pod_spec: dict, annotations: dict | None) -> dict:
    meta: dict = {"labels": {"app": "crdb"}}
    if annotations:
        meta["annotations"] = annotations
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "crdb", "namespace": "db"},
        "spec": {
            "replicas": 9,
            "serviceName": "crdb",
            "selector": {"matchLabels": {"app": "crdb"}},
            "template": {"metadata": meta, "spec": pod_spec},
        },
    }


def write_app(root: Path, base: dict, files: dict[str, str]) -> Path:
    (root / "placement").mkdir(parents=True, exist_ok=True)
    (root / "statefulset.yaml").write_text(yaml.safe_dump(base))
    (root / KUSTOMIZATION).write_text(yaml.safe_dump({"resources": ["statefulset.yaml"], "components": ["placement"]}))
    for name, text in files.items():
        (root / "placement" / name).write_text(text)
    return root


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
    phases=[Phase.explicit, Phase.reuse, Phase.generate],  # no shrinking: each example spawns kubectl
)
@given(
    pod_spec=TEMPLATE_SPEC,
    annotations=st.sampled_from([None, {"team.example/owner": "data"}]),
    policy=st.sampled_from(POLICIES),
    mode=st.sampled_from(["second-scheduler", "in-scheduler"]),
    pool=st.sampled_from([None, ("pool", "db")]),
)
def test_the_app_built_with_the_component_is_adopts_and_retires_workload(  # noqa: PLR0913
    kubectl, tmp_path_factory, pod_spec, annotations, policy, mode, pool
) -> None:  # noqa: ANN001
    base = statefulset(pod_spec, annotations)
    spec = parse_spec(policy, "test")
    policy_doc = {
        "apiVersion": "placement.extender.dev/v1alpha1",
        "kind": "PlacementPolicy",
        "metadata": {"name": "crdb", "namespace": "db"},
        "spec": policy,
    }
    record = None
    if "ordinalZones" in policy:
        record = {
            "apiVersion": "placement.extender.dev/v1alpha1",
            "kind": "ZoneRotation",
            "metadata": {"name": "crdb", "namespace": "db"},
            "spec": {"statefulSet": "crdb", "order": ["zone-b", "zone-a", "zone-c"], "adopted": {}},
        }
    adopted = adopt(
        copy.deepcopy(base),
        spec,
        scheduler_name="placement-scheduler",
        policy_name="crdb",
        mode=mode,
        node_pool=pool,
        rotation_declared=record is not None,
    ).workload
    files = component_files(policy_doc, record, base, adopted)
    app = write_app(tmp_path_factory.mktemp("app"), base, files)
    assert kustomize(kubectl, app) == committable(adopted)
    patch, resources = read_component(files)
    assert apply_patch(base, patch) == adopted, "retire reads the adopted workload as kustomize builds it"
    assert [r["kind"] for r in resources] == ["PlacementPolicy", *(["ZoneRotation"] if record else [])]

    retired = retire(adopted, spec).workload
    (app / "placement" / PATCH).write_text(yaml.safe_dump(workload_patch(base, retired)))
    built = kustomize(kubectl, app)
    assert built == committable(retired)
    # nothing of the team's template is lost: all it held is still there (schedulerName aside, which
    # retire sets; a node pool's selector and toleration stay, as the live retire leaves them)
    assert holds(built["spec"]["template"], {**base["spec"]["template"], "spec": {**pod_spec, "schedulerName": None}})


def holds(built: object, original: object) -> bool:
    """Every map key and list item of `original` is in `built` (None: any value)."""
    if original is None:
        return True
    if isinstance(original, dict):
        return isinstance(built, dict) and all(k in built and holds(built[k], v) for k, v in original.items())
    if isinstance(original, list):
        return isinstance(built, list) and all(any(holds(b, o) for b in built) for o in original)
    return built == original


@pytest.mark.parametrize(
    ("kustomization", "listed"),
    [
        ({"resources": ["statefulset.yaml"]}, False),
        ({"components": ["placement"]}, True),
        ({"components": ["placement/"]}, True),
        ({"components": ["../shared", "placement"]}, True),
        ({"components": ["other"]}, False),
    ],
)
def test_the_app_lists_the_component_once(kustomization, listed) -> None:  # noqa: ANN001
    assert lists_component(kustomization, "placement") is listed


def test_a_folder_that_is_not_a_component_is_refused_saying_what_to_give() -> None:
    with pytest.raises(ValueError, match="not a kustomize Component"):
        read_component({KUSTOMIZATION: "resources: [a.yaml]\n"})
    with pytest.raises(ValueError, match="has no"):
        read_component({KUSTOMIZATION: "kind: Component\n"})
