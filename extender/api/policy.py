"""The placement policy: one pydantic model, the single source of truth.

The same model validates inline pod annotations, the spec of the PlacementPolicy custom
resource, the JSON schema printed by `python -m extender schema`, and the CRD's OpenAPI
schema (generated in `extender.api.schema`), so a policy the API server accepts is a policy the
engine understands, and the other way round.
"""

from __future__ import annotations

import json
import math
from enum import StrEnum
from fractions import Fraction
from typing import Annotated, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..limits import (
    MAX_CAPS,
    MAX_FALLBACK_GROUPS,
    MAX_FRACTION_LENGTH,
    MAX_GROUP_SIZE,
    MAX_LABEL_VALUE,
    MAX_MIN_DOMAINS,
    MAX_POLICY_ANNOTATION_BYTES,
    MAX_POLICY_DEPTH,
    MAX_POLICY_ERRORS,
    MAX_POLICY_MESSAGE,
    MAX_POLICY_OBJECT_BYTES,
    MAX_POLICY_ZONES,
    MAX_SELECTOR_EXPRESSIONS,
    MAX_SELECTOR_LABELS,
    MAX_SELECTOR_VALUES,
    MAX_TOPOLOGY_RULES,
)

API_GROUP = "placement.extender.dev"
API_VERSION = "v1alpha1"
KIND = "PlacementPolicy"
PLURAL = "placementpolicies"

# Pod (template) annotations through which a workload opts in.
INLINE_POLICY_ANNOTATION = f"{API_GROUP}/policy"
POLICY_REF_ANNOTATION = f"{API_GROUP}/policy-name"
# The scheduling gate an adopted template carries when its policy places pods by ordinal zone: the
# extender narrows each gated pod's node affinity to its ordinal's zone, then lifts it (gate.py).
ORDINAL_ZONE_GATE = f"{API_GROUP}/ordinal-zone"
# In-scheduler mode (docs/concepts/two-ways-to-run.md): a workload opts in by requesting one of this
# cluster-level extended resource, which no node advertises (the kubelet drops such requests on
# admission) and kube-scheduler's fit ignores (managedResources ignoredByScheduler): it only makes
# kube-scheduler send the pod to the extender. Every other pod is never sent.
OPT_IN_RESOURCE = f"{API_GROUP}/opt-in"
# The second scheduler's name (second-scheduler mode): the `schedulerName` adopt writes, and the
# one `serve` acts for unless told others (--scheduler-name).
SCHEDULER_NAME = "placement-scheduler"
# In-scheduler mode: the gate an adopted template carries so its pods enter kube-scheduler's queue
# only when the extender answers and has a place for them (server/place_gate.py says why).
PLACEABLE_GATE = f"{API_GROUP}/placeable"
# On a pod: the zone requirement the extender ANDed into its node affinity when it lifted the
# gate (JSON {"key", "values"}); the engine reads the pod's constraints without it.
NARROWED_ZONES_ANNOTATION = f"{API_GROUP}/narrowed-zones"
# On a pod waiting for a PlacementPolicy: the policy generation it was last nudged for (an update
# kube-scheduler reacts to by trying the pod again; server/nudge.py).
POLICY_GENERATION_ANNOTATION = f"{API_GROUP}/policy-generation"
# On a template: its StatefulSet's ZoneRotation is declared beside it (committed in git with it,
# written by `adopt -f`), value ZONE_ROTATION_DECLARED. The extender then never decides the set's
# rotation itself: until the record is applied, its pods wait (gated, refused by the filter), so
# the order a GitOps controller applies the objects in changes nothing.
ZONE_ROTATION_ANNOTATION = f"{API_GROUP}/zone-rotation"
ZONE_ROTATION_DECLARED = "declared"
# On a template: the constraints `adopt` added (JSON), so `retire` removes those and nothing else.
IMPLIED_ANNOTATION = f"{API_GROUP}/implied"
# On a template: the native constraints `retire` merged in from translate (JSON), so `adopt` takes
# those out again and nothing else: a workload moved back and forth keeps no leftover rule.
TRANSLATED_ANNOTATION = f"{API_GROUP}/translated"

