"""The version matrix: e2e scenarios on every supported Kubernetes minor (all of them on the
newest, the version-sensitive ones, EVERY_MINOR below, on the others), and the support table
made from the results (docs/install/versions.md, SUPPORT_PAGE).

    python hack/matrix.py run   [--minors 1.37,1.34] [--out DIR]   # make test-matrix
    python hack/matrix.py run --minors older --newest-from FILE     # CI, after `make test`
    python hack/matrix.py table [--out DIR] [--page docs/install/versions.md]   # make support-table

`run` does, for each minor in extender/kube/versions.py SUPPORTED_MINORS (newest first):
build or reuse its binaries (hack/kube/build.sh, timed on its own), then its e2e scenarios on
them (pytest over scenarios_for(minor), timed, E2E_RESULTS=<DIR>/e2e-<minor>.json). It writes <DIR>/matrix.json and
prints the table; it exits non-zero if any minor's build or suite failed, after running them all.
`table` turns <DIR>/matrix.json into the markdown table; with --page it replaces the block
between the support-table markers in that file (the documentation's page is SUPPORT_PAGE).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from extender.kube.versions import SUPPORTED_MINORS  # noqa: E402

IMAGE = "registry.k8s.io/kube-scheduler"
BEGIN = "<!-- support-table:begin (make support-table writes this block from test-logs/matrix/matrix.json) -->"
END = "<!-- support-table:end -->"
# The page holding the block: the documentation's "Supported Kubernetes versions".
SUPPORT_PAGE = REPO / "docs" / "install" / "versions.md"


# The scenarios that run on every minor: those whose outcome can depend on the Kubernetes version
# (what that minor's kube-scheduler, API server or controllers do), each with the reason. The
# newest minor runs the whole suite; the other scenarios test the extender's own logic (rules,
# dead ends, planning, remedies, operator commands, soak), which no minor changes, through the
# protocol these prove on every minor (NEWEST_ONLY, below, says why for each).
EVERY_MINOR = {
    "tests/e2e/test_burst.py": "the wire protocol with node names, kube-scheduler's asynchronous binding and the "
    "bind verb under a burst",
    "tests/e2e/test_node_list_mode.py": "the wire protocol with whole Node objects (nodeCacheCapable: false), "
    "whose encoding follows the minor's Node type",
    "tests/e2e/test_crl_ordinal_zones.py": "volume binding (WaitForFirstConsumer) through the extender's bind, and "
    "the StatefulSet controller's scale-down order",
    "tests/e2e/test_ordinal_outage.py": "volume binding and node deletion or cordon after a zone outage, and "
    "adopting a running StatefulSet",
    "tests/e2e/test_failover.py": "kube-scheduler's leader election (Lease) and the standby's takeover",
    "tests/e2e/test_extender_restart.py": "kube-scheduler's retry of an extender Error while the extender restarts",
    "tests/e2e/test_apiserver_restart.py": "client-go's and the extender's watches across an API server restart",
    "tests/e2e/test_etcd_compaction.py": "the API server's 410 Gone for a compacted watch, and the relist",
    "tests/e2e/test_min_domains.py": "spread semantics: minDomains as the minor's PodTopologySpread counts it",
    "tests/e2e/test_spread_node_inclusion.py": "spread semantics: nodeAffinityPolicy, beside the minor's native "
    "scheduler",
    "tests/e2e/test_match_label_keys.py": "spread semantics with matchLabelKeys under the Deployment controller's "
    "rolling update",
    "tests/e2e/test_scale_down.py": "the ReplicaSet controller's scale-down order and pod-deletion-cost",
    "tests/e2e/test_drain.py": "the Eviction API, graceful termination held by a finalizer, and the ReplicaSet "
    "controller replacing a terminating pod",
    "tests/e2e/test_deploy.py": "deploy/'s server-side dry-runs, RBAC (SubjectAccessReviews) and the CRD's CEL "
    "rules on that API server",
    "tests/e2e/test_helm.py": "the Helm chart's rendering, dry-run on that API server",
    "tests/e2e/test_api_priority.py": "API Priority and Fairness: that API server's classification of the "
    "identities by deploy/'s FlowSchema, and its built-in kube-scheduler FlowSchema's level",
    "tests/e2e/test_translate_and_ab.py": "the A/B agreement: translate's native constraints placed by the minor's "
    "default scheduler",
    "tests/e2e/test_opt_in_and_invalid.py": "kube-scheduler's handling of schedulerName and of an extender Error "
    "(SchedulerError)",
    "tests/e2e/test_placeable_gate_admission.py": "MutatingAdmissionPolicy v1, served from 1.36: the placeable "
    "gate added at creation there, and the documented gap before",
    "tests/e2e/test_bind_guard.py": "the minor's kube-scheduler in both modes beside direct requests to the verbs: "
    "binds refused for pods not the extender's, forged bodies judged from that API server's pods",
}


# The scenarios that run on the newest minor only, each with the reason no minor changes its
# outcome (or, for one, that only the newest has the behaviour). Every e2e module is in exactly one
# of the two lists, with its reason: tests/unit/test_matrix_table.py fails on a module in neither,
# so a new scenario cannot silently skip the older minors; whoever adds it decides, in review.
NEWEST_ONLY = {
    "tests/e2e/test_scheduler_perf.py": "upstream's scheduler benchmark harness at the pinned newest version, "
    "its own API server and kube-scheduler in process (it does not run the older minors' control planes)",
    "tests/e2e/test_gitops_adopt.py": "adopt's committed files applied by kubectl (kustomize, the order a GitOps "
    "tool applies kinds in) and the garbage collector's passes over an owner-less record; the ordinal-zone "
    "placement it rests on is test_crl_ordinal_zones's, on every minor",
    "tests/e2e/test_adopt_from_file.py": "adopt's manifest form, the extender's command, over the rollout "
    "test_crl_ordinal_zones holds on every minor",
    "tests/e2e/test_adopt_rollout.py": "adopt's and retire's own edits, over the StatefulSet rollout that "
    "test_crl_ordinal_zones and test_ordinal_outage hold on every minor",
    "tests/e2e/test_autoscaling.py": "Karpenter's kwok provider, pinned for the newest minor only",
    "tests/e2e/test_bounded_decisions.py": "the extender's own bounds (group size, policy size, deadlines) through "
    "the protocol test_burst and test_opt_in_and_invalid hold on every minor",
    "tests/e2e/test_cli_failures.py": "the operator commands' messages and exit codes: the extender's CLI",
    "tests/e2e/test_demo_handover.py": "`make demo`, which runs the newest minor",
    "tests/e2e/test_in_scheduler.py": "the in-scheduler rules; the minor's kube-scheduler in that mode is "
    "test_bind_guard's, on every minor",
    "tests/e2e/test_gate_fairness.py": "the placeable gate's rotation over held pods, the extender's own",
    "tests/e2e/test_in_scheduler_worst_moment.py": "the placeable gate's bound at its worst moment, the "
    "extender's own; the minor's kube-scheduler retry and timeout are held by test_extender_restart",
    "tests/e2e/test_in_scheduler_freeze.py": "the placeable gate, the extender's own; httpTimeout and ignorable "
    "are held on every minor by test_extender_restart and test_bind_guard",
    "tests/e2e/test_mode_switch.py": "adopt and retire between the modes: the extender's commands",
    "tests/e2e/test_netease_deadlock.py": "the dead-end analysis, the extender's own logic",
    "tests/e2e/test_netease_table.py": "the per-zone rules of the NetEase Redis design, the extender's own logic",
    "tests/e2e/test_operations.py": "metrics, audit and explain: the extender's own",
    "tests/e2e/test_plan.py": "plan, the extender's own command",
    "tests/e2e/test_policy_edit_writes.py": "the extender's own writes after policy edits (coalescing), through "
    "the pod patch test_deploy holds on every minor",
    "tests/e2e/test_remedy.py": "the remedy search and its events, the extender's own",
    "tests/e2e/test_rolling_max_unavailable.py": "a StatefulSet's maxUnavailable, honoured from 1.37 (the newest) only",
    "tests/e2e/test_shared_nodes.py": "the shared-nodes figures, measured on the newest minor",
    "tests/e2e/test_soak.py": "the extender's memory and series under churn",
    "tests/e2e/test_verb_flood.py": "the extender's own connection handling and health listener under a flood",
    "tests/e2e/test_metrics_port.py": "the extender's own metrics port and its bounds under a flood; the "
    "TokenReview and SubjectAccessReview it asks are v1 on every supported minor",
    "tests/e2e/test_tenant_isolation.py": "the extender's own bounds keeping one tenant's policy from slowing "
    "another's, timed",
    "tests/e2e/test_kube_transport.py": "the extender's own transport (TLS names and files, proxies, token "
    "files) to v1 APIs every supported minor serves alike",
}


def scenarios_for(minor: str) -> list[str]:
    """The e2e modules a minor runs: all of tests/e2e on the newest, EVERY_MINOR elsewhere."""
    if minor == SUPPORTED_MINORS[0]:
        return ["tests/e2e"]
    return sorted(EVERY_MINOR)


def pinned(minor: str) -> str:
    """The k8s.io/kubernetes version hack/kube/v<minor>/go.mod pins, e.g. v1.34.4."""
    gomod = (REPO / "hack" / "kube" / f"v{minor}" / "go.mod").read_text()
    return re.search(r"^\s*k8s\.io/kubernetes (v\S+)", gomod, re.M).group(1)  # type: ignore[union-attr]


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(round(seconds)), 60)
    return f"{minutes}m{secs:02d}s"


def _build(seconds: float | None) -> str:
    if seconds is None:
        return "in `make test`"
    return "cached" if seconds < 2 else _clock(seconds)


def newest_row(results: Path) -> dict:
    """The newest minor's row from the E2E_RESULTS file `make test` wrote: CI runs the README's
    own test command for the newest minor, so the matrix runs only the others and takes this."""
    minor = SUPPORTED_MINORS[0]
    record = json.loads(results.read_text())
    return {
        "minor": minor,
        "pinned": pinned(minor),
        "build_seconds": None,
        "scope": "all",
        "build_ok": True,
        "e2e_exit": record.get("exitstatus", 1),
        "e2e_seconds": record.get("seconds"),
        "counts": record.get("counts", {}),
        "kubernetes": record.get("kubernetes", []),
        "source": "make test",
    }


def run_minor(
    minor: str, out: Path, pytest_args: list[str], workers: int, log: Path | None, env_extra: dict[str, str]
) -> dict:
    """One minor: build or reuse its binaries, then its scenarios on `workers` pytest-xdist
    workers (0: in the pytest process). With `log`, pytest's output goes there, not to ours."""
    env = {**os.environ, **env_extra, "KUBE_VERSION": minor}
    env.pop("KUBE_BIN_DIR", None)
    t0 = time.monotonic()
    build = subprocess.run(
        ["bash", str(REPO / "hack" / "kube" / "build.sh")], env=env, stdout=subprocess.PIPE, text=True
    )
    build_s = time.monotonic() - t0
    row: dict = {"minor": minor, "pinned": pinned(minor), "build_seconds": round(build_s, 1)}
    if build.returncode != 0:
        row.update(build_ok=False, e2e_exit=None, counts={}, e2e_seconds=None)
        print(f"build of {minor} failed (exit {build.returncode})", flush=True)
        return row
    bin_dir = build.stdout.strip().splitlines()[-1]
    results = out / f"e2e-{minor}.json"
    results.unlink(missing_ok=True)
    env.update(KUBE_BIN_DIR=bin_dir, E2E_RESULTS=str(results))
    parallel = ["-n", str(workers)] if workers > 0 else []
    t0 = time.monotonic()
    command = [sys.executable, "-m", "pytest", *scenarios_for(minor), "-p", "no:cacheprovider", *parallel, *pytest_args]
    if log is None:
        suite = subprocess.run(command, env=env, cwd=REPO)
    else:
        with log.open("w") as sink:
            suite = subprocess.run(command, env=env, cwd=REPO, stdout=sink, stderr=subprocess.STDOUT)
    e2e_s = time.monotonic() - t0
    record = json.loads(results.read_text()) if results.exists() else {}
    row.update(
        scope="all" if minor == SUPPORTED_MINORS[0] else "version-sensitive",
        build_ok=True,
        bin_dir=bin_dir,
        e2e_exit=suite.returncode,
        e2e_seconds=round(e2e_s, 1),
        counts=record.get("counts", {}),
        kubernetes=record.get("kubernetes", []),
    )
    return row


