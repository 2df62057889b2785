"""The ZoneRotation record: a StatefulSet's ordinal -> zone rotation, kept in the cluster.

Ordinal zones place StatefulSet pod i in zone order[i mod len(order)]. Deciding that order again
from whatever the extender can see (the set's running pods and volumes) is wrong at exactly the
moments that matter: a zone that lost its nodes drops out and its ordinals are mapped elsewhere;
a set adopted with two ordinals in one zone gets a 1-zone rotation. So the order is
decided once, at the set's first decision (engine/zone_order.first_rotation: crl-scheduler's
order over the zones present, pinned by the set's volumes), and written here; from then on the
record is the order, for filter, bind, explain and audit alike.

One object per StatefulSet, in its namespace, with the StatefulSet's name. The extender only
creates it (RBAC: create on zonerotations, nothing else it writes); an operator inspects it with
`kubectl get zonerotations`, edits `spec.order` to let a new zone join, or deletes it to have it
decided again from the current state at the next decision.

It carries no ownerReference: a record lives like the set's PersistentVolumeClaims, which also
outlive a deleted StatefulSet. The set recreated under its name (from git, from a backup, on
another cluster where the committed record was applied) comes back in the same zones, where its
volumes are; a record owned by the set was deleted by the garbage collector within a second of
the set, and the set recreated from git came back with a fresh rotation (5 of 9 ordinals in
another zone). `kubectl delete zonerotation NAME` when the set is gone for good; audit notes a
record whose StatefulSet does not exist. Records written by earlier versions keep their
ownerReference until it is removed (`rotation export` prints the patch).

This model is the single source of truth for the record: the store parses it, and the CRD's
schema is generated from it (extender/api/schema.py).
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .policy import API_GROUP, API_VERSION

KIND = "ZoneRotation"
PLURAL = "zonerotations"
MAX_ZONES = 64  # a rotation longer than any real cluster's zone count is a typo
MAX_ADOPTED = 10_000  # ordinals left where they were at adoption

ZoneName = Annotated[str, Field(min_length=1, max_length=63)]
ORDINAL_PATTERN = r"^(0|[1-9][0-9]{0,9})$"


class ZoneRotationSpec(BaseModel):
    """A StatefulSet's recorded rotation."""

    model_config = ConfigDict(extra="forbid")

    statefulSet: str = Field(
        min_length=1, max_length=253, description="The StatefulSet (same namespace) whose ordinals this places."
    )
    order: list[ZoneName] = Field(
        min_length=1,
        max_length=MAX_ZONES,
        description="Ordinal i goes to zone order[i mod len(order)]. Edit to let a new zone join; a zone listed "
        "here that has no schedulable node keeps its ordinals Pending.",
    )
    adopted: dict[str, ZoneName] = Field(
        default_factory=dict,
        max_length=MAX_ADOPTED,
        description="Ordinal -> zone of pods that were running outside the rotation when it was decided "
        "(placed before adoption): left where they are, and not reported by audit while they stay there.",
    )

    @field_validator("order")
    @classmethod
    def _distinct(cls, order: list[str]) -> list[str]:
        if len(set(order)) != len(order):
            raise ValueError("order lists a zone twice")
        return order

    @field_validator("adopted")
    @classmethod
    def _ordinals(cls, adopted: dict[str, str]) -> dict[str, str]:
        bad = [k for k in adopted if not re.fullmatch(ORDINAL_PATTERN, k)]
        if bad:
            raise ValueError(f"adopted keys must be StatefulSet ordinals (decimal, no leading zero): {bad[:3]}")
        return adopted

    def adopted_ordinals(self) -> dict[int, str]:
        return {int(k): v for k, v in self.adopted.items()}


def parse_rotation_spec(spec: object, where: str) -> ZoneRotationSpec:
    """Raises ValueError naming `where` and the field."""
    try:
        return ZoneRotationSpec.model_validate(spec)
    except ValidationError as err:
        first = err.errors()[0]
        field = ".".join(str(p) for p in first.get("loc", ())) or "spec"
        raise ValueError(f"{where}: spec.{field}: {first.get('msg')}") from None


def rotation_object(namespace: str, statefulset: str, order: tuple[str, ...], adopted: dict[int, str]) -> dict:
    """The object the extender creates for a StatefulSet's first decision, adopt writes, and a
    team commits: the same, with no ownerReference (the module says why) and no server field."""
    meta: dict = {
        "name": statefulset,
        "namespace": namespace,
        "labels": {"app.kubernetes.io/managed-by": "placement-extender"},
    }
    spec = ZoneRotationSpec(
        statefulSet=statefulset, order=list(order), adopted={str(k): v for k, v in sorted(adopted.items())}
    )
    return {
        "apiVersion": f"{API_GROUP}/{API_VERSION}",
        "kind": KIND,
        "metadata": meta,
        "spec": spec.model_dump(),
    }