ZONE_KEY = "topology.kubernetes.io/zone"
LEGACY_ZONE_KEY = "failure-domain.beta.kubernetes.io/zone"
HOSTNAME_KEY = "kubernetes.io/hostname"

LabelKey = Annotated[str, Field(min_length=1, max_length=316, pattern=r"^[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?$")]
ZoneName = Annotated[str, Field(min_length=1, max_length=63)]
LabelValue = Annotated[str, Field(max_length=MAX_LABEL_VALUE)]


class Comparison(StrEnum):
    """How a fractional cap compares a domain's pods with fraction x group size."""

    LESS_THAN = "LessThan"  # pods < p/q x N (NetEase's "fewer than 1/3")
    AT_MOST = "AtMost"  # pods <= p/q x N


class WhenUnsatisfiable(StrEnum):
    """A spread's mode, with the native meaning."""

    DO_NOT_SCHEDULE = "DoNotSchedule"  # a hard rule: filter
    SCHEDULE_ANYWAY = "ScheduleAnyway"  # a preference: score only


class NodeInclusionPolicy(StrEnum):
    """Whether a spread counts only the nodes the pod itself could use (native PodTopologySpread's
    nodeAffinityPolicy / nodeTaintsPolicy)."""

    HONOR = "Honor"  # nodes the pod's constraint excludes do not count: neither their domain nor their pods
    IGNORE = "Ignore"  # every node counts


class AntiAffinityMode(StrEnum):
    REQUIRED = "Required"  # a hard rule: filter
    PREFERRED = "Preferred"  # a preference: score only


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class LabelSelectorRequirement(_Model):
    key: LabelKey = Field(description="The pod label the requirement reads.")
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"] = Field(
        description="In / NotIn: the label's value is / is not one of values; Exists / DoesNotExist: the pod "
        "carries / lacks the label (then values stays empty)."
    )
    values: list[LabelValue] = Field(
        default_factory=list,
        max_length=MAX_SELECTOR_VALUES,
        description="The values In and NotIn compare with (at least one); empty for Exists and DoesNotExist.",
    )

    @model_validator(mode="after")
    def _values_match_operator(self) -> LabelSelectorRequirement:
        if self.operator in ("In", "NotIn") and not self.values:
            raise ValueError(f"operator {self.operator} needs at least one value")
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            raise ValueError(f"operator {self.operator} takes no values")
        return self


class LabelSelector(_Model):
    """A Kubernetes label selector; an empty selector matches every pod of the namespace."""

    matchLabels: dict[str, LabelValue] = Field(
        default_factory=dict,
        max_length=MAX_SELECTOR_LABELS,
        description="Labels a pod must carry with exactly these values.",
    )
    matchExpressions: list[LabelSelectorRequirement] = Field(
        default_factory=list,
        max_length=MAX_SELECTOR_EXPRESSIONS,
        description="Requirements a pod must all meet, besides matchLabels.",
    )

    def matches(self, labels: dict[str, str]) -> bool:
        for key, value in self.matchLabels.items():
            if labels.get(key) != value:
                return False
        for req in self.matchExpressions:
            present = req.key in labels
            if req.operator == "In" and (not present or labels[req.key] not in req.values):
                return False
            if req.operator == "NotIn" and present and labels[req.key] in req.values:
                return False
            if req.operator == "Exists" and not present:
                return False
            if req.operator == "DoesNotExist" and present:
                return False
        return True


