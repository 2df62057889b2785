"""adopt and retire as a kustomize Component: what a team whose app is a kustomization commits.

Writing adopt's output beside the app's own StatefulSet gives kustomize two objects with one id;
overwriting the file loses the team's own manifest. So `adopt --kustomize DIR` writes a Component
(kind: Component, kustomize.config.k8s.io/v1alpha1) the app's kustomization lists once under
`components:`: the PlacementPolicy and the ZoneRotation as resources, and a strategic-merge patch
of the workload holding only adopt's changes. `retire --kustomize DIR` rewrites the patch to the
retire form. The app's manifest is never touched, so nothing of it can be lost.

Invariant (tests/unit/test_component.py, with the real kustomize): the app built with the
component equals the workload adopt (or retire) prints in full. Strategic merge merges lists by
their key (containers by name, spreads by topologyKey alone, which would fold two spreads on one
key); a changed list is therefore written whole, and, where kustomize merges it by key, marked
`$patch: replace`. A key the change removes is written as null. Pure: the CLI does the files.
"""

from __future__ import annotations

from typing import Any

import yaml

from .manifests import adopt_documents

KUSTOMIZATION = "kustomization.yaml"
PATCH = "workload-patch.yaml"
POLICY_FILE = "placementpolicy.yaml"
ROTATION_FILE = "zonerotation.yaml"
COMPONENT_API = "kustomize.config.k8s.io/v1alpha1"
# The pod spec's lists kustomize merges by a key (its OpenAPI's patch merge keys); every other list
# is replaced whole by a patch's.
MERGED_BY_KEY = frozenset(
    {
        "containers",
        "initContainers",
        "ephemeralContainers",
        "volumes",
        "topologySpreadConstraints",
        "imagePullSecrets",
        "hostAliases",
        "env",
        "ports",
        "volumeMounts",
        "volumeDevices",
        "resourceClaims",
    }
)


def merge_patch(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The strategic-merge patch that turns map `before` into `after` under kustomize."""
    out: dict[str, Any] = {}
    for key, value in after.items():
        old = before.get(key)
        if key in before and old == value:
            continue
        if isinstance(value, dict) and isinstance(old, dict):
            out[key] = merge_patch(old, value)
        elif isinstance(value, list):
            # kustomize keeps only the directive of a replace on a list the base lacks: mark only
            # a list there is to merge with
            merged = key in MERGED_BY_KEY and isinstance(old, list)
            out[key] = [*value, {"$patch": "replace"}] if merged else list(value)
        else:
            out[key] = value
    for key in before:
        if key not in after:
            out[key] = None
    return out


def workload_patch(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The patch of the workload `before` (the app's manifest) holding only what changed in its pod
    template, addressed as kustomize finds it (kind, name, and namespace if the manifest has one)."""
    meta = {k: v for k, v in (before.get("metadata") or {}).items() if k in ("name", "namespace")}
    template = merge_patch(
        (before.get("spec") or {}).get("template") or {}, (after.get("spec") or {}).get("template") or {}
    )
    return {
        "apiVersion": before.get("apiVersion", "apps/v1"),
        "kind": before["kind"],
        "metadata": meta,
        "spec": {"template": template},
    }


def component_files(
    policy: dict[str, Any] | None, record: dict[str, Any] | None, before: dict[str, Any], after: dict[str, Any]
) -> dict[str, str]:
    """File name -> text of the component: its kustomization, the policy and record to commit (as
    adopt prints them), and the workload's patch."""
    documents = adopt_documents(policy, record, after)[:-1]
    files: dict[str, str] = {}
    resources = []
    for doc in documents:
        name = POLICY_FILE if doc["kind"] == "PlacementPolicy" else ROTATION_FILE
        files[name] = yaml.safe_dump(doc, sort_keys=False)
        resources.append(name)
    kustomization: dict[str, Any] = {"apiVersion": COMPONENT_API, "kind": "Component"}
    if resources:
        kustomization["resources"] = resources
    kustomization["patches"] = [{"path": PATCH}]
    files[KUSTOMIZATION] = yaml.safe_dump(kustomization, sort_keys=False)
    files[PATCH] = yaml.safe_dump(workload_patch(before, after), sort_keys=False)
    return files


def lists_component(kustomization: dict[str, Any], component: str) -> bool:
    """True when the app's kustomization already lists the component (as `components:` entries)."""
    return component.rstrip("/") in [str(c).rstrip("/") for c in kustomization.get("components") or ()]


REPLACE = {"$patch": "replace"}


def apply_patch(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """`target` with a patch merge_patch wrote applied as kustomize applies it (maps merged, a
    null removes its key, lists replaced whole): how retire reads the workload a component adopted."""
    import copy

    out = copy.deepcopy(target)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = apply_patch(out[key], value)
        elif isinstance(value, list):
            out[key] = [copy.deepcopy(v) for v in value if v != REPLACE]
        else:
            out[key] = copy.deepcopy(value)
    return out


def read_component(files: dict[str, str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the workload patch, the component's resources) from its files (name -> text)."""
    kustomization = yaml.safe_load(files.get(KUSTOMIZATION) or "") or {}
    if kustomization.get("kind") != "Component":
        raise ValueError(f"{KUSTOMIZATION} is not a kustomize Component: give the folder `adopt --kustomize` wrote")
    patches = [p.get("path") for p in kustomization.get("patches") or () if isinstance(p, dict)]
    if PATCH not in patches or PATCH not in files:
        raise ValueError(f"the component has no {PATCH}: give the folder `adopt --kustomize` wrote")
    resources = [
        d for name in kustomization.get("resources") or () for d in yaml.safe_load_all(files.get(name) or "") if d
    ]
    return yaml.safe_load(files[PATCH]) or {}, resources
