"""kube-scheduler's extender protocol (k8s.io/kube-scheduler/extender/v1), modelled exactly.

The Go types have no json tags: kube-scheduler writes Go field names (`Pod`, `NodeNames`,
`FailedNodes`...), writes nil pointers/maps/slices as `null`, and reads answers back with
case-insensitive key matching. We accept keys in any case, as Go does, and answer with the exact
Go spelling, field order and `null`s, map keys sorted, so our bytes equal what Go marshals
(tests/fixtures/wire holds Go's own output).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, RootModel, model_validator

MAX_EXTENDER_PRIORITY = 10


class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore")

    @model_validator(mode="before")
    @classmethod
    def _fold_case(cls, data: Any) -> Any:
        """Match keys case-insensitively, as Go's encoding/json does."""
        if not isinstance(data, dict):
            return data
        names = {name.lower(): name for name in cls.model_fields}
        folded: dict[str, Any] = {}
        for key, value in data.items():
            name = names.get(key.lower()) if isinstance(key, str) else None
            if name is not None and name not in folded:
                folded[name] = value
        return folded


KubeObject = dict[str, Any]


class NodeList(_Wire):
    """v1.NodeList as Go marshals it inside ExtenderArgs: {"metadata":{},"items":[...]}."""

    metadata: dict[str, Any] = Field(default_factory=dict)
    items: list[KubeObject] = Field(default_factory=list)


class ExtenderArgs(_Wire):
    Pod: KubeObject
    Nodes: NodeList | None = None
    NodeNames: list[str] | None = None

    @model_validator(mode="after")
    def _some_nodes(self) -> ExtenderArgs:
        if self.Nodes is None and self.NodeNames is None:
            raise ValueError("one of Nodes (nodeCacheCapable: false) or NodeNames (nodeCacheCapable: true) is required")
        return self

    @property
    def node_cache_capable(self) -> bool:
        return self.Nodes is None

    def candidate_names(self) -> list[str]:
        if self.NodeNames is not None:
            return list(self.NodeNames)
        assert self.Nodes is not None
        return [str((n.get("metadata") or {}).get("name", "")) for n in self.Nodes.items]


class ExtenderFilterResult(_Wire):
    Nodes: dict[str, Any] | None = None
    NodeNames: list[str] | None = None
    FailedNodes: dict[str, str] | None = None
    FailedAndUnresolvableNodes: dict[str, str] | None = None
    Error: str = ""


class HostPriority(_Wire):
    Host: str
    Score: int


class HostPriorityList(RootModel[list[HostPriority]]):
    pass


@dataclass(frozen=True, slots=True)
class Priorities:
    """A HostPriorityList on the way out: (host, score) pairs, encoded without a model per entry
    (a 5,000-node answer would otherwise spend milliseconds building models)."""

    pairs: list[tuple[str, int]]

    def as_model(self) -> HostPriorityList:
        return HostPriorityList([HostPriority(Host=h, Score=s) for h, s in self.pairs])


class ExtenderBindingArgs(_Wire):
    PodName: str = Field(min_length=1)
    PodNamespace: str = Field(min_length=1)
    PodUID: str = Field(min_length=1)
    Node: str = Field(min_length=1)


class ExtenderBindingResult(_Wire):
    Error: str = ""


class MetaPod(_Wire):
    UID: str


class MetaVictims(_Wire):
    Pods: list[MetaPod] | None = None
    NumPDBViolations: int = 0


class Victims(_Wire):
    Pods: list[KubeObject] | None = None
    NumPDBViolations: int = 0


class ExtenderPreemptionArgs(_Wire):
    Pod: KubeObject
    NodeNameToVictims: dict[str, Victims] | None = None
    NodeNameToMetaVictims: dict[str, MetaVictims] | None = None


class ExtenderPreemptionResult(_Wire):
    NodeNameToMetaVictims: dict[str, MetaVictims] | None = None


_MAP_FIELDS = {"FailedNodes", "FailedAndUnresolvableNodes", "NodeNameToMetaVictims", "NodeNameToVictims"}


def _go_order(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: (dict(sorted(v.items())) if k in _MAP_FIELDS and isinstance(v, dict) else _go_order(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_go_order(v) for v in value]
    return value


def go_json(value: Any) -> str:
    """json.dumps as Go's encoding/json.Marshal writes it (compact, HTML-safe escapes, raw UTF-8)."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return (
        text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
        .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    )


def encode(model: BaseModel | Priorities) -> str:
    """A wire model as Go would marshal it."""
    if isinstance(model, Priorities):
        return go_json([{"Host": h, "Score": s} for h, s in model.pairs])
    return go_json(_go_order(model.model_dump(mode="json")))
