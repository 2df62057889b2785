"""Workloads as data: benchmarks/workloads/*.yaml, validated by the models below.

A workload names its `kind` (the measurement, a module in benchmarks/kinds/), its cluster, the
workload's own knobs, the arms it is measured against, how many rounds, its targets, and `smoke`:
the overrides (dotted paths, as `--set`) that shrink it to a few seconds for the smoke tests.

Every error names its field path (`cluster.nodes: Input should be greater than 0`); `parse` and
`load` raise `WorkloadError` and nothing else, whatever the text.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

WORKLOADS = Path(__file__).resolve().parent / "workloads"
GROUP_VARIANTS = ("hard-spread", "no-hard-spread")


class WorkloadError(ValueError):
    """A workload that does not validate: `errors` are (field path, message) pairs."""

    def __init__(self, source: str, errors: list[tuple[str, str]]) -> None:
        self.source = source
        self.errors = errors
        super().__init__(f"{source}: " + "; ".join(f"{path or '(top)'}: {msg}" for path, msg in errors))


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Target(Strict):
    """A bound on one figure: `max` (the figure must be <= it) or `min` (>=). For group_scaling the
    figure is a row's (`pair.p99`, `fallbacks`, `errors`), limited to some rows by `variants` and
    `max_size`."""

    figure: str = Field(min_length=1)
    max: float | None = None
    min: float | None = None
    variants: list[Literal["hard-spread", "no-hard-spread"]] | None = None
    max_size: int | None = Field(default=None, gt=0)
    note: str = ""

    @model_validator(mode="after")
    def _one_bound(self) -> Target:
        if (self.max is None) == (self.min is None):
            raise ValueError("give exactly one of max or min")
        return self


class Cluster(Strict):
    """Synthetic nodes dealt round-robin over the three zones zone-a, zone-b, zone-c."""

    nodes: int = Field(gt=0, le=100_000)
    zones: Literal[3] = 3
    pods: int = Field(default=0, ge=0, le=2_000_000)


class Base(Strict):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    description: str = Field(min_length=1)
    rounds: int = Field(default=3, gt=0, le=100)
    arms: list[Literal["extender", "noop", "gofloor"]] = Field(min_length=1)
    targets: list[Target] = []
    smoke: dict[str, Any] = {}

    @model_validator(mode="after")
    def _arms_once(self) -> Base:
        if len(set(self.arms)) != len(self.arms):
            raise ValueError("arms: each arm at most once")
        if "extender" not in self.arms:
            raise ValueError("arms: the extender arm is what is measured; it cannot be left out")
        return self


def _flat_targets(targets: list[Target]) -> None:
    """Targets on a kind's flat figures: the row selectors are group_scaling's alone."""
    for t in targets:
        if t.variants is not None or t.max_size is not None:
            raise ValueError("targets: variants and max_size are for group_scaling rows")


class HttpPairParams(Strict):
    """What kube-scheduler sends per pod, every node a candidate: POST /filter, then POST
    /prioritize with the nodes that passed; `requests` iterations per round after `warmup`."""

    policy: Literal["full"] = "full"
    node_list: bool = False
    requests: int = Field(default=200, gt=0)
    warmup: int = Field(default=20, ge=0)
    gc_freeze: bool = True


class HttpPair(Base):
    kind: Literal["http_pair"]
    cluster: Cluster
    workload: HttpPairParams = HttpPairParams()

    @model_validator(mode="after")
    def _targets(self) -> HttpPair:
        _flat_targets(self.targets)
        return self


class ProfileParams(Strict):
    """Filter + prioritize called in-process (Flask's test client, no gunicorn, no socket):
    `requests` iterations timed unprofiled in each round, then profiled once, under cProfile or
    (`pyinstrument: true`) pyinstrument."""

    policy: Literal["full", "caps-spread"] = "full"
    node_list: bool = False
    verb: Literal["both", "filter", "prioritize"] = "both"
    requests: int = Field(default=100, gt=0)
    warmup: int = Field(default=5, ge=0)
    limit: int = Field(default=25, gt=0)
    pyinstrument: bool = False
    keep_gc: bool = False


class Profile(Base):
    """Measured in-process: the one arm is the extender's code itself (no floor arm beside it)."""

    kind: Literal["profile"]
    cluster: Cluster
    workload: ProfileParams = ProfileParams()
    arms: list[Literal["extender"]] = Field(default=["extender"], min_length=1)

    @model_validator(mode="after")
    def _targets(self) -> Profile:
        _flat_targets(self.targets)
        return self


class GroupCluster(Strict):
    nodes: int = Field(gt=0, le=100_000)
    zones: Literal[3] = 3
    background_pods: int = Field(default=0, ge=0)


class GroupScalingParams(Strict):
    """Groups of `sizes` pods (S StatefulSets x R replicas by the shape rule, or `shapes`), part placed."""

    sizes: list[Annotated[int, Field(gt=1)]] = Field(min_length=1)
    variants: list[Literal["hard-spread", "no-hard-spread"]] = Field(default=list(GROUP_VARIANTS), min_length=1)
    iterations: int = Field(default=200, gt=0)
    warmup: int = Field(default=10, ge=0)
    row_budget_s: float = Field(default=60.0, gt=0)
    request_timeout_s: float = Field(default=120.0, gt=0)
    placed_fraction: float = Field(default=0.6, ge=0, lt=1)
    max_placed: int = Field(default=150_000, ge=0)
    shapes: dict[int, Annotated[list[Annotated[int, Field(gt=0)]], Field(min_length=2, max_length=2)]] = {}


class GroupScaling(Base):
    kind: Literal["group_scaling"]
    cluster: GroupCluster
    workload: GroupScalingParams

    @model_validator(mode="after")
    def _arms(self) -> GroupScaling:
        if "gofloor" in self.arms:
            raise ValueError("arms: group_scaling measures the extender beside its /noop floor only")
        return self


E2E_VARIANTS = ("shipped", "equal-qps", "go-floor", "py-floor", "py-duties", "before", "modes")
E2EVariant = Literal["shipped", "equal-qps", "go-floor", "py-floor", "py-duties", "before", "modes"]


def _unique(values: list[Any], what: str) -> None:
    if len(set(values)) != len(values):
        raise ValueError(f"{what}: each at most once")


class PlaneCluster(Strict):
    """kwok nodes on the local control plane (benchmarks/cluster.py), dealt round-robin over the
    three zones; `kcm_qps` is kube-controller-manager's client QPS (burst twice it; 0: its default)."""

    nodes: int = Field(gt=0, le=5_000)
    zones: Literal[3] = 3
    kcm_qps: int = Field(default=500, ge=0)


class ControlPlane(Base):
    """A kind on the local control plane: the one arm is the extender as deployed, beside its own
    kube-scheduler; its floors (the default scheduler's native side, the Go do-nothing extender,
    the other mode) are the kind's variants or sides, measured in the same run. Targets are on
    its flat figures."""

    arms: list[Literal["extender"]] = Field(default=["extender"], min_length=1)

    @model_validator(mode="after")
    def _targets(self) -> ControlPlane:
        _flat_targets(self.targets)
        return self


class E2EParams(Strict):
    """Each round `sets` StatefulSets x `replicas` (Parallel) on one side; `variants` each on a fresh
    control plane (benchmarks/kinds/e2e.py); equal_qps / equal_burst: both kube-schedulers' client
    in every variant but shipped."""

    variants: list[E2EVariant] = Field(min_length=1)
    sets: int = Field(default=10, gt=0)
    replicas: int = Field(default=100, gt=0)
    equal_qps: float = Field(default=500.0, gt=0)
    equal_burst: int = Field(default=1000, gt=0)
    timeout_s: float = Field(default=240.0, gt=0)
    place_window: int | None = Field(default=None, gt=0)
    before_tree: str | None = None
    keep_logs: str | None = None

    @model_validator(mode="after")
    def _check(self) -> E2EParams:
        _unique(self.variants, "variants")
        if "before" in self.variants and not self.before_tree:
            raise ValueError("variants: before needs before_tree (a checkout whose extender/ is served)")
        return self


class E2E(ControlPlane):
    kind: Literal["e2e"]
    cluster: PlaneCluster
    workload: E2EParams


class SoakCluster(Strict):
    """kwok nodes per zone over zone-a, zone-b, zone-c (a group of 8 capped 1 a node and 3 a zone
    needs at least 3 a zone)."""

    nodes_per_zone: int = Field(default=4, ge=3, le=100)
    zones: Literal[3] = 3


class SoakParams(Strict):
    """`groups` capped StatefulSets churned for `minutes`; an audit and a sample every
    `audit_every` cycles; the extender's --reservation-ttl."""

    minutes: float = Field(default=30.0, gt=0)
    groups: int = Field(default=4, gt=0, le=50)
    audit_every: int = Field(default=3, gt=0)
    seed: int = 1
    reservation_ttl_s: int = Field(default=30, gt=0)


class Soak(ControlPlane):
    kind: Literal["soak"]
    cluster: SoakCluster = SoakCluster()
    workload: SoakParams = SoakParams()
    rounds: Literal[1] = 1


SCHEDPERF_ARMS = ("native", "stanza-gofloor", "stanza-extender", "policy-extender", "policy-gofloor")
SchedPerfArm = Literal["native", "stanza-gofloor", "stanza-extender", "policy-extender", "policy-gofloor"]


class SchedPerfSize(Strict):
    """A size of an upstream test case that upstream does not ship (its workload template, these params)."""

    name: str = Field(pattern=r"^[A-Za-z0-9_]+$")
    params: dict[str, int]
    featureGates: dict[str, bool] = {}  # noqa: N815 (upstream's field name)


class SchedPerfCase(Strict):
    """One upstream test case: `family` (its folder under test/integration/scheduler_perf), `case` (its name),
    the workload run at each size (upstream's by name, or a SchedPerfSize), `policy` (the PlacementPolicy spec
    the policy arms give the measured pods instead of their native rule; the group is added), the scheduler
    configurations (`shipped`: the case's own; `default`: kube-scheduler's defaults) and the arms it runs."""

    family: str = Field(pattern=r"^[a-z_]+$")
    case: str = Field(pattern=r"^[A-Za-z0-9]+$")
    benchmark: str | SchedPerfSize
    smoke: str | SchedPerfSize
    policy: dict[str, Any] = {}
    configs: list[Literal["shipped", "default"]] = Field(default=["shipped"], min_length=1)
    arms: list[SchedPerfArm] = Field(default=list(SCHEDPERF_ARMS), min_length=1)

    @model_validator(mode="after")
    def _check(self) -> SchedPerfCase:
        _unique(self.configs, "configs")
        _unique(self.arms, "arms")
        if "native" not in self.arms:
            raise ValueError("arms: every figure is a ratio to native; it cannot be left out")
        if any(a.startswith("policy-") for a in self.arms):
            if not self.policy:
                raise ValueError("policy: the policy arms need the rule as a PlacementPolicy spec")
            from extender.api.policy import PlacementPolicySpec  # the extender's own check of a policy

            try:
                PlacementPolicySpec.model_validate(self.policy)
            except ValidationError as exc:
                raise ValueError(f"policy: {exc.errors()[0]['msg']}") from None
        return self


class SchedulerPerfParams(Strict):
    """`cases` run in order (`only`: those named); `size` picks each case's benchmark or smoke workload."""

    cases: list[SchedPerfCase] = Field(min_length=1)
    only: list[str] = []
    size: Literal["benchmark", "smoke"] = "benchmark"
    timeout_s: float = Field(default=3600.0, gt=0)
    keep_logs: str | None = None

    @model_validator(mode="after")
    def _check(self) -> SchedulerPerfParams:
        names = [c.case for c in self.cases]
        unknown = [n for n in self.only if n not in names]
        if unknown:
            raise ValueError(f"only: no case {', '.join(unknown)}")
        return self


class SchedulerPerf(Strict):
    """Upstream's scheduler benchmark on arms (benchmarks/kinds/scheduler_perf.py); `native` is in every case."""

    kind: Literal["scheduler_perf"]
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    description: str = Field(min_length=1)
    rounds: int = Field(default=1, gt=0, le=100)
    arms: list[SchedPerfArm] = Field(default=list(SCHEDPERF_ARMS), min_length=1)
    targets: list[Target] = []
    smoke: dict[str, Any] = {}
    workload: SchedulerPerfParams

    @model_validator(mode="after")
    def _check(self) -> SchedulerPerf:
        _unique(self.arms, "arms")
        _flat_targets(self.targets)
        if "native" not in self.arms:
            raise ValueError("arms: every figure is a ratio to native; it cannot be left out")
        return self


AnyWorkload = HttpPair | GroupScaling | Profile | E2E | Soak | SchedulerPerf
Workload = Annotated[AnyWorkload, Field(discriminator="kind")]
_ADAPTER: TypeAdapter[AnyWorkload] = TypeAdapter(Workload)
KIND_TAGS = (
    "http_pair",
    "group_scaling",
    "profile",
    "e2e",
    "soak",
    "scheduler_perf",
)


def _path(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc]
    if parts and parts[0] in KIND_TAGS:  # the discriminator's branch, not a field
        parts = parts[1:]
    return ".".join(parts)


def validate(data: Any, source: str = "<workload>") -> AnyWorkload:
    try:
        return _ADAPTER.validate_python(data)
    except ValidationError as exc:
        raise WorkloadError(source, [(_path(e["loc"]), e["msg"]) for e in exc.errors()]) from None


def parse(text: str, source: str = "<workload>") -> AnyWorkload:
    """A workload from YAML text; every failure is a WorkloadError."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise WorkloadError(source, [("", f"not YAML: {str(exc).splitlines()[0]}")]) from None
    except (ValueError, TypeError, RecursionError) as exc:  # e.g. an int too large for Python to parse
        raise WorkloadError(source, [("", f"not YAML: {exc}")]) from None
    if not isinstance(data, dict):
        raise WorkloadError(source, [("", f"a workload is a mapping, not {type(data).__name__}")])
    return validate(data, source)


def override(data: dict[str, Any], assignments: dict[str, Any] | list[str]) -> dict[str, Any]:
    """A copy of `data` with dotted paths set (`cluster.nodes=50`; a value is parsed as YAML)."""
    out = copy.deepcopy(data)
    items = assignments.items() if isinstance(assignments, dict) else [_split(a) for a in assignments]
    for path, value in items:
        node = out
        keys = path.split(".")
        for key in keys[:-1]:
            child = node.get(key)
            if not isinstance(child, dict):
                child = node[key] = {}
            node = child
        node[keys[-1]] = value
    return out


def _split(assignment: str) -> tuple[str, Any]:
    path, sep, text = assignment.partition("=")
    if not sep or not path:
        raise WorkloadError("--set", [(path, "expected KEY=VALUE (a dotted path, a YAML value)")])
    try:
        return path.strip(), yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise WorkloadError("--set", [(path, f"not YAML: {str(exc).splitlines()[0]}")]) from None


def resolve(name_or_path: str) -> Path:
    """A workload file by path, or by name under benchmarks/workloads/."""
    path = Path(name_or_path)
    if path.exists():
        return path
    by_name = WORKLOADS / f"{name_or_path.removesuffix('.yaml')}.yaml"
    if by_name.exists():
        return by_name
    raise WorkloadError(name_or_path, [("", f"no such file, and no workload of that name in {WORKLOADS}")])


def load(name_or_path: str, *, smoke: bool = False, sets: list[str] | None = None) -> tuple[Path, AnyWorkload]:
    """A workload file validated; then its `smoke` overrides (with `smoke`) and `sets`, validated again."""
    path = resolve(name_or_path)
    workload = parse(path.read_text(), str(path))
    if smoke or sets:
        data = workload.model_dump(mode="json")
        if smoke:
            data = override(data, workload.smoke)
        if sets:
            data = override(data, sets)
        workload = validate(data, f"{path} (overridden)")
    return path, workload


def every() -> list[Path]:
    return sorted(WORKLOADS.glob("*.yaml"))
