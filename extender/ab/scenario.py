"""An A/B scenario file: node layout, workload, policy, steps (one pydantic model)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..api.policy import PlacementPolicySpec, format_validation_error


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Workload(_Model):
    name: str = Field(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=40)
    shards: int = Field(
        default=1, ge=1, description="StatefulSets, one per shard (a Redis cluster); 1 = one StatefulSet"
    )
    replicas: int = Field(ge=0, description="pods per StatefulSet")
    volumes: bool = Field(default=False, description="a zonal WaitForFirstConsumer volume per pod")
    nodeSelector: dict[str, str] = Field(
        default_factory=dict, description="the pods' nodeSelector, on both sides (see Scenario.zoneLabels)"
    )


class Step(_Model):
    action: Literal["create", "scale", "deletePods"]
    shards: int | None = Field(default=None, ge=1)
    replicas: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _scale_says_what(self) -> Step:
        if self.action == "scale" and self.shards is None and self.replicas is None:
            raise ValueError("a scale step sets shards or replicas")
        return self


class Scenario(_Model):
    name: str
    description: str = ""
    nodes: dict[str, int] = Field(description="zone -> number of nodes")
    zoneLabels: dict[str, dict[str, str]] = Field(
        default_factory=dict, description="zone -> extra labels on each of its nodes (for a workload's nodeSelector)"
    )
    workload: Workload
    policy: dict[str, Any] = Field(description="a PlacementPolicy spec; the group selector defaults to the workload")
    steps: list[Step]
    repetitions: int = Field(default=3, ge=1)
    settleSeconds: float = Field(default=20, gt=0, description="no progress for this long = the rest stay Pending")
    jitterMs: tuple[int, int] = (20, 120)
    arrival: Literal["random", "ordinalWithinShard"] = Field(
        default="random",
        description="random: any order (pods of a Parallel StatefulSet reach the queue in no fixed order); "
        "ordinalWithinShard: a shard's ordinal 0 before 1, shards interleaved at random",
    )

    @model_validator(mode="after")
    def _valid(self) -> Scenario:
        if not self.steps or self.steps[0].action != "create":
            raise ValueError("the first step is create")
        PlacementPolicySpec.model_validate(self.policy_spec())
        return self

    def policy_spec(self) -> dict[str, Any]:
        spec = dict(self.policy)
        group = dict(spec.get("group") or {})
        group.setdefault("selector", {"matchLabels": {"ab.placement.extender.dev/group": self.workload.name}})
        spec["group"] = group
        return spec


def load(path: str | Path) -> Scenario:
    try:
        return Scenario.model_validate(yaml.safe_load(Path(path).read_text()))
    except ValidationError as err:
        raise ValueError(f"{path}: {format_validation_error(err)}") from None
