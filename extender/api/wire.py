"""kube-scheduler's extender protocol (k8s.io/kube-scheduler/extender/v1), modelled exactly.

The Go types have no json tags: kube-scheduler writes Go field names (`Pod`, `NodeNames`,
`FailedNodes`...), writes nil pointers/maps/slices as `null`, and reads answers back with
case-insensitive key matching. We accept keys in any case, as Go does, and answer with the exact
Go spelling, field order and `null`s, map keys sorted, so our bytes equal what Go marshals
(tests/fixtures/wire holds Go's own output).
"""

from __future__ import annotations

import itertools
import json
import math
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, RootModel, model_validator

from ..limits import MAX_REQUEST_DEPTH

MAX_EXTENDER_PRIORITY = 10
# Go's int64, the type of every integer in the extender/v1 types.
_INT64 = {"ge": -(2**63), "le": 2**63 - 1}


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
            if name is not None:
                folded[name] = value  # a later spelling wins, as in Go's decoder
        return folded


KubeObject = dict[str, Any]


class NodeList(_Wire):
    """v1.NodeList as Go marshals it inside ExtenderArgs: {"metadata":{},"items":[...]}."""

    metadata: dict[str, Any] = Field(default_factory=dict)
    items: list[KubeObject] = Field(default_factory=list, fail_fast=True)


class ExtenderArgs(_Wire):
    Pod: KubeObject
    Nodes: NodeList | None = None
    # fail_fast on every list and map: a million wrong entries make one error, not a million
    # error objects (gigabytes for a body of a few megabytes).
    NodeNames: list[str] | None = Field(default=None, fail_fast=True)

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
        return [str(_dict(n.get("metadata")).get("name", "")) for n in self.Nodes.items]

    def candidate_count(self) -> int:
        """How many nodes kube-scheduler asks about, in either mode."""
        if self.NodeNames is not None:
            return len(self.NodeNames)
        return len(self.Nodes.items) if self.Nodes is not None else 0


class ExtenderFilterResult(_Wire):
    Nodes: dict[str, Any] | None = None
    NodeNames: list[str] | None = None
    FailedNodes: dict[str, str] | None = None
    FailedAndUnresolvableNodes: dict[str, str] | None = None
    Error: str = ""


class HostPriority(_Wire):
    Host: str
    Score: int = Field(**_INT64)


class HostPriorityList(RootModel[list[HostPriority]]):
    root: list[HostPriority] = Field(fail_fast=True)


class FailedNodeReasons(StrEnum):
    """Which filter answers list a reason per refused node.

    kube-scheduler reads FailedNodes / FailedAndUnresolvableNodes only to explain a pod no node
    passes (its FitError, the FailedScheduling event, preemption's candidates): when some node
    passes, the reasons go into a diagnosis it discards (`findNodesThatPassExtenders` and
    `schedulePod` in pkg/scheduler/schedule_one.go, v1.33-v1.37; the one trace left is the
    `evaluatedNodes` count in a V(2) log line). WHEN_NONE_PASS leaves them out then: most of a
    5,000-node answer's bytes, encoded by us and decoded by kube-scheduler for nothing.
    ALWAYS is for a kube-scheduler with another extender configured after this one: if that one
    refuses every node we passed, our reasons are part of the pod's FitError, and without them
    preemption treats the nodes we refused as unresolvable (never preempts there)."""

    WHEN_NONE_PASS = "when-none-pass"
    ALWAYS = "always"


@dataclass(frozen=True, slots=True)
class Priorities:
    """A HostPriorityList on the way out, as (hosts, score) groups: encoded without a model or a
    dict per entry (kube-scheduler reads the list as a map, so the order is the groups')."""

    groups: list[tuple[list[str], int]]

    @property
    def scores(self) -> dict[str, int]:
        return {host: score for hosts, score in self.groups for host in hosts}

    def as_model(self) -> HostPriorityList:
        return HostPriorityList([HostPriority(Host=h, Score=s) for hosts, s in self.groups for h in hosts])


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
    Pods: list[MetaPod] | None = Field(default=None, fail_fast=True)
    NumPDBViolations: int = Field(default=0, **_INT64)