class GroupSpec(_Model):
    """Which pods are counted together, and how many there will be."""

    selector: LabelSelector | None = Field(
        default=None,
        description="Pods of the namespace counted as one group (e.g. every shard of a Redis cluster). "
        "Default: the pods of the same StatefulSet as the pod being scheduled.",
    )
    size: int | None = Field(
        default=None,
        ge=1,
        le=MAX_GROUP_SIZE,
        description="The group's total pod count. Default: the sum of spec.replicas of the "
        f"StatefulSets whose pod template the group selects. At most {MAX_GROUP_SIZE:,}.",
    )
    matchLabelKeys: list[LabelKey] = Field(
        default_factory=list,
        max_length=16,
        description="Pod labels whose values split the group (native matchLabelKeys): a pod is counted only with "
        "the group's pods that carry the same values for these keys, e.g. [pod-template-hash] so a Deployment's "
        "old and new revisions are counted apart during a rolling update. A key the pod does not carry is ignored.",
    )

    @field_validator("matchLabelKeys")
    @classmethod
    def _distinct_keys(cls, keys: list[str]) -> list[str]:
        if len(set(keys)) != len(keys):
            raise ValueError("matchLabelKeys lists a key twice")
        return keys

    def split_labels(self, labels: dict[str, str]) -> dict[str, str]:
        """The values of matchLabelKeys a pod carries: the group counts it only with pods alike in them."""
        return {k: labels[k] for k in self.matchLabelKeys if k in labels}


FRACTION_PATTERN = r"^[0-9]+/[1-9][0-9]*$"  # "p/q"; in (0, 1] by the validator (and the CRD's CEL rule)


class Cap(_Model):
    """At most so many of the group's pods in one topology domain (a node, a zone, a rack...)."""

    topologyKey: LabelKey = Field(description="Node label whose value names the domain.")
    max: int | None = Field(default=None, ge=1, description="Absolute maximum pods of the group per domain.")
    fraction: str | None = Field(
        default=None,
        pattern=FRACTION_PATTERN,
        max_length=MAX_FRACTION_LENGTH,
        description='A fraction of the group size in (0, 1], written "p/q", e.g. "1/3".',
    )
    comparison: Comparison | None = Field(
        default=None,
        description='Required with fraction. LessThan: pods in a domain < fraction x size (NetEase "fewer than 1/3"). '
        "AtMost: pods in a domain <= fraction x size (avoids the 3-shard deadlock).",
    )

    @field_validator("fraction")
    @classmethod
    def _fraction_in_unit_interval(cls, fraction: str | None) -> str | None:
        # The CRD holds the same bound as a CEL rule (extender/api/schema.py): model and API server agree.
        if fraction is not None and not 0 < Fraction(fraction) <= 1:
            raise ValueError(f"fraction {fraction} must be in (0, 1]")
        return fraction

    @model_validator(mode="after")
    def _one_form(self) -> Cap:
        if (self.max is None) == (self.fraction is None):
            raise ValueError("a cap takes exactly one of max or fraction")
        if self.fraction is not None:
            if self.comparison is None:
                raise ValueError('a fractional cap must spell out its comparison: "LessThan" or "AtMost"')
        elif self.comparison is not None:
            raise ValueError("comparison goes with fraction; max is always 'at most'")
        return self

    def limit(self, group_size: int | None) -> int | None:
        """Largest pod count a domain may hold; None when the group size is needed but unknown."""
        if self.max is not None:
            return self.max
        if group_size is None:
            return None
        bound = Fraction(self.fraction) * group_size  # type: ignore[arg-type]
        if self.comparison is Comparison.AT_MOST:
            return int(bound)  # floor
        return math.ceil(bound) - 1  # LessThan: the largest integer strictly below the bound

    def describe(self, group_size: int | None) -> str:
        if self.max is not None:
            return f"at most {self.max} per {self.topologyKey}"
        word = "fewer than" if self.comparison is Comparison.LESS_THAN else "no more than"
        of = f"{group_size}" if group_size is not None else "the group (size unknown)"
        return f"{word} {self.fraction} of {of} per {self.topologyKey}"