def _show(minor: str, row: dict, log: Path) -> None:
    """A minor run beside others: its pytest output, whole if it failed, else its closing lines."""
    lines = log.read_text(errors="replace").splitlines() if log.exists() else []
    failed = not row.get("build_ok") or row.get("e2e_exit") != 0
    print(f"\n=== Kubernetes {minor} ({row['pinned']}): {'FAILED' if failed else 'passed'}; output in {log} ===")
    print("\n".join(lines if failed else lines[-12:]), flush=True)


def run(
    minors: list[str],
    out: Path,
    pytest_args: list[str],
    newest_from: Path | None = None,
    *,
    jobs: int = 1,
    workers: int = 0,
) -> int:
    """Each minor's build and scenarios, `jobs` minors at once (each with `workers` pytest-xdist
    workers): the modules of every run share one machine lock (PLACEMENT_TEST_LOCK, see
    tests/parallel.py), so a module marked `alone` is alone across the runs too."""
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    if newest_from is not None:
        if not newest_from.exists():
            print(f"{newest_from} is missing: `make test` did not write the newest minor's results", flush=True)
            rows.append(
                {
                    "minor": SUPPORTED_MINORS[0],
                    "pinned": pinned(SUPPORTED_MINORS[0]),
                    "build_seconds": None,
                    "build_ok": False,
                    "e2e_exit": None,
                    "counts": {},
                    "e2e_seconds": None,
                }
            )
        else:
            rows.append(newest_row(newest_from))
    started = time.monotonic()
    if jobs <= 1:
        for minor in minors:
            print(f"\n=== Kubernetes {minor} ({pinned(minor)}) ===", flush=True)
            rows.append(run_minor(minor, out, pytest_args, workers, None, {}))
    else:
        shared = {"PLACEMENT_TEST_LOCK": os.environ.get("PLACEMENT_TEST_LOCK") or str(out / "machine.lock")}
        print(f"\n=== Kubernetes {', '.join(minors)}: {jobs} at once, {max(workers, 1)} worker(s) each ===", flush=True)
        logs = {minor: out / f"e2e-{minor}.log" for minor in minors}
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = {
                minor: pool.submit(run_minor, minor, out, pytest_args, workers, logs[minor], shared) for minor in minors
            }
            for minor in minors:  # in the matrix's order, each as soon as it and those before are done
                row = futures[minor].result()
                _show(minor, row, logs[minor])
                rows.append(row)
    matrix = {
        "measured": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{os.cpu_count()} cores",
        "seconds": round(time.monotonic() - started, 1),
        "minors": rows,
    }
    (out / "matrix.json").write_text(json.dumps(matrix, indent=2) + "\n")
    print("\n" + table(matrix))
    print(f"\nmatrix: {_clock(matrix['seconds'])} in all; results in {out / 'matrix.json'}")
    ok = all(r["build_ok"] and r["e2e_exit"] == 0 for r in rows)
    return 0 if ok else 1