class Victims(_Wire):
    Pods: list[KubeObject] | None = Field(default=None, fail_fast=True)
    NumPDBViolations: int = Field(default=0, **_INT64)


class ExtenderPreemptionArgs(_Wire):
    Pod: KubeObject
    NodeNameToVictims: dict[str, Victims] | None = Field(default=None, fail_fast=True)
    NodeNameToMetaVictims: dict[str, MetaVictims] | None = Field(default=None, fail_fast=True)

    def candidate_count(self) -> int:
        """How many nodes kube-scheduler proposes victims on (it sends one of the two maps)."""
        return max(len(self.NodeNameToVictims or ()), len(self.NodeNameToMetaVictims or ()))


class ExtenderPreemptionResult(_Wire):
    NodeNameToMetaVictims: dict[str, MetaVictims] | None = Field(default=None, fail_fast=True)


_MAP_FIELDS = {"FailedNodes", "FailedAndUnresolvableNodes", "NodeNameToMetaVictims", "NodeNameToVictims"}


def _go_order(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: (dict(sorted(v.items())) if k in _MAP_FIELDS and isinstance(v, dict) else _go_order(v))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_go_order(v) for v in value]
    return value


def go_bytes(value: Any, *, sort_keys: bool = False) -> bytes:
    """`value` as Go's encoding/json.Marshal writes it (compact, HTML-safe escapes, raw UTF-8).

    orjson writes the same bytes as `json.dumps(separators=(",", ":"), ensure_ascii=False)`
    (a property test holds them equal), several times faster on a 5,000-node answer; Go's three
    HTML escapes and U+2028/2029 are added after, and only where such a byte occurs. What orjson
    refuses (a lone surrogate, an integer beyond 64 bits) takes the slower path below.
    `sort_keys` sorts every map's keys, as Go writes a map (not a struct).
    """
    try:
        out = orjson.dumps(value, option=orjson.OPT_SORT_KEYS if sort_keys else None)
    except (orjson.JSONEncodeError, TypeError):
        return _go_text(_sorted_maps(value) if sort_keys else value).encode("utf-8")
    if b"<" in out or b">" in out or b"&" in out:
        out = out.replace(b"<", b"\\u003c").replace(b">", b"\\u003e").replace(b"&", b"\\u0026")
    if not out.isascii():
        out = out.replace(_LINE_SEPARATOR, b"\\u2028").replace(_PARAGRAPH_SEPARATOR, b"\\u2029")
    return out


_LINE_SEPARATOR = "\u2028".encode()
_PARAGRAPH_SEPARATOR = "\u2029".encode()


def go_json(value: Any) -> str:
    """As go_bytes, as text."""
    return go_bytes(value).decode("utf-8")