class Spread(_Model):
    """Even spread over a topology key, with the native scheduler's maxSkew semantics."""

    topologyKey: LabelKey = Field(description="Node label whose value names the domain spread over.")
    maxSkew: int = Field(
        ge=1,
        description="Native semantics: the group's pods in the pod's domain, plus 1, minus the pods in the "
        "emptiest eligible domain, at most maxSkew.",
    )
    whenUnsatisfiable: WhenUnsatisfiable = Field(
        default=WhenUnsatisfiable.DO_NOT_SCHEDULE,
        description="DoNotSchedule: a hard rule (filter); ScheduleAnyway: a preference (score only).",
    )
    minDomains: int | None = Field(
        default=None,
        ge=1,
        le=MAX_MIN_DOMAINS,
        description="DoNotSchedule only. While fewer eligible domains than this exist, the emptiest domain counts "
        "as holding 0 pods (native minDomains): spread over at least this many domains, even before they exist.",
    )
    nodeAffinityPolicy: NodeInclusionPolicy = Field(
        default=NodeInclusionPolicy.HONOR,
        description="Honor: only nodes that match the pod's nodeSelector and required node affinity count "
        "(their domains and their pods); Ignore: every node counts. Native default: Honor.",
    )
    nodeTaintsPolicy: NodeInclusionPolicy = Field(
        default=NodeInclusionPolicy.IGNORE,
        description="Honor: nodes with a NoSchedule or NoExecute taint the pod does not tolerate do not count; "
        "Ignore: every node counts. Native default: Ignore.",
    )

    @model_validator(mode="after")
    def _min_domains_hard_only(self) -> Spread:
        if self.minDomains is not None and self.whenUnsatisfiable is not WhenUnsatisfiable.DO_NOT_SCHEDULE:
            raise ValueError("minDomains applies only with whenUnsatisfiable: DoNotSchedule (as natively)")
        return self


class ShardAntiAffinity(_Model):
    """Pods of one StatefulSet (a shard) kept apart across a topology key."""

    topologyKey: LabelKey = Field(description="Node label whose value names the domain kept apart.")
    mode: AntiAffinityMode = Field(
        default=AntiAffinityMode.REQUIRED,
        description="Required: never two pods of one StatefulSet in a domain (filter); Preferred: fewer of the "
        "StatefulSet's pods in the domain score higher.",
    )


class OrdinalZones(_Model):
    """StatefulSet pod with ordinal i goes to zone order[i mod len(order)] (crl-scheduler)."""

    order: list[ZoneName] | None = Field(
        default=None,
        max_length=MAX_POLICY_ZONES,
        description="Explicit zone order. Default: derived from the zones' node counts, pinned by the "
        "zones that already hold the StatefulSet's pods and volumes, and recorded once in the StatefulSet's "
        "ZoneRotation (docs: stable ordinal zones).",
    )

    @field_validator("order")
    @classmethod
    def _unique(cls, order: list[str] | None) -> list[str] | None:
        if order is not None:
            if not order:
                raise ValueError("order, when given, lists at least one zone")
            if len(set(order)) != len(order):
                raise ValueError("order lists a zone twice")
        return order


