"""JSON schema and CRD made from the policy model, so the API server enforces what the engine reads.

Kubernetes wants a *structural* OpenAPI v3 schema: no $ref, a type on every node, `nullable`
instead of `anyOf [.., null]`. The cross-field checks the pydantic validators make (exactly one
of max/fraction, comparison with fraction...) become CEL `x-kubernetes-validations` rules.
"""

from __future__ import annotations

import copy
from typing import Any

from . import rotation
from .policy import API_GROUP, API_VERSION, FRACTION_PATTERN, KIND, PLURAL, PlacementPolicySpec

# CEL rules mirroring the model validators, keyed by the definition they sit on.
_CEL_RULES: dict[str, list[dict[str, str]]] = {
    "Cap": [
        {"rule": "has(self.max) != has(self.fraction)", "message": "a cap takes exactly one of max or fraction"},
        {
            "rule": "!has(self.fraction) || has(self.comparison)",
            "message": 'a fractional cap must spell out its comparison: "LessThan" or "AtMost"',
        },
        {
            "rule": "!has(self.max) || !has(self.comparison)",
            "message": "comparison goes with fraction; max is always 'at most'",
        },
    ],
    "Spread": [
        {
            "rule": "!has(self.minDomains) || !has(self.whenUnsatisfiable) "
            "|| self.whenUnsatisfiable == 'DoNotSchedule'",
            "message": "minDomains applies only with whenUnsatisfiable: DoNotSchedule (as natively)",
        },
    ],
    "GroupSpec": [
        {
            "rule": "!has(self.matchLabelKeys) "
            "|| self.matchLabelKeys.all(k, self.matchLabelKeys.exists_one(j, j == k))",
            "message": "matchLabelKeys lists a key twice",
        },
    ],
    "PlacementPolicySpec": [
        {
            "rule": "!has(self.ordinalZones) || !has(self.zones) || !has(self.zones.fallbackGroups)",
            "message": "ordinalZones and zones.fallbackGroups cannot be combined",
        },
    ],
    "ZoneRotationSpec": [
        {
            "rule": "self.order.all(z, self.order.exists_one(y, y == z))",
            "message": "order lists a zone twice",
        },
    ],
    "LabelSelectorRequirement": [
        {
            "rule": "!(self.operator in ['In', 'NotIn']) || size(self.values) > 0",
            "message": "operators In and NotIn need at least one value",
        },
        {
            "rule": "!(self.operator in ['Exists', 'DoesNotExist']) || size(self.values) == 0",
            "message": "operators Exists and DoesNotExist take no values",
        },
    ],
}


# CEL rules on one property of a definition (`self` is the property's value), for a field
# validator of the model that a pattern cannot express. The API server reports them at the field.
# A fraction "p/q" in (0, 1]: the pattern and maxLength (at most 18 digits a number, so int64
# holds each) come from the model; the guard leaves a malformed string to the pattern's message.
_FRACTION_PARTS = "self.split('/')"
_PROPERTY_CEL_RULES: dict[tuple[str, str], list[dict[str, str]]] = {
    ("Cap", "fraction"): [
        {
            "rule": f"!self.matches('{FRACTION_PATTERN}') || "
            f"(int({_FRACTION_PARTS}[0]) > 0 && int({_FRACTION_PARTS}[0]) <= int({_FRACTION_PARTS}[1]))",
            "messageExpression": "'fraction ' + self + ' must be in (0, 1]'",
        }
    ],
}


def policy_json_schema() -> dict[str, Any]:
    """The JSON schema of a policy spec (what `python -m extender schema` prints)."""
    return PlacementPolicySpec.model_json_schema()


def _structural(node: Any, defs: dict[str, Any], name: str | None = None) -> Any:
    if isinstance(node, list):
        return [_structural(n, defs) for n in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        ref = node["$ref"].split("/")[-1]
        out = _structural(copy.deepcopy(defs[ref]), defs, ref)
        for key in ("description", "default"):
            if key in node:
                out[key] = node[key]
        return out
    node = dict(node)
    if "anyOf" in node:
        options = [o for o in node["anyOf"] if o.get("type") != "null"]
        nullable = len(options) < len(node["anyOf"])
        merged = {k: v for k, v in node.items() if k != "anyOf"}
        if len(options) == 1:
            inner = _structural(options[0], defs)
            inner.update({k: v for k, v in merged.items() if k not in ("default",)})
            if "default" in merged and merged["default"] is not None:
                inner["default"] = merged["default"]
            if nullable:
                inner["nullable"] = True
            node = inner
        else:
            raise ValueError(f"cannot make a structural schema of anyOf with {len(options)} options")
        return {k: v for k, v in node.items() if k != "title"}
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("title", "$defs"):
            continue
        if key == "additionalProperties" and value is False:
            continue  # not structural; the API server prunes, and strict field validation rejects, unknown fields
        if key == "properties":
            out[key] = {k: _structural(v, defs) for k, v in value.items()}
            for prop, schema in out[key].items():
                rules = _PROPERTY_CEL_RULES.get((name, prop)) if name is not None else None
                if rules:
                    schema["x-kubernetes-validations"] = rules
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = _structural(value, defs)
        else:
            out[key] = value
    if name in _CEL_RULES:
        out["x-kubernetes-validations"] = _CEL_RULES[name]
    if out.get("default") is None:
        out.pop("default", None)
    if "type" not in out and "properties" in out:
        out["type"] = "object"
    return out


def _crd_document(
    kind: str,
    plural: str,
    short_names: list[str],
    description: str,
    spec_schema: dict[str, Any],
    columns: list[dict[str, str]],
) -> dict[str, Any]:
    """A namespaced CustomResourceDefinition of one served, stored version whose `spec` is
    `spec_schema` (structural, made from a pydantic model)."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{API_GROUP}"},
        "spec": {
            "group": API_GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": kind,
                "plural": plural,
                "singular": kind.lower(),
                "shortNames": short_names,
                "listKind": f"{kind}List",
            },
            "versions": [
                {
                    "name": API_VERSION,
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "description": description,
                            "required": ["spec"],
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": spec_schema,
                            },
                        }
                    },
                    "additionalPrinterColumns": [
                        *columns,
                        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                    ],
                }
            ],
        },
    }


def crd() -> dict[str, Any]:
    """The PlacementPolicy CustomResourceDefinition (deploy/base/crd.yaml is this, generated)."""
    schema = policy_json_schema()
    return _crd_document(
        KIND,
        PLURAL,
        ["pp", "placement"],
        "Placement rules for a group of pods scheduled through the placement extender.",
        _structural(schema, schema.get("$defs", {}), "PlacementPolicySpec"),
        [{"name": "Group-Size", "type": "integer", "jsonPath": ".spec.group.size"}],
    )


def rotation_crd() -> dict[str, Any]:
    """The ZoneRotation CustomResourceDefinition (deploy/base/crd-zonerotation.yaml is this,
    generated from extender/api/rotation.py)."""
    schema = rotation.ZoneRotationSpec.model_json_schema()
    return _crd_document(
        rotation.KIND,
        rotation.PLURAL,
        ["zr"],
        "A StatefulSet's ordinal -> zone rotation under ordinalZones, decided once by the placement extender "
        "and kept here. Edit spec.order to let a new zone join; delete to have it decided again from the "
        "current state.",
        _structural(schema, schema.get("$defs", {}), "ZoneRotationSpec"),
        [
            {"name": "StatefulSet", "type": "string", "jsonPath": ".spec.statefulSet"},
            {"name": "Order", "type": "string", "jsonPath": ".spec.order"},
        ],
    )