def _go_text(value: Any) -> str:
    """The json.dumps path: total over strings. A lone surrogate (Python's json reads "\\ud800"
    as one) cannot be encoded as UTF-8, so it is written as Go writes invalid UTF-8, the escape
    \\ufffd."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    if not text.isascii():
        text = text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
        if _SURROGATE.search(text):
            text = _SURROGATE.sub(r"\\ufffd", text)
    return text


def _sorted_maps(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted_maps(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted_maps(v) for v in value]
    return value


def encode_bytes(model: BaseModel | Priorities) -> bytes:
    """A wire model as Go would marshal it (the HTTP answer's body)."""
    if isinstance(model, Priorities):
        return _priorities_bytes(model)
    if isinstance(model, ExtenderFilterResult) and model.Nodes is None:
        return _filter_result_bytes(model)
    return go_bytes(_go_order(model.model_dump(mode="json")))


def _priorities_bytes(priorities: Priorities) -> bytes:
    """[{"Host":h,"Score":s},...] written group by group at C speed: a group's hosts encoded as one
    JSON array, whose item separators (a `","` can occur nowhere else in it: a quote inside a
    string is escaped) become the text between one entry's host and the next's. The same bytes
    as encoding the list of dicts (a test holds them equal)."""
    parts = []
    for hosts, score in priorities.groups:
        if not hosts:
            continue
        if not isinstance(score, int) or not -(2**63) <= score < 2**63:
            return go_bytes([{"Host": h, "Score": s} for hosts, s in priorities.groups for h in hosts])
        names = go_bytes(hosts)  # ["a","b"], Go's escapes applied
        tail = b'","Score":%d}' % score
        parts.append(b'{"Host":"' + names[2:-2].replace(b'","', tail + b',{"Host":"') + tail)
    return b"[" + b",".join(parts) + b"]"


def _filter_result_bytes(result: ExtenderFilterResult) -> bytes:
    """ExtenderFilterResult in NodeNames mode, field by field in Go's struct order, each map with
    sorted keys: the same bytes as the model's generic path (a test holds them equal), without
    dumping a 5,000-entry model to dicts and sorting them in Python first."""
    return b"".join(
        (
            b'{"Nodes":null,"NodeNames":',
            go_bytes(result.NodeNames),
            b',"FailedNodes":',
            go_bytes(result.FailedNodes, sort_keys=True),
            b',"FailedAndUnresolvableNodes":',
            go_bytes(result.FailedAndUnresolvableNodes, sort_keys=True),
            b',"Error":',
            go_bytes(result.Error),
            b"}",
        )
    )


def encode(model: BaseModel | Priorities) -> str:
    """As encode_bytes, as text."""
    return encode_bytes(model).decode("utf-8")


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


# -- reading request bodies -------------------------------------------------------------------------
# A body is read as Go's encoding/json reads it, and bounded before it is decoded: whatever the
# bytes, the result is a value or a WireError (a 400 naming the problem), never an exception that
# would turn into a 500.


class WireError(ValueError):
    """A body kube-scheduler could not have sent; its message says what is wrong with it."""


_SURROGATE = re.compile("[\ud800-\udfff]")
# A \uD800-\uDFFF escape in the raw bytes: the only way a lone surrogate gets into a decoded str.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
# What shapes JSON's nesting: brackets (as +1/-1 bytes), quotes, backslashes and the letters
# that can follow a backslash (all as "n"); every other byte is dropped.
_ESCAPED = b"/bfnrtu"
_BRACKETS = {ord("{"): 1, ord("["): 1, ord("}"): 255, ord("]"): 255}
_STRUCTURE = bytes(_BRACKETS.get(b, ord("n") if b in _ESCAPED else b) for b in range(256))
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'[]{}"\\' + _ESCAPED)
_ESCAPE = re.compile(rb"\\.", re.DOTALL)
# Nineteen digits in a row, found at C speed (a regex scan costs a millisecond on a 5,000-node
# body): the shortest integer orjson reads as a float is -9223372036854775809 (below int64).
_DIGITS = bytes(ord("0") if chr(b).isdigit() and b < 128 else ord(".") for b in range(256))
_LONG_DIGITS = b"0" * 19