class Zones(_Model):
    """Which zones the group's pods may use, and in what order of preference."""

    allowed: list[ZoneName] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_POLICY_ZONES,
        description="Required zones (at least one): nodes outside them, or without a zone label, are filtered.",
    )
    fallbackGroups: list[Annotated[list[ZoneName], Field(max_length=MAX_POLICY_ZONES)]] | None = Field(
        default=None,
        max_length=MAX_FALLBACK_GROUPS,
        description="Ordered zone groups: use the first group's zones; move to the next only when no "
        "candidate node of the earlier groups is feasible.",
    )
    weights: dict[str, Annotated[int, Field(ge=0, le=100)]] | None = Field(
        default=None,
        max_length=MAX_POLICY_ZONES,
        description="Score preference per zone (0-100); unlisted zones weigh 0.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> Zones:
        if self.fallbackGroups is not None:
            if not self.fallbackGroups or any(not g for g in self.fallbackGroups):
                raise ValueError("fallbackGroups needs at least one group and no empty group")
            if self.allowed is not None:
                outside = sorted({z for g in self.fallbackGroups for z in g} - set(self.allowed))
                if outside:
                    raise ValueError(f"fallbackGroups name zones outside allowed: {', '.join(outside)}")
        return self

    def permitted(self) -> frozenset[str] | None:
        """Zones a pod may use at all; None means any zone (and no zone label needed)."""
        sets = []
        if self.allowed is not None:
            sets.append(set(self.allowed))
        if self.fallbackGroups is not None:
            sets.append({z for g in self.fallbackGroups for z in g})
        if not sets:
            return None
        return frozenset(set.intersection(*sets))


class TopologyKeys(_Model):
    """The node labels that name a node's zone and the node itself."""

    zone: LabelKey = Field(
        default=ZONE_KEY,
        description=f"Node label naming the zone. Nodes without it fall back to {LEGACY_ZONE_KEY}.",
    )
    node: LabelKey = Field(
        default=HOSTNAME_KEY, description="Node label naming the node (falls back to the node's name)."
    )


class PlacementPolicySpec(_Model):
    """What a workload asks of the extender. Every section is optional; an empty policy places anywhere."""

    group: GroupSpec = Field(default_factory=GroupSpec)
    topology: TopologyKeys = Field(default_factory=TopologyKeys)
    caps: list[Cap] = Field(
        default_factory=list, max_length=MAX_CAPS, description="Hard caps per topology domain, one per topologyKey."
    )
    zones: Zones | None = None
    ordinalZones: OrdinalZones | None = None
    spread: list[Spread] = Field(default_factory=list, max_length=MAX_TOPOLOGY_RULES)
    shardAntiAffinity: list[ShardAntiAffinity] = Field(default_factory=list, max_length=MAX_TOPOLOGY_RULES)
    deadEndAvoidance: bool = Field(
        default=True,
        description="Filter out a node after which the rest of the group (when its size is known) "
        "could no longer be placed under the hard rules, as long as another node keeps it feasible.",
    )

    @model_validator(mode="after")
    def _cross_checks(self) -> PlacementPolicySpec:
        if self.ordinalZones is not None and self.zones is not None and self.zones.fallbackGroups is not None:
            raise ValueError(
                "ordinalZones and zones.fallbackGroups cannot be combined: ordinal zones pin each ordinal "
                "to one zone, fallback groups move pods between zones"
            )
        if self.ordinalZones is not None and self.ordinalZones.order is not None and self.zones is not None:
            permitted = self.zones.permitted()
            if permitted is not None:
                outside = sorted(set(self.ordinalZones.order) - permitted)
                if outside:
                    raise ValueError(f"ordinalZones.order names zones outside zones.allowed: {', '.join(outside)}")
        for key, items in (
            ("caps", [c.topologyKey for c in self.caps]),
            ("spread", [s.topologyKey for s in self.spread]),
            ("shardAntiAffinity", [a.topologyKey for a in self.shardAntiAffinity]),
        ):
            canon = [self.canonical_key(k) for k in items]
            if len(set(canon)) != len(canon):
                raise ValueError(f"{key} lists the same topologyKey twice")
        return self

    def canonical_key(self, key: str) -> str:
        """The legacy zone label is the zone key: rules on either count the same domains."""
        return self.topology.zone if key in (self.topology.zone, LEGACY_ZONE_KEY, ZONE_KEY) else key

    @property
    def uses_zones(self) -> bool:
        zone = self.topology.zone
        return (
            self.ordinalZones is not None
            or (self.zones is not None and self.zones.permitted() is not None)
            or any(self.canonical_key(k) == zone for k in self.topology_keys())
        )

    def group_rules(self) -> list[str]:
        """The sections that count a group of pods (a pod alone can never break them)."""
        return [name for name in ("caps", "spread", "shardAntiAffinity") if getattr(self, name)]

    def topology_keys(self) -> list[str]:
        keys = [c.topologyKey for c in self.caps] + [s.topologyKey for s in self.spread]
        keys += [a.topologyKey for a in self.shardAntiAffinity]
        return keys


class PolicyError(ValueError):
    """A policy that does not validate; its message is what `kubectl describe pod` shows."""


def format_validation_error(err: ValidationError) -> str:
    """The first few field errors, each naming its field; the rest counted (see MAX_POLICY_ERRORS)."""
    errors = err.errors(include_url=False, include_input=False)
    parts = []
    for e in errors[:MAX_POLICY_ERRORS]:
        loc = ".".join(str(p)[:64] for p in e["loc"]) or "spec"
        msg = e["msg"].removeprefix("Value error, ")
        parts.append(f"{loc}: {msg}")
    more = len(errors) - MAX_POLICY_ERRORS
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def parse_spec(data: object, source: str) -> PlacementPolicySpec:
    """Validate a policy spec from a mapping; raise PolicyError naming the source and the field."""
    if not isinstance(data, dict):
        raise PolicyError(f"invalid placement policy in {source}: expected a mapping, got {type(data).__name__}")
    size = len(json.dumps(data, default=str, separators=(",", ":")).encode("utf-8", "surrogatepass"))
    if size > MAX_POLICY_OBJECT_BYTES:
        raise PolicyError(
            f"invalid placement policy in {source}: the spec is {size:,} bytes of JSON; the limit is "
            f"{MAX_POLICY_OBJECT_BYTES:,} (every list in it is bounded too: docs/reference/limits.md)"
        )
    try:
        return PlacementPolicySpec.model_validate(data)
    except ValidationError as err:
        raise PolicyError(f"invalid placement policy in {source}: {format_validation_error(err)}") from None


def parse_annotation(text: str, source: str) -> PlacementPolicySpec:
    """The inline annotation holds the spec as JSON or YAML.

    Any text gives a spec or a PolicyError (the pod's validation message), never another
    exception, and in bounded time: the size is checked first; YAML's nesting and tags are read
    from its event stream before anything is built (PyYAML's composer recurses per level, its
    scanner slows quadratically with flow nesting: a 32 KB `[[[[...` took over a second); the
    decoded value's depth is checked before the model walks it; and the message is bounded.
    """
    size = _utf8_size(text)
    if size > MAX_POLICY_ANNOTATION_BYTES:
        raise PolicyError(
            f"invalid placement policy in {source}: the annotation is {size:,} bytes; the limit is "
            f"{MAX_POLICY_ANNOTATION_BYTES:,} (use a PlacementPolicy object for large policies)"
        )
    try:
        data = json.loads(text)
    except RecursionError:  # json's C decoder stops near the recursion limit: cheap, and final
        raise _too_deep(source, MAX_POLICY_DEPTH) from None
    except ValueError:
        data = _load_yaml(_without_lone_surrogates(text), source, MAX_POLICY_DEPTH)
    if data is None:
        data = {}
    if _nests_deeper(data, MAX_POLICY_DEPTH):  # YAML aliases can nest deeper than the text shows
        raise _too_deep(source, MAX_POLICY_DEPTH)
    try:
        return parse_spec(data, source)
    except PolicyError as err:
        raise _shortened(err) from None


# spec > group > selector > matchExpressions > [i] > values: the deepest a valid policy goes.
_POLICY_DEPTH_NEEDED = 6
# libyaml's parser when PyYAML has it (7x faster on large annotations), else PyYAML's own; both safe.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_HARMLESS_TAGS = frozenset({"!", "tag:yaml.org,2002:str"})


# The longest validation message: kube-scheduler repeats it for every candidate node, and
# events.k8s.io caps an event's note at 1 KB. One error per list entry made a 30 KB annotation
# say 650 KB: a 3 GB filter answer over 5,000 nodes.
def _load_yaml(text: str, source: str, max_depth: int) -> object:
    """The YAML document, once its events show nothing that could fail other than cleanly."""
    try:
        _check_yaml_events(text, source, max_depth)
        return yaml.load(text, Loader=_YAML_LOADER)
    except RecursionError:  # backstop; the event check keeps the composer shallow
        raise _too_deep(source, max_depth) from None
    except (yaml.YAMLError, UnicodeError) as err:
        raise PolicyError(f"invalid placement policy in {source}: not JSON or YAML ({err})") from None
    except PolicyError:
        raise
    except ValueError as err:
        # A plain scalar YAML resolves but cannot build: a timestamp 2024-02-30 or +99:00, an
        # integer beyond Python's 4,300-digit limit.
        reason = str(err).split("; use sys.set_int_max_str_digits()")[0]
        raise PolicyError(f"invalid placement policy in {source}: not JSON or YAML ({reason})") from None


def _check_yaml_events(text: str, source: str, max_depth: int) -> None:
    """Refuse, from the parser's events and before anything is built, what the loader handles
    badly: collections nested deeper than `max_depth` (the composer recurses per level), and
    explicit tags such as `!!int ''`, on which PyYAML's constructors raise IndexError, KeyError
    or AttributeError. A policy needs no tags; `!!str` and `!` (force a string) are harmless.
    The parser is a state machine, and this stops at the first level too many."""
    loader = _YAML_LOADER(text)
    try:
        depth = 0
        while loader.check_event():
            event = loader.get_event()
            tag = getattr(event, "tag", None)
            if tag is not None and tag not in _HARMLESS_TAGS:
                shown = tag.replace("tag:yaml.org,2002:", "!!")[:40]
                raise PolicyError(
                    f"invalid placement policy in {source}: YAML tags are not allowed (found {shown}); "
                    "write the value without one, quoted if it is a string"
                )
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > max_depth:
                    raise _too_deep(source, max_depth)
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
    finally:
        loader.dispose()


def _too_deep(source: str, limit: int) -> PolicyError:
    return PolicyError(
        f"invalid placement policy in {source}: mappings/lists nest more than {limit} deep, the limit "
        f"(a valid policy needs at most {_POLICY_DEPTH_NEEDED}; check the indentation and brackets)"
    )


def _shortened(err: PolicyError) -> PolicyError:
    """The error, its message cut after the last whole "field: problem" part that fits."""
    message = str(err)
    if len(message) <= MAX_POLICY_MESSAGE:
        return err
    head = message[: MAX_POLICY_MESSAGE - 48]
    cut = head.rfind("; ")
    head = head[:cut] if cut > head.find(": ") else head
    return PolicyError(f"{head}; and {len(message) - len(head):,} more characters of errors")


def _without_lone_surrogates(text: str) -> str:
    """U+FFFD for each lone surrogate, as the API server (Go) would store the text: libyaml reads
    only UTF-8, and PyYAML refuses surrogates with a less helpful message."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in text)
    return text


def _utf8_size(text: str) -> int:
    """The annotation's size as the API server counts it (a lone surrogate is 3 bytes, as U+FFFD)."""
    return len(text) if text.isascii() else len(text.encode("utf-8", errors="surrogatepass"))


def _nests_deeper(value: object, limit: int) -> bool:
    """Whether mappings/lists nest more than `limit` deep ({} is 1).

    Level by level, each container counted once per level: YAML aliases can share a subtree many
    times over (a billion laughs) or contain themselves, and neither costs more than `limit`
    passes over the distinct containers.
    """
    level: list[object] = [value] if isinstance(value, (dict, list)) else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return True
        seen: set[int] = set()
        below: list[object] = []
        for node in level:
            for child in node.values() if isinstance(node, dict) else node:  # type: ignore[attr-defined]
                if isinstance(child, (dict, list)) and id(child) not in seen:
                    seen.add(id(child))
                    below.append(child)
        level = below
    return False
