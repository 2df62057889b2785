"""Shared helpers: percentiles, the machine description, tables and JSON result files."""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results"


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100), linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return float("nan")
    data = sorted(values)
    if len(data) == 1:
        return data[0]
    pos = (len(data) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(data) - 1)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def summary_ms(samples_s: Sequence[float]) -> dict[str, float]:
    """median, p90, p99, max (and mean, min, n) of durations in seconds, reported in milliseconds."""
    ms = [s * 1000.0 for s in samples_s]
    return {
        "n": len(ms),
        "min": round(min(ms), 3),
        "median": round(statistics.median(ms), 3),
        "mean": round(statistics.fmean(ms), 3),
        "p90": round(percentile(ms, 90), 3),
        "p99": round(percentile(ms, 99), 3),
        "max": round(max(ms), 3),
    }


def loadavg() -> tuple[float, float, float]:
    try:
        return os.getloadavg()
    except OSError:  # pragma: no cover
        return (float("nan"),) * 3  # type: ignore[return-value]


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:  # pragma: no cover
        pass
    return platform.processor() or "unknown"


def code_version() -> dict[str, Any]:
    """Which extender code was measured: the git HEAD, the files of extender/ that differ from it,
    and a digest of extender/ as it is on disk (the figures belong to exactly that code)."""
    digest = hashlib.sha256()
    for path in sorted((REPO / "extender").rglob("*.py")):
        digest.update(str(path.relative_to(REPO)).encode())
        digest.update(path.read_bytes())
    out: dict[str, Any] = {"extender_sha256": digest.hexdigest()[:16]}
    try:
        out["git_head"] = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
        status = subprocess.run(
            ["git", "status", "--porcelain", "--", "extender"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout
        out["extender_uncommitted"] = sorted(line[3:] for line in status.splitlines() if line.strip())
    except (OSError, subprocess.CalledProcessError):
        out["git_head"] = None
    return out


def machine() -> dict[str, Any]:
    return {
        "code": code_version(),
        "nproc": os.cpu_count(),
        "cpu_model": cpu_model(),
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "loadavg_at_start": [round(x, 2) for x in loadavg()],
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def vm_status(pid: int | str = "self") -> dict[str, int]:
    """VmRSS / VmHWM (peak RSS) of a process, in KiB, from /proc/<pid>/status."""
    out: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("VmRSS:", "VmHWM:")):
            key, value = line.split(":", 1)
            out[key] = int(value.split()[0])
    return out


def worker_pid(master_pid: int) -> int | None:
    """The gunicorn worker under a master: its first child (the extender runs one worker)."""
    try:
        children = Path(f"/proc/{master_pid}/task/{master_pid}/children").read_text().split()
    except OSError:
        return None
    return int(children[0]) if children else None


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    rows = [[_fmt(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    sep = "  ".join("-" * w for w in widths)
    body = ["  ".join(c.rjust(w) if _numeric(c) else c.ljust(w) for c, w in zip(r, widths, strict=False)) for r in rows]
    return "\n".join([line, sep, *body])


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        if value != value:  # nan
            return "-"
        return f"{value:.3f}" if abs(value) < 100 else f"{value:.1f}"
    return str(value)


def _numeric(text: str) -> bool:
    try:
        float(text.rstrip("x%"))
        return True
    except ValueError:
        return False


def result_name(data: dict[str, Any]) -> str:
    """A result file's name says what it is: workload, commit, date (`pair-5k_c09d8e4_2026-11-28`);
    a before/after run's commit is `BASE..HEAD`. No tracker or work-period number: those mean
    nothing to a reader of the results."""
    workload = data.get("workload") or {}
    name = workload.get("name", "result") if isinstance(workload, dict) else str(workload)
    machine_info = data.get("machine") or {}
    head = (machine_info.get("code") or {}).get("git_head") or "nogit"
    commit = f"{data['base']}..{data.get('head') or head}" if data.get("base") else head
    date = str(machine_info.get("time") or time.strftime("%Y-%m-%d", time.gmtime()))[:10]
    return f"{name}_{commit}_{date}"


def write_result(data: dict[str, Any], out: Path | None = None) -> Path:
    """Write JSON next to the scripts (benchmarks/results/<result_name>.json, a `-2`, `-3` ... suffix
    where a run of that name is already there, unless `out` says otherwise)."""
    path = out or RESULTS / f"{result_name(data)}.json"
    if out is None:
        stem, n = path.stem, 2
        while path.exists():
            path, n = RESULTS / f"{stem}-{n}.json", n + 1
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")
    return path


def verdict(value: float, target: float, *, higher_is_better: bool = False) -> str:
    ok = value >= target if higher_is_better else value <= target
    return "met" if ok else "MISSED"


# ------------------------------------------------------------------------------------ Go floor
GO_FLOOR_SOURCE = Path(__file__).resolve().parent / "gofloor"
GO_FLOOR_FILES = ("main.go", "go.mod", "go.sum")
# Bump when the build command below changes, to invalidate cached binaries.
GO_FLOOR_RECIPE = "recipe=1 CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags=-s -w"


@dataclass
class GoFloorBuild:
    """Where the Go floor binary is, or why there is none (`path` None, `reason` says)."""

    path: Path | None
    reason: str = ""
    key: str = ""
    cached: bool = False
    build_seconds: float = 0.0

    def describe(self) -> dict[str, Any]:
        return {
            "available": self.path is not None,
            "reason": self.reason or None,
            "binary": str(self.path) if self.path else None,
            "key": self.key,
            "cached": self.cached,
            "build_seconds": round(self.build_seconds, 1),
        }


def go_floor_cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "placement-extender"


def go_floor_key() -> str:
    """12 hex of sha256 over benchmarks/gofloor/{main.go,go.mod,go.sum} and the build recipe."""
    digest = hashlib.sha256(GO_FLOOR_RECIPE.encode())
    for name in GO_FLOOR_FILES:
        digest.update(name.encode() + b"\0")
        digest.update((GO_FLOOR_SOURCE / name).read_bytes())
    return digest.hexdigest()[:12]


def build_go_floor(*, timeout: float = 900.0, log=print) -> GoFloorBuild:
    """benchmarks/gofloor built with the Go toolchain into
    ${XDG_CACHE_HOME:-~/.cache}/placement-extender/gofloor-<key>/gofloor, reused when present (as
    hack/kube/build.sh caches the Kubernetes binaries). Concurrent builders of one key wait on a
    lock; the binary appears by an atomic rename. Never raises: a missing `go` or a failed build
    comes back as a reason."""
    import fcntl
    import shutil
    import tempfile

    try:
        key = go_floor_key()
    except OSError as exc:
        return GoFloorBuild(None, f"no Go floor source: {exc}")
    key_dir = go_floor_cache_root() / f"gofloor-{key}"
    binary = key_dir / "gofloor"
    if os.access(binary, os.X_OK):
        return GoFloorBuild(binary, key=key, cached=True)
    go = shutil.which("go")
    if go is None:
        return GoFloorBuild(None, "go not found in PATH", key=key)
    started = time.monotonic()
    try:
        key_dir.mkdir(parents=True, exist_ok=True)
        with open(key_dir / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if os.access(binary, os.X_OK):  # built by a concurrent run while we waited
                return GoFloorBuild(binary, key=key, cached=True, build_seconds=time.monotonic() - started)
            log(f"Go floor: building {GO_FLOOR_SOURCE.relative_to(REPO)} into {key_dir} (first run only)")
            env = dict(os.environ, CGO_ENABLED="0")
            env.setdefault("GOTOOLCHAIN", "local")  # a too-old go fails with a reason, downloads nothing
            nice = ["nice", "-n", "10"] if shutil.which("nice") else []
            with tempfile.TemporaryDirectory(prefix=".build.", dir=key_dir) as stage:
                argv = [
                    *nice,
                    go,
                    "build",
                    "-mod=readonly",
                    "-trimpath",
                    "-ldflags=-s -w",
                    "-o",
                    f"{stage}/gofloor",
                    ".",
                ]
                done = subprocess.run(
                    argv, cwd=GO_FLOOR_SOURCE, env=env, capture_output=True, text=True, timeout=timeout
                )
                if done.returncode != 0:
                    tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
                    return GoFloorBuild(None, f"go build failed ({done.returncode}): {tail}", key=key)
                os.replace(f"{stage}/gofloor", binary)
    except subprocess.TimeoutExpired:
        return GoFloorBuild(None, f"go build took over {timeout:.0f}s", key=key)
    except OSError as exc:
        return GoFloorBuild(None, f"cannot build: {exc}", key=key)
    return GoFloorBuild(binary, key=key, build_seconds=time.monotonic() - started)


@dataclass(frozen=True)
class Histogram:
    """One Prometheus histogram series: cumulative bucket counts by upper bound, sum and count."""

    buckets: tuple[tuple[float, float], ...]  # (le, cumulative count), ascending, +Inf last
    total: float
    count: float

    def minus(self, earlier: Histogram | None) -> Histogram:
        """What happened between two scrapes of the same series (counters only grow)."""
        if earlier is None:
            return self
        before = dict(earlier.buckets)
        return Histogram(
            tuple((le, n - before.get(le, 0.0)) for le, n in self.buckets),
            self.total - earlier.total,
            self.count - earlier.count,
        )

    def quantile(self, q: float) -> float:
        """The q-quantile (0..1) as Prometheus's histogram_quantile estimates it, linear within a
        bucket; math.inf when the rank lies beyond the last finite bound (nothing more is known)."""
        if self.count <= 0:
            return math.nan
        rank = q * self.count
        lower_le, lower_n = 0.0, 0.0
        for le, n in self.buckets:
            if n >= rank and n > 0:
                if le == math.inf:
                    return math.inf
                return lower_le + (le - lower_le) * ((rank - lower_n) / (n - lower_n) if n > lower_n else 1.0)
            lower_le, lower_n = le, n
        return math.inf

    def summary_ms(self) -> dict[str, float | str]:
        """calls, mean, and the bucket-estimated median, p90, p99, in milliseconds; a quantile past
        the last finite bucket is written ">bound" (kube-scheduler's Bind buckets end at 204.8 ms)."""
        if self.count <= 0:
            return {"calls": 0}
        finite = [le for le, _ in self.buckets if le != math.inf]
        out: dict[str, float | str] = {"calls": int(self.count), "mean": round(1000 * self.total / self.count, 2)}
        for name, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
            value = self.quantile(q)
            out[name] = round(1000 * value, 2) if value != math.inf else f">{1000 * max(finite, default=0):g}"
        return out


def sum_series(series: list[Histogram]) -> Histogram:
    """Several series of one histogram (labels apart) as one."""
    bounds = sorted({le for h in series for le, _ in h.buckets})
    buckets = tuple((le, sum(dict(h.buckets).get(le, 0.0) for h in series)) for le in bounds)
    return Histogram(buckets, sum(h.total for h in series), sum(h.count for h in series))


def read_histograms(text: str, name: str) -> dict[tuple[tuple[str, str], ...], Histogram]:
    """Every series of the histogram `name` in a /metrics text, keyed by its labels (le aside), parsed
    with prometheus_client's own exposition parser."""
    from prometheus_client.parser import text_string_to_metric_families

    series: dict[tuple[tuple[str, str], ...], dict[str, Any]] = {}
    for family in text_string_to_metric_families(text):
        if family.name != name:
            continue
        for sample in family.samples:
            labels = tuple(sorted((k, v) for k, v in sample.labels.items() if k != "le"))
            entry = series.setdefault(labels, {"buckets": [], "sum": 0.0, "count": 0.0})
            if sample.name.endswith("_bucket"):
                entry["buckets"].append((float(sample.labels["le"]), sample.value))
            elif sample.name.endswith("_sum"):
                entry["sum"] = sample.value
            elif sample.name.endswith("_count"):
                entry["count"] = sample.value
    return {labels: Histogram(tuple(sorted(e["buckets"])), e["sum"], e["count"]) for labels, e in series.items()}


def tree_cpu(pid: int) -> float:
    """CPU seconds (user + system) of live process `pid` and its live descendants, from /proc: the
    children of every thread, as a Go program (kube-apiserver, the scheduler_perf harness) starts its
    children from any of its threads."""
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            for task in Path(f"/proc/{current}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, IndexError, ValueError):
            continue  # exited meanwhile
    return total