def nests_deeper(raw: bytes, limit: int) -> bool:
    """Whether a JSON text nests more than `limit` arrays/objects deep (`{}` is 1, `[{}]` 2).

    Exact for valid JSON; for anything else, json.loads refuses the text anyway. Runs at C speed,
    about a seventh of the time json.loads takes (a 22 MB NodeList: 65 ms, against 475 ms to
    decode): everything but brackets, quotes and escapes is dropped, then the escapes (so no \\"
    ends a string), then what lies between quotes; of the brackets left, innermost pairs are
    dropped a few times over (they are most of them), and the running sum of the rest is the depth.
    """
    if raw.count(b"{") + raw.count(b"[") <= limit:  # no deeper than its opening brackets (a NodeNames body)
        return False
    marks = raw.translate(_STRUCTURE, _NOT_STRUCTURE)
    if b"\\" in marks:
        marks = _ESCAPE.sub(b"", marks)
    marks = marks.translate(None, b"n")
    if b'"' in marks:
        # Most strings are now "", and two adjacent quotes (an empty string, or one string's end
        # and the next one's start) can go without moving any bracket in or out of a string.
        marks = marks.replace(b'""', b"")
        marks = b"".join(marks.split(b'"')[::2])
    removed = 0  # levels of innermost pairs dropped: the depth is that plus the depth of what is left
    while removed + len(marks) > limit and removed < 4:
        inner = marks.replace(b"\x01\xff", b"")
        if len(inner) == len(marks):
            break
        marks, removed = inner, removed + 1
    if removed + len(marks) <= limit:
        return False
    return removed + max(itertools.accumulate(memoryview(marks).cast("b")), default=0) > limit


def decode_json(raw: bytes, *, max_depth: int = MAX_REQUEST_DEPTH) -> Any:
    """A request body as Go's encoding/json would decode it, or WireError saying why not.

    Like Go: invalid UTF-8 and lone surrogate escapes read as U+FFFD, NaN/Infinity and numbers
    beyond float64 are refused. Unlike Python's json.loads, nothing deeper than `max_depth` is
    decoded, so no code walking the result can exhaust the stack.
    """
    if nests_deeper(raw, max_depth):
        raise WireError(
            f"the body nests arrays/objects more than {max_depth} deep, the limit (MAX_REQUEST_DEPTH); "
            "kube-scheduler's requests nest about 15 deep"
        )
    text = raw.decode("utf-8", errors="replace")
    if _LONG_DIGITS in raw.translate(_DIGITS):  # orjson reads an integer beyond 64 bits as a float; json keeps it
        value = _decode_slowly(text, max_depth)
    else:
        try:
            value = orjson.loads(text)  # the common case, several times faster than json.loads
        except orjson.JSONDecodeError:  # what orjson refuses (NaN, 1e400, a lone surrogate escape):
            value = _decode_slowly(text, max_depth)  # json.loads decides, and its error is reported
    if _SURROGATE_ESCAPE.search(raw):
        value = _replace_surrogates(value)
    return value


def _decode_slowly(text: str, max_depth: int) -> Any:
    """json.loads, with the refusals Go makes (NaN/Infinity, floats beyond float64)."""
    try:
        value = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except RecursionError:  # backstop: the scan above is exact for valid JSON
        raise WireError(f"the body nests arrays/objects more than {max_depth} deep, the limit") from None
    except ValueError as err:
        raise WireError(f"malformed JSON: {_tidy(err)}") from None
    return value


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _finite_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"number {text[:40]} is beyond the range of a 64-bit float")
    return number


def _tidy(err: ValueError) -> str:
    """The decoder's message, without advice meant for the extender's operator."""
    return str(err).split("; use sys.set_int_max_str_digits()")[0]


def _replace_surrogates(value: Any) -> Any:
    """Lone surrogates replaced by U+FFFD in every string and key, as Go decodes them.

    Only called when the body holds a surrogate escape (rare: Go writes UTF-8), and iterative, as
    the value may nest up to MAX_REQUEST_DEPTH.
    """

    def fix(s: str) -> str:
        return s if s.isascii() or not _SURROGATE.search(s) else _SURROGATE.sub("\ufffd", s)

    if isinstance(value, str):
        return fix(value)
    stack: list[Any] = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if any(not k.isascii() for k in node):
                items = [(fix(k), v) for k, v in node.items()]
                node.clear()
                node.update(items)
            for k, v in node.items():
                if isinstance(v, str):
                    node[k] = fix(v)
                elif isinstance(v, (dict, list)):
                    stack.append(v)
        else:
            for i, v in enumerate(node):
                if isinstance(v, str):
                    node[i] = fix(v)
                elif isinstance(v, (dict, list)):
                    stack.append(v)
    return value