def table(matrix: dict) -> str:
    lines = [
        "| minor | kube-scheduler image | deploy with | e2e scenarios run | passed | e2e wall time "
        "| build (this run) |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in matrix["minors"]:
        minor = row["minor"]
        overlay = f"`deploy/overlays/kube-{minor}/`" + (" or `deploy/`" if minor == SUPPORTED_MINORS[0] else "")
        if not row["build_ok"]:
            result, wall = "build failed", "-"
        else:
            counts = row["counts"]
            total = sum(counts.values())
            passed = counts.get("passed", 0)
            result = f"{passed}/{total}" + ("" if row["e2e_exit"] == 0 else f" (exit {row['e2e_exit']})")
            if counts.get("skipped"):
                result += f", {counts['skipped']} skipped"
            wall = _clock(row["e2e_seconds"]) if row.get("e2e_seconds") is not None else "-"
        scope = (
            "all"
            if row.get("scope", "all") == "all"
            else f"the {len(EVERY_MINOR)} version-sensitive modules (`EVERY_MINOR` in `hack/matrix.py`)"
        )
        lines.append(
            f"| {minor} | `{IMAGE}:{row['pinned']}` | {overlay} | {scope} | {result} | {wall} "
            f"| {_build(row['build_seconds'])} |"
        )
    lines.append("")
    lines.append(
        f"Measured by `make test-matrix` on {matrix['measured']}, {matrix['machine']}; "
        f"the whole matrix took {_clock(matrix['seconds'])}."
    )
    return "\n".join(lines)


def update_page(page: Path, text: str) -> None:
    content = page.read_text()
    begin, end = content.find(BEGIN), content.find(END)
    if begin < 0 or end < begin:
        raise SystemExit(f"{page} has no support-table markers ({BEGIN} ... {END})")
    page.write_text(content[: begin + len(BEGIN)] + "\n" + text + "\n" + content[end:])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p_run = sub.add_parser("run", help="the e2e suite on every supported minor")
    p_run.add_argument(
        "--minors",
        default=",".join(SUPPORTED_MINORS),
        help="comma-separated, default all; 'older': every minor but the newest",
    )
    p_run.add_argument(
        "--newest-from",
        type=Path,
        help="the newest minor's E2E_RESULTS file from `make test`, reported as its row (with --minors older)",
    )
    p_run.add_argument("--out", type=Path, default=REPO / "test-logs" / "matrix")
    p_run.add_argument("--jobs", type=int, default=1, help="how many minors run at once (default 1)")
    p_run.add_argument(
        "--workers", type=int, default=0, help="pytest-xdist workers per minor (default 0: in pytest's process)"
    )
    p_run.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    p_table = sub.add_parser("table", help="the support table from a run's matrix.json")
    p_table.add_argument("--out", type=Path, default=REPO / "test-logs" / "matrix")
    p_table.add_argument(
        "--page", type=Path, help=f"replace the support-table block in this file ({SUPPORT_PAGE.relative_to(REPO)})"
    )
    args = parser.parse_args(argv)
    if args.command == "run":
        if args.minors == "older":
            minors = list(SUPPORTED_MINORS[1:])
        else:
            minors = [m.strip() for m in args.minors.split(",") if m.strip()]
        unknown = [m for m in minors if m not in SUPPORTED_MINORS]
        if unknown:
            parser.error(f"not supported: {', '.join(unknown)} (supported: {', '.join(SUPPORTED_MINORS)})")
        return run(minors, args.out, args.pytest_args, args.newest_from, jobs=args.jobs, workers=args.workers)
    matrix = json.loads((args.out / "matrix.json").read_text())
    text = table(matrix)
    if args.page:
        update_page(args.page, text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
