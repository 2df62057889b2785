"""`python -m extender …`: serve the extender, print the policy schema or CRD, check a policy."""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import sys
from collections.abc import Sequence

import yaml

from ..api.policy import (
    INLINE_POLICY_ANNOTATION,
    KIND,
    POLICY_REF_ANNOTATION,
    SCHEDULER_NAME,
    PlacementPolicySpec,
    PolicyError,
    parse_annotation,
    parse_spec,
)
from ..api.wire import FailedNodeReasons
from ..limits import (
    DEFAULT_DECISION_DEADLINE,
    DEFAULT_LISTEN,
    DEFAULT_MAX_BODY,
    DEFAULT_PLACE_LIFTED_TTL,
    DEFAULT_PLACE_VISIBLE,
    DEFAULT_PLACE_WINDOW,
    DEFAULT_TENTATIVE_TTL,
    DEFAULT_THREADS,
    DEFAULT_TLS_CLIENT_NAME,
    DEFAULT_WATCH_TIMEOUT,
    IN_SCHEDULER_DECISION_DEADLINE,
)
from ..logs import setup_logging
from .errors import UsageError, explained
from .exit_codes import ExitCode


def _env(name: str, default: str | None = None) -> str | None:
    return os.environ.get(name, default)


def _failed_node_reasons(text: str) -> FailedNodeReasons:
    """--failed-node-reasons or EXTENDER_FAILED_NODE_REASONS (argparse checks `choices` only on
    the command line, `type` on both)."""
    try:
        return FailedNodeReasons(text)
    except ValueError:
        allowed = ", ".join(m.value for m in FailedNodeReasons)
        raise argparse.ArgumentTypeError(f"{text!r} is not one of {allowed}") from None


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value <= 60:
        raise argparse.ArgumentTypeError(
            f"{text} s is outside (0, 60]; kube-scheduler gives an extender 5 s by default"
        )
    return value


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} is negative; 0 turns it off")
    return value


LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _serve(args: argparse.Namespace) -> int:
    from ..server.serve import ServeOptions, serve

    if bool(args.tls_cert_file) != bool(args.tls_key_file):
        print("--tls-cert-file and --tls-key-file go together", file=sys.stderr)
        return 2
    if args.tls_client_ca_file and not args.tls_cert_file:
        print("--tls-client-ca-file needs --tls-cert-file and --tls-key-file", file=sys.stderr)
        return 2
    if args.health_listen and args.health_listen.rsplit(":", 1)[0].strip("[]") not in LOOPBACK:
        print(
            f"--health-listen {args.health_listen}: give a loopback address (127.0.0.1:PORT); it answers "
            "/healthz and /readyz without TLS, for the pod's own exec probes only",
            file=sys.stderr,
        )
        return 2
    if args.metrics_listen:
        from ..server.metrics_port import parse_address

        try:
            parse_address(args.metrics_listen)
        except ValueError as err:
            print(f"--metrics-listen {err}", file=sys.stderr)
            return 2
    try:
        election = _election(args)
    except ValueError as err:
        print(err, file=sys.stderr)
        return 2
    host = args.listen.rsplit(":", 1)[0].strip("[]")
    if host not in LOOPBACK and not args.tls_client_ca_file:
        logging.getLogger("extender").warning(
            "listening on %s without mutual TLS: anyone who reaches this port can bind pods; "
            "keep the extender on loopback beside its scheduler, or set --tls-client-ca-file",
            args.listen,
        )

    serve(
        ServeOptions(
            listen=args.listen,
            kubeconfig=args.kubeconfig,
            threads=args.threads,
            max_body=args.max_body,
            decision_deadline=args.decision_deadline,
            failed_node_reasons=args.failed_node_reasons,
            tentative_ttl=args.reservation_ttl,
            watch_timeout=args.watch_timeout,
            events=not args.no_events,
            access_log=args.access_log,
            tls_cert_file=args.tls_cert_file,
            tls_key_file=args.tls_key_file,
            tls_client_ca_file=args.tls_client_ca_file,
            tls_client_names=tuple(args.tls_client_name or (DEFAULT_TLS_CLIENT_NAME,)),
            health_listen=args.health_listen,
            metrics_listen=args.metrics_listen,
            scheduler_names=tuple(args.scheduler_name or (SCHEDULER_NAME,)),
            place_window=args.place_window,
            place_visible=args.place_visible,
            place_lifted_ttl=args.place_lifted_ttl,
            place_gate=not args.no_place_gate,
            election=election,
        )
    )
    return 0


def _election(args: argparse.Namespace):  # noqa: ANN202 - server.serve.Election | None
    """serve's leader-election options, checked (ValueError saying what to give)."""
    from ..server.leader import Timing
    from ..server.serve import Election

    if not args.leader_elect:
        if args.active_service:
            raise ValueError("--active-service needs --leader-elect: only the elected replica becomes the endpoint")
        return None
    namespace, slash, name = args.leader_elect_lease.partition("/")
    if not slash or not namespace or not name:
        raise ValueError(f"--leader-elect-lease {args.leader_elect_lease!r}: give it as NAMESPACE/NAME")
    try:
        duration, deadline, retry = (float(x) for x in args.leader_elect_timing.split(","))
        timing = Timing(duration, deadline, retry)
    except ValueError as err:
        raise ValueError(f"--leader-elect-timing {args.leader_elect_timing!r}: {err}") from None
    pod, pod_ip = os.environ.get("POD_NAME", ""), os.environ.get("POD_IP", "")
    if args.active_service and not (pod and pod_ip):
        raise ValueError(
            "--active-service needs the pod's name and address: set POD_NAME (fieldRef metadata.name) and POD_IP "
            "(fieldRef status.podIP) in the container's env, as deploy/overlays/tls/extender.yaml does"
        )
    return Election(
        namespace=namespace,
        lease=name,
        timing=timing,
        identity=pod or socket.gethostname(),
        service=args.active_service,
        pod_ip=pod_ip,
    )


def _deletion_costs(args: argparse.Namespace) -> int:
    """The opt-in scale-down controller: watch like the extender, keep pod-deletion-cost current."""
    import time

    from ..kube.client import connect
    from ..server.deletion_costs import DeletionCostController
    from ..server.effects import KubeDeletionCostWriter
    from ..state.store import ClusterStore
    from ..state.watcher import Watcher

    api = connect(args.kubeconfig)
    store = ClusterStore()
    Watcher(api, store).start()
    DeletionCostController(store, KubeDeletionCostWriter(api), interval=args.interval, rate=args.rate).start()
    while True:
        time.sleep(3600)


def _label_namespace(args: argparse.Namespace) -> int:
    """The Helm chart's install hook: the Pod Security labels on the release's namespace, which
    `helm install --create-namespace` makes without them."""
    from ..kube.client import connect
    from ..server.effects import label_namespace

    labels: dict[str, str] = {}
    for pair in args.labels:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"{pair!r}: want KEY=VALUE")
        labels[key] = value
    label_namespace(connect(args.kubeconfig), args.namespace, labels)
    print(f"namespace {args.namespace} labelled " + ", ".join(f"{k}={v}" for k, v in labels.items()))
    return 0


def _schema(args: argparse.Namespace) -> int:
    from ..api.schema import policy_json_schema

    print(json.dumps(policy_json_schema(), indent=2))
    return 0


def _crd(args: argparse.Namespace) -> int:
    from ..api.schema import crd, rotation_crd

    if args.kind == "ZoneRotation":
        sys.stdout.write(
            "# Generated by `python -m extender crd --kind ZoneRotation` from extender/api/rotation.py; do not edit.\n"
        )
        sys.stdout.write(yaml.safe_dump(rotation_crd(), sort_keys=False))
        return 0
    sys.stdout.write("# Generated by `python -m extender crd` from extender/api/policy.py; do not edit.\n")
    sys.stdout.write(yaml.safe_dump(crd(), sort_keys=False))
    return 0


def _check(args: argparse.Namespace) -> int:
    """Validate a PlacementPolicy object, a bare spec, or an annotation value from a file."""
    try:
        text = sys.stdin.read() if args.file == "-" else open(args.file, encoding="utf-8").read()
    except (OSError, UnicodeDecodeError) as err:
        print(f"check: cannot read {args.file}: {err}", file=sys.stderr)
        return ExitCode.COULD_NOT_RUN
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as err:
        print(f"{args.file}: not YAML or JSON: {err}", file=sys.stderr)
        return ExitCode.FINDING
    if not docs:
        docs = [{}]
    status = 0
    for doc in docs:
        try:
            if isinstance(doc, dict) and doc.get("kind") == KIND:
                name = (doc.get("metadata") or {}).get("name", "?")
                parse_spec(doc.get("spec") or {}, f"{KIND} {name}")
                print(f"{KIND} {name}: valid")
            elif isinstance(doc, str):
                parse_annotation(doc, args.file)
                print(f"{args.file}: valid")
            else:
                parse_spec(doc, args.file)
                print(f"{args.file}: valid")
        except PolicyError as err:
            print(str(err), file=sys.stderr)
            status = 1
    return status


def _dev_up(args: argparse.Namespace) -> int:
    from ..devcluster.demo import run

    return run(zones=args.zones, nodes_per_zone=args.nodes_per_zone, replicas=args.replicas, wait=not args.no_wait)


def _labels(text: str | None) -> dict[str, str]:
    if not text:
        return {}
    pairs = [p.split("=", 1) for p in text.split(",") if p]
    if any(len(p) != 2 for p in pairs):
        raise UsageError(f"--match-labels takes key=value[,key=value]; got {text!r}")
    return {k: v for k, v in pairs}


def _translate_source(args: argparse.Namespace) -> tuple[object, dict[str, str], int | None, str]:
    """The policy, the group's labels and size, and a name, from a file or the live cluster."""
    from ..ops.translate_input import from_cluster, from_documents

    if args.source.count("/") == 1 and not os.path.exists(args.source):
        return from_cluster(args.source, args.namespace, args.kubeconfig, args.context)
    text = sys.stdin.read() if args.source == "-" else open(args.source, encoding="utf-8").read()
    return from_documents([d for d in yaml.safe_load_all(text) if d is not None], args.source)


def _translate(args: argparse.Namespace) -> int:
    from ..ops.translate import translate

    spec, labels, size, name = _translate_source(args)
    result = translate(
        spec,
        match_labels={**labels, **_labels(args.match_labels)},  # type: ignore[arg-type]
        group_size=args.size or size,
        shard_label=args.shard_label,
    )
    gaps = [{"rule": g.rule, "limitation": g.limitation, "cost": g.cost} for g in result.gaps]
    if args.json:
        print(
            json.dumps(
                {"source": name, "groupSize": result.group_size, "fragment": result.fragment, "gaps": gaps}, indent=2
            )
        )
        return 0
    print(f"# Native constraints closest to {name} (group size {result.group_size or 'unknown'}).")
    print("# Merge under spec.template.spec of every StatefulSet of the group, and set schedulerName back.")
    sys.stdout.write(yaml.safe_dump(result.fragment, sort_keys=False))
    print("# What the native scheduler cannot express, and what that costs:")
    for g in result.gaps:
        print(f"# - {g.rule}: {g.limitation}.")
        print(f"#   cost: {g.cost}.")
    return 0


def _ab(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..ab import load, run

    try:
        scenario = load(args.scenario)
    except (ValueError, OSError) as err:
        print(f"ab: {err}", file=sys.stderr)
        return 2
    out = Path(args.out or ".")
    out.mkdir(parents=True, exist_ok=True)
    run(
        scenario,
        repetitions=args.repetitions,
        json_path=out / f"ab-{scenario.name}.json",
        png_path=None if args.no_png else out / f"ab-{scenario.name}.png",
    )
    return 0


def _live_store(args: argparse.Namespace):
    from ..ops.load import live_store

    return live_store(args.kubeconfig, args.context)


def _explain(args: argparse.Namespace) -> int:
    from ..ops.explain import explain, render

    pod = args.pod.removeprefix("pod/").removeprefix("pods/")
    if pod.count("/") > 1 or (pod.count("/") == 1 and args.namespace):
        raise UsageError(f"explain takes POD -n NAMESPACE, or NAMESPACE/POD; got {args.pod!r}")
    namespace, _, name = pod.rpartition("/")
    result = explain(_live_store(args), namespace or args.namespace or "default", name)
    print(json.dumps(result.as_dict(), indent=2) if args.json else render(result))
    return ExitCode.OK


def _audit(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from ..ops.audit import (
        as_json,
        audit,
        gate_bound,
        overcommitted,
        records_without_statefulset,
        render,
        render_gate_bound,
        render_overcommit,
    )
    from ..ops.load import live_gate_admission

    store = _live_store(args)
    reports = audit(store, args.namespace, args.scheduler_name)
    nodes = overcommitted(store)
    bound = gate_bound(store, args.namespace, live_gate_admission(args.kubeconfig, args.context))
    kept = records_without_statefulset(store, args.namespace)
    if args.json:
        extra = {
            "overcommitted_nodes": [asdict(n) for n in nodes],
            "in_scheduler_bound": asdict(bound),
            "records_without_statefulset": kept,
        }
        print(json.dumps({**as_json(reports), **extra}, indent=2))
    else:
        gap = render_gate_bound(bound)
        notes = "".join(f"\nnote: {k}" for k in kept)
        print(
            render(reports)
            + (("\n" + render_overcommit(nodes)) if nodes else "")
            + (("\n" + gap) if gap else "")
            + notes
        )
    return ExitCode.FINDING if nodes or any(r.violations or r.error for r in reports) else ExitCode.OK


def _plan(args: argparse.Namespace) -> int:
    from ..ops.plan import as_json, drain_each, plan_drain, plan_group, plan_grow, render_drain, render_grow

    usage = "plan takes statefulset/NAME --replicas N, placementpolicy/NAME --size N, or drain node/NAME ... | --all"
    kind, _, name = args.target[0].partition("/")
    if args.target[0] == "drain":
        nodes = [t.removeprefix("node/").removeprefix("nodes/") for t in args.target[1:]]
        if bool(nodes) == bool(args.all):
            raise UsageError("plan drain takes node/NAME ... or --all (not both)")
        store = _live_store(args)
        plans = drain_each(store) if args.all else [plan_drain(store, nodes)]
        print(json.dumps(as_json(plans), indent=2) if args.json else render_drain(plans))
        # The same meaning with --all: 1 when some drain planned is not safe.
        return ExitCode.OK if all(p.safe for p in plans) else ExitCode.FINDING
    if kind.lower() in ("placementpolicy", "placementpolicies", "pp") and name and args.size is not None:
        plan = plan_group(_live_store(args), args.namespace, name, args.size)
    elif kind.lower() in ("statefulset", "statefulsets", "sts") and name and args.replicas is not None:
        plan = plan_grow(_live_store(args), args.namespace, name, args.replicas)
    else:
        raise UsageError(usage)
    print(json.dumps(as_json(plan), indent=2) if args.json else render_grow(plan))
    return ExitCode.OK if plan.feasible else ExitCode.FINDING


def _workload_path(ref: str, namespace: str) -> tuple[str, str]:
    from ..ops.adopt import KINDS

    alias, _, name = ref.partition("/")
    kind = KINDS.get({"sts": "statefulset", "deploy": "deployment"}.get(alias.lower(), alias.lower().removesuffix("s")))
    if not kind or not name:
        raise UsageError(f"{ref!r}: name the workload as statefulset/NAME or deployment/NAME")
    plural = kind.lower() + "s"
    return kind, f"/apis/apps/v1/namespaces/{namespace}/{plural}/{name}"


def _named_policy(api, namespace: str, name: str) -> PlacementPolicySpec:
    from ..api.policy import API_GROUP, API_VERSION, PLURAL

    obj = api.call("GET", f"/apis/{API_GROUP}/{API_VERSION}/namespaces/{namespace}/{PLURAL}/{name}")
    return parse_spec((obj or {}).get("spec") or {}, f"{KIND} {namespace}/{name}")


def _policy_file(path: str) -> PlacementPolicySpec:
    text = sys.stdin.read() if path == "-" else open(path, encoding="utf-8").read()
    docs = [d for d in yaml.safe_load_all(text) if d is not None]
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise ValueError(f"{path}: expected one PlacementPolicy or one bare policy spec")
    doc = docs[0]
    return parse_spec(doc.get("spec") or {}, f"{KIND} in {path}") if doc.get("kind") == KIND else parse_spec(doc, path)


def _show_change(  # noqa: PLR0913
    args: argparse.Namespace,
    verb: str,
    kind: str,
    change,  # noqa: ANN001
    rollout=None,  # noqa: ANN001
    record: dict | None = None,
    policy: dict | None = None,
    before: dict | None = None,
    others: list[dict] | None = None,
) -> None:
    """What adopt or retire wrote (or, with --dry-run or -f, would write): the header first, then
    the native mirrors, notes, the rollout it starts, and for a dry run the template it would
    write. With -o yaml the objects go to stdout as YAML (ops/manifests.py) and the rest to stderr."""
    from ..engine import Exactness
    from ..ops.manifests import adopt_documents, committable, dump, with_api_version

    as_yaml = args.output == "yaml"
    out = sys.stderr if as_yaml else sys.stdout
    name = change.workload["metadata"]["name"]
    done = {"adopt": "adopted", "retire": "retired"}[verb]
    if args.filename:
        print(f"{verb} {kind} {args.namespace}/{name} from {args.filename}; nothing written", file=out)
    elif args.dry_run:
        print(f"dry run: would {verb} {kind} {args.namespace}/{name}; nothing written", file=out)
    else:
        print(f"{done} {kind} {args.namespace}/{name}", file=out)
    for m in change.mirrors:
        mark = {Exactness.EXACT: "exact", Exactness.RELAXED: "relaxed", Exactness.NONE: "NOT MIRRORED"}[m.exactness]
        print(f"  {m.rule:<20} {mark:<13} {m.native}", file=out)
    for note in change.notes:
        print(f"  note: {note}", file=out)
    if rollout is not None:
        _show_rollout(rollout, out)
    if args.filename and getattr(args, "kustomize", None):
        _write_component(args, policy, record, before or change.workload, change.workload, verb == "retire")
    elif args.filename:
        sys.stdout.write(dump(adopt_documents(policy, record, change.workload, others)))
    elif as_yaml:
        documents = [record] if record is not None else []
        sys.stdout.write(dump([*documents, committable(with_api_version(change.workload))]))
    elif args.dry_run:
        print("# the pod template it would write:")
        sys.stdout.write(yaml.safe_dump(change.workload["spec"]["template"], sort_keys=False))


def _check_output(args: argparse.Namespace) -> None:
    if args.output == "yaml" and not (args.dry_run or args.filename):
        raise UsageError("-o yaml prints what would be written: give --dry-run, or -f FILE (which never writes)")
    if args.filename is None and args.workload is None:
        raise UsageError("name the workload (statefulset/NAME or deployment/NAME), or give its manifest with -f FILE")
    if args.offline and args.filename is None:
        raise UsageError("--offline reads no cluster, so it needs the workload's manifest: -f FILE")
    if args.kustomize and args.filename is None:
        raise UsageError("--kustomize DIR writes a component for the app's manifest: give it with -f FILE")


def _adopt(args: argparse.Namespace) -> int:
    from ..kube.client import connect, retry_on_conflict

    _check_output(args)
    if args.filename:
        return _adopt_manifest(args)
    kind, path = _workload_path(args.workload, args.namespace)
    from_file = None if args.policy_name else _policy_file(args.policy_file)  # stdin is read once
    api = connect(args.kubeconfig, args.context)
    # Read, decide and write again on a 409: the StatefulSet controller's status writes alone
    # can move the resourceVersion between our read and our update.
    change, rollout = retry_on_conflict(lambda: _adopt_once(args, api, kind, path, from_file))
    if rollout is not None and not rollout.completes:
        print("adopt: refused, nothing written: the rollout adopting starts would stall", file=sys.stderr)
        _show_rollout(rollout)
        return ExitCode.FINDING
    _show_change(args, "adopt", kind, change, rollout, _record_document(rollout))
    return ExitCode.OK


def _record_document(rollout) -> dict | None:  # noqa: ANN001
    """The ZoneRotation adopt writes for this rollout, as an object (None: none to write)."""
    from ..api.rotation import rotation_object

    if rollout is None or rollout.record is None:
        return None
    record = rollout.record
    return rotation_object(record.namespace, record.statefulset, record.order, record.adopted)


def _manifest_input(args: argparse.Namespace):  # noqa: ANN202
    """(documents, the workload, its kind, its namespace) from -f FILE ('-': stdin)."""
    from ..ops.manifests import pick_workload, read_documents

    source = "stdin" if args.filename == "-" else args.filename
    if args.filename == "-" and getattr(args, "policy_file", None) == "-":
        raise UsageError("-f - and --policy-file - both read stdin: give one of them as a file")
    text = sys.stdin.read() if args.filename == "-" else open(args.filename, encoding="utf-8").read()
    docs = read_documents(text, source)
    name = None
    if args.workload is not None:
        _workload_path(args.workload, args.namespace)  # the same spelling as the live command
        name = args.workload.partition("/")[2]
    workload = pick_workload(docs, name, source)
    namespace = (workload.get("metadata") or {}).get("namespace") or args.namespace
    args.namespace = namespace
    return docs, workload, workload["kind"], namespace


def _adopt_manifest(args: argparse.Namespace) -> int:
    """adopt -f: the workload from a manifest, every object to commit printed as YAML (or written
    as a kustomize component): the PlacementPolicy, the set's ZoneRotation, the workload. The
    cluster is read (unless --offline) for a policy not in the files and, for a running
    StatefulSet, the rollout check and its record. Nothing is written to the cluster."""
    from ..kube.client import connect
    from ..ops.manifests import other_documents, policy_document, policy_in, rotation_in

    args.output = "yaml"
    docs, workload, kind, namespace = _manifest_input(args)
    if args.kustomize:
        docs = [*docs, *_component_inputs(args.kustomize)]
    api = None if args.offline else connect(args.kubeconfig, args.context)
    policy_obj = None
    if args.policy_name:
        spec = policy_in(docs, args.policy_name)
        policy_obj = policy_document(docs, args.policy_name)
        if spec is None:
            if api is None:
                raise UsageError(
                    f"PlacementPolicy {args.policy_name} is not in {args.filename} and --offline reads no cluster: "
                    "add the policy to the manifests, or drop --offline"
                )
            policy_obj = _named_policy_object(api, namespace, args.policy_name)
            spec = parse_spec(policy_obj.get("spec") or {}, f"{KIND} {namespace}/{args.policy_name}")
        named = {"policy_name": args.policy_name}
    else:
        spec = _policy_file(args.policy_file)
        named = {"inline_policy": spec.model_dump_json(exclude_defaults=True)}
    name = workload["metadata"]["name"]
    rollout, record = None, None
    committed = rotation_in(docs, name) if kind == "StatefulSet" else None
    notes = []
    if committed is not None:
        record = committed  # the team's record: it decides, whatever this cluster runs
        notes.append(
            f"ZoneRotation {name} is in the manifests: taken as the committed record (the rollout check, which "
            "needs the running pods, is skipped)"
        )
    elif kind == "StatefulSet" and api is not None:
        outcome = _live_adoption(api, namespace, name, spec)
        if outcome is not None:
            rollout, record = outcome
            if not rollout.completes:
                print("adopt: refused: the rollout applying this would start would stall", file=sys.stderr)
                _show_rollout(rollout)
                return ExitCode.FINDING
    elif kind == "StatefulSet" and spec.ordinalZones is not None:
        notes.append(
            "--offline: the running pods were not read, so no ZoneRotation is printed; if the set is running, "
            "pods outside the rotation would move: print its record with `rotation export statefulset/"
            f"{name} -n {namespace}` where the cluster is reachable, add it to the manifests, and run this again"
        )
    change = _adopted(args, workload, spec, named, declared=record is not None)
    change.notes += notes
    others = other_documents(docs, workload, policy_obj, committed)
    _show_change(args, "adopt", kind, change, rollout, record, policy_obj, before=workload, others=others)
    return ExitCode.OK


def _component_inputs(folder: str) -> list[dict]:
    """The objects already in a component folder (its policy and record: committed before, or put
    there by hand, e.g. `rotation export`'s output), read as input like -f's; not the
    kustomization, not adopt's own patch (the next adopt writes them anew)."""
    from pathlib import Path

    from ..ops.component import KUSTOMIZATION, PATCH
    from ..ops.manifests import read_documents

    root = Path(folder)
    if not root.is_dir():
        return []
    files = sorted(p for p in root.glob("*.yaml") if p.name not in (KUSTOMIZATION, PATCH))
    return [d for p in files for d in read_documents(p.read_text(encoding="utf-8"), str(p))]


def _live_adoption(api, namespace: str, name: str, spec: PlacementPolicySpec):  # noqa: ANN001, ANN202
    """For a StatefulSet the cluster runs: (the rollout check, the record to commit: the one adopt
    would write, else the set's existing one); None when the set is not running."""
    from ..kube.client import KubeApiError
    from ..ops.rollout import check_adoption
    from ..state.watcher import list_once

    try:
        api.call("GET", f"/apis/apps/v1/namespaces/{namespace}/statefulsets/{name}")
    except KubeApiError as err:
        if err.status != 404:
            raise
        return None  # not running yet: its first pods decide the rotation
    rollout = check_adoption(list_once(api), namespace, name, spec)
    record = _record_document(rollout)
    if record is None and spec.ordinalZones is not None:
        record = _live_rotation(api, namespace, name)
    return rollout, record


def _live_rotation(api, namespace: str, statefulset: str) -> dict | None:  # noqa: ANN001
    """The set's ZoneRotation in the cluster, as stored (None: none, or no CRD)."""
    from ..api.policy import API_GROUP, API_VERSION
    from ..api.rotation import PLURAL as ROTATIONS
    from ..kube.client import KubeApiError

    try:
        items = (api.call("GET", f"/apis/{API_GROUP}/{API_VERSION}/namespaces/{namespace}/{ROTATIONS}") or {}).get(
            "items"
        ) or []
    except KubeApiError as err:
        if err.status == 404:
            return None
        raise
    for item in items:
        if (item.get("spec") or {}).get("statefulSet") == statefulset:
            return {"apiVersion": f"{API_GROUP}/{API_VERSION}", "kind": "ZoneRotation", **item}
    return None


def _named_policy_object(api, namespace: str, name: str) -> dict:  # noqa: ANN001
    from ..api.policy import API_GROUP, API_VERSION, PLURAL

    obj = api.call("GET", f"/apis/{API_GROUP}/{API_VERSION}/namespaces/{namespace}/{PLURAL}/{name}") or {}
    return {"apiVersion": f"{API_GROUP}/{API_VERSION}", "kind": KIND, **obj}


def _write_component(  # noqa: PLR0913
    args: argparse.Namespace,
    policy: dict | None,
    record: dict | None,
    before: dict,
    workload: dict,
    patch_only: bool,
) -> None:
    """--kustomize DIR: the component's files (ops/component.py); the line the app's kustomization
    needs on stderr when it does not list the component yet. `patch_only` (retire): the policy and
    the record stay committed as they are, only the workload's patch changes."""
    from pathlib import Path

    from ..ops.component import PATCH, component_files, lists_component

    folder = Path(args.kustomize)
    folder.mkdir(parents=True, exist_ok=True)
    for file, text in component_files(policy, record, before, workload).items():
        if not patch_only or file == PATCH:
            (folder / file).write_text(text, encoding="utf-8")
    print(f"wrote the kustomize component {folder}/", file=sys.stderr)
    parent = folder.parent / "kustomization.yaml"
    relative = folder.name
    listed = False
    if parent.exists():
        listed = lists_component(yaml.safe_load(parent.read_text(encoding="utf-8")) or {}, relative)
    if not listed:
        print(f"add to {parent}, once:\ncomponents:\n- {relative}", file=sys.stderr)


def _adopt_once(args: argparse.Namespace, api, kind: str, path: str, from_file: PlacementPolicySpec | None):  # noqa: ANN001, ANN202
    """One read-decide-write of adopt: the change and the rollout check (None for a Deployment);
    nothing is written when the rollout would stall."""
    from ..ops.rollout import check_adoption
    from ..server.effects import update_workload, write_adopted_rotation
    from ..state.watcher import list_once

    workload = {"kind": kind, **api.call("GET", path)}
    if from_file is None:
        spec = _named_policy(api, args.namespace, args.policy_name)
        named = {"policy_name": args.policy_name}
    else:
        spec = from_file
        named = {"inline_policy": spec.model_dump_json(exclude_defaults=True)}
    change = _adopted(args, workload, spec, named)
    rollout = None
    if kind == "StatefulSet":
        rollout = check_adoption(list_once(api), args.namespace, workload["metadata"]["name"], spec)
        if not rollout.completes:
            return change, rollout
    if not args.dry_run:
        if rollout is not None and rollout.record is not None:
            write_adopted_rotation(api, rollout.record, rollout.record_exists)
        update_workload(api, path, change.workload)
    return change, rollout


def _adopted(args: argparse.Namespace, workload: dict, spec: PlacementPolicySpec, named: dict, declared: bool = False):  # noqa: ANN202
    """adopt() with the command line's scheduler name, mode and node pool (live and -f alike);
    `declared`: the set's ZoneRotation is committed with it (-f)."""
    from ..ops.adopt import adopt

    pool = _node_pool(args.node_pool)
    return adopt(
        workload,
        spec,
        scheduler_name=args.scheduler_name,
        mode=args.mode,
        node_pool=pool,
        rotation_declared=declared,
        **named,
    )


def _node_pool(text: str | None) -> tuple[str, str] | None:
    if text is None:
        return None
    key, sep, value = text.partition("=")
    if not sep or not key or not value:
        raise ValueError(f"--node-pool {text!r}: give it as KEY=VALUE, the label (and taint) of the pool's nodes")
    return key, value


def _show_rollout(rollout, out=None) -> None:  # noqa: ANN001 - ops.rollout.RolloutCheck
    """What the rollout adopt starts will do (ops/rollout.py), or why it would stall."""
    out = out or sys.stdout
    if rollout.adopted:
        kept = ", ".join(f"ordinal {o} in {z}" for o, z in sorted(rollout.adopted.items()))
        print(
            f"  rotation: running pods outside it stay in their zones ({kept}), recorded in the ZoneRotation", file=out
        )
    for step in rollout.steps:
        print(f"  rollout: {step}", file=out)
    for problem in rollout.problems:
        print(f"  rollout: {problem}", file=sys.stderr)


def _retire(args: argparse.Namespace) -> int:
    from ..kube.client import connect, retry_on_conflict

    _check_output(args)
    if args.filename:
        return _retire_manifest(args)
    kind, path = _workload_path(args.workload, args.namespace)
    api = connect(args.kubeconfig, args.context)
    change = retry_on_conflict(lambda: _retire_once(args, api, kind, path))
    _show_change(args, "retire", kind, change)
    return ExitCode.OK


def _retire_once(args: argparse.Namespace, api, kind: str, path: str):  # noqa: ANN001, ANN202
    """One read-decide-write of retire (again on a 409, as adopt)."""
    from ..ops.adopt import retire
    from ..server.effects import update_workload

    workload = {"kind": kind, **api.call("GET", path)}
    annotations = ((workload["spec"].get("template") or {}).get("metadata") or {}).get("annotations") or {}
    spec = None
    if INLINE_POLICY_ANNOTATION in annotations:
        spec = parse_annotation(annotations[INLINE_POLICY_ANNOTATION], f"{kind} {workload['metadata']['name']}")
    elif POLICY_REF_ANNOTATION in annotations:
        spec = _named_policy(api, args.namespace, annotations[POLICY_REF_ANNOTATION])
    change = retire(workload, spec, translated=not args.no_translate)
    if not args.dry_run:
        update_workload(api, path, change.workload)
    return change


def _retire_manifest(args: argparse.Namespace) -> int:
    """retire -f: the workload from a manifest, retired, printed as YAML; the policy from its
    inline annotation, the manifests, or (unless --offline) the cluster. Nothing is written."""
    from ..kube.client import connect
    from ..ops.adopt import retire
    from ..ops.manifests import other_documents, policy_in

    args.output = "yaml"
    docs, workload, kind, namespace = _manifest_input(args)
    before = workload
    if args.kustomize:
        # The app's manifest is the base: the component's patch gives what adopt made of it.
        from pathlib import Path

        from ..ops.component import apply_patch, read_component

        folder = Path(args.kustomize)
        files = {p.name: p.read_text(encoding="utf-8") for p in folder.glob("*.yaml")} if folder.is_dir() else {}
        try:
            patch, resources = read_component(files)
        except ValueError as err:
            raise UsageError(f"--kustomize {folder}: {err}") from None
        docs = [*docs, *resources]
        workload = apply_patch(workload, patch)
    annotations = ((workload.get("spec") or {}).get("template") or {}).get("metadata", {}).get("annotations") or {}
    spec = None
    if INLINE_POLICY_ANNOTATION in annotations:
        spec = parse_annotation(annotations[INLINE_POLICY_ANNOTATION], f"{kind} {workload['metadata']['name']}")
    elif POLICY_REF_ANNOTATION in annotations:
        ref = annotations[POLICY_REF_ANNOTATION]
        spec = policy_in(docs, ref)
        if spec is None and not args.offline:
            spec = _named_policy(connect(args.kubeconfig, args.context), namespace, ref)
    change = retire(workload, spec, translated=not args.no_translate)
    if spec is None and not args.no_translate and POLICY_REF_ANNOTATION in annotations:
        change.notes.append("--offline and the policy is not in the manifests: no native constraints translated")
    others = [] if args.kustomize else other_documents(docs, before)
    _show_change(args, "retire", kind, change, before=before, others=others)
    return ExitCode.OK


USAGE = {
    "adopt": "\n  %(prog)s -f FILE (--policy-name NAME | --policy-file FILE) [--kustomize DIR] [--offline]"
    "\n  %(prog)s statefulset/NAME -n NAMESPACE (--policy-name NAME | --policy-file FILE) [--dry-run [-o yaml]]",
    "retire": "\n  %(prog)s -f FILE [--kustomize DIR] [--offline]"
    "\n  %(prog)s statefulset/NAME -n NAMESPACE [--dry-run [-o yaml]]",
}
EPILOG = {
    "adopt": """workloads kept in git (docs/how-to/gitops.md): print every object to commit, or write a component
  python -m extender adopt -f apps/db/statefulset.yaml --policy-name crdb --kustomize apps/db/placement
  python -m extender adopt -f apps/db/statefulset.yaml --policy-name crdb > adopted.yaml
  mv adopted.yaml apps/db/statefulset.yaml          # it holds every object of the input, and adopt's
  python -m extender rotation export statefulset/crdb -n db >> apps/db/statefulset.yaml  # then --offline
the live form edits the cluster (docs/how-to/adopt.md)
  python -m extender adopt statefulset/crdb -n db --policy-name crdb --dry-run""",
    "retire": """workloads kept in git (docs/how-to/gitops.md)
  python -m extender retire -f apps/db/statefulset.yaml --kustomize apps/db/placement
  python -m extender retire -f apps/db/statefulset.yaml > retired.yaml && mv retired.yaml apps/db/statefulset.yaml
the live form edits the cluster (docs/how-to/adopt.md)
  python -m extender retire statefulset/crdb -n db --dry-run""",
}


def _rotation_export(args: argparse.Namespace) -> int:
    """rotation export: the set's ZoneRotation to commit; read-only. The live record (stripped of
    the server's fields and of the ownerReference earlier versions wrote), else the record
    adopting its running pods would write (ops/rollout.py)."""
    from ..kube.client import KubeApiError, connect
    from ..ops.manifests import dump, to_commit
    from ..ops.rollout import check_adoption
    from ..state.watcher import list_once

    kind, path = _workload_path(args.workload, args.namespace)
    if kind != "StatefulSet":
        raise UsageError(f"{args.workload!r}: a ZoneRotation places a StatefulSet's ordinals: name statefulset/NAME")
    name = path.rsplit("/", 1)[1]
    api = connect(args.kubeconfig, args.context)
    live = _live_rotation(api, args.namespace, name)
    if live is not None:
        if (live.get("metadata") or {}).get("ownerReferences"):
            print(
                f"rotation export: ZoneRotation {args.namespace}/{live['metadata']['name']} was written with an "
                "ownerReference (by an earlier version): the garbage collector deletes it with the StatefulSet. "
                "Remove it once:\n"
                f"  kubectl patch zonerotation {live['metadata']['name']} -n {args.namespace} --type=json "
                """-p '[{"op":"remove","path":"/metadata/ownerReferences"}]'""",
                file=sys.stderr,
            )
        sys.stdout.write(dump([to_commit(live)]))
        return ExitCode.OK
    try:
        workload = {"kind": kind, **api.call("GET", path)}
    except KubeApiError as err:
        if err.status == 404:
            raise UsageError(
                f"StatefulSet {args.namespace}/{name} is not in the cluster and has no ZoneRotation"
            ) from None
        raise
    spec = _template_policy(api, args, workload)
    if spec.ordinalZones is None:
        raise UsageError(f"the policy of StatefulSet {args.namespace}/{name} sets no ordinalZones: it has no rotation")
    rollout = check_adoption(list_once(api), args.namespace, name, spec)
    record = _record_document(rollout)
    if record is None:
        raise UsageError(
            f"StatefulSet {args.namespace}/{name} runs no pod and has no ZoneRotation: its first pods decide "
            "the rotation; export it once they run"
        )
    for problem in rollout.problems:
        print(f"rotation export: note: {problem}", file=sys.stderr)
    sys.stdout.write(dump([to_commit(record)]))
    return ExitCode.OK


def _template_policy(api, args: argparse.Namespace, workload: dict) -> PlacementPolicySpec:  # noqa: ANN001
    """The policy given on the command line, else the one the workload's template names."""
    if getattr(args, "policy_file", None):
        return _policy_file(args.policy_file)
    if getattr(args, "policy_name", None):
        return _named_policy(api, args.namespace, args.policy_name)
    annotations = ((workload["spec"].get("template") or {}).get("metadata") or {}).get("annotations") or {}
    if INLINE_POLICY_ANNOTATION in annotations:
        return parse_annotation(annotations[INLINE_POLICY_ANNOTATION], f"{workload['kind']} {args.namespace}")
    if POLICY_REF_ANNOTATION in annotations:
        return _named_policy(api, args.namespace, annotations[POLICY_REF_ANNOTATION])
    raise UsageError("the workload's template names no policy: give --policy-name or --policy-file")


# The subcommand table argparse hands back from add_subparsers (its type is private to argparse).
Subcommands = argparse._SubParsersAction


def parser() -> argparse.ArgumentParser:
    """The CLI: the top-level options, then each command group from a function of its own, in the
    order `--help` lists them."""
    top = argparse.ArgumentParser(prog="python -m extender", description=__doc__)
    top.add_argument(
        "--log-level",
        choices=["debug", "info", "warning", "error"],
        help="default: $EXTENDER_LOG_LEVEL or info for serve, dev and ab; warning for the operator commands "
        "(their -v: info, -vv: debug), which the variable, meant for the server, does not change",
    )
    top.add_argument(
        "--log-json", action="store_true", default=_env("EXTENDER_LOG_JSON") == "1", help="structured JSON logs"
    )
    sub = top.add_subparsers(dest="command", required=True)
    # The operator commands print their answer and nothing else: warnings and errors still reach
    # stderr, the cache's progress lines (listed N nodes, ...) only with -v.
    quiet = argparse.ArgumentParser(add_help=False)
    quiet.add_argument("-v", "--verbose", action="count", default=0, help="log progress (-vv: debug)")

    _add_serve(sub)
    _add_in_cluster_helpers(sub)
    _add_schema_printers(sub)
    _add_demo(sub)
    _add_retire_path(sub, quiet)
    _add_inspection(sub, quiet)
    _add_workload_moves(sub, quiet)
    _add_rotation(sub, quiet)
    _add_planning(sub, quiet)
    return top


def _add_serve(sub: Subcommands) -> None:
    """serve: the extender itself, as kube-scheduler calls it (its options are the deployment's flags)."""
    serve = sub.add_parser("serve", help="serve filter/prioritize/bind/preempt to kube-scheduler")
    serve.add_argument(
        "--listen",
        default=_env("EXTENDER_LISTEN", DEFAULT_LISTEN),
        help=f"address:port (default {DEFAULT_LISTEN}: a sidecar of its scheduler; docs/security.md before widening)",
    )
    serve.add_argument(
        "--kubeconfig",
        default=_env("EXTENDER_KUBECONFIG", _env("KUBECONFIG")),
        help="kubeconfig path (default: in-cluster credentials, else ~/.kube/config)",
    )
    serve.add_argument(
        "--threads",
        type=int,
        default=int(_env("EXTENDER_THREADS", str(DEFAULT_THREADS)) or DEFAULT_THREADS),
        help="connections served at once, each by its own thread; when all are taken the longest idle "
        "one is closed to make room",
    )
    serve.add_argument("--max-body", type=int, default=DEFAULT_MAX_BODY, help="largest request body in bytes")
    serve.add_argument(
        "--place-window",
        type=_non_negative_int,
        default=DEFAULT_PLACE_WINDOW,
        help="in-scheduler mode: pods held by the placeable gate lifted and not yet bound at once "
        f"(default {DEFAULT_PLACE_WINDOW}); what a hung extender can cost other pods: "
        "that many httpTimeouts per kube-scheduler retry (docs/operations/failure-modes.md)",
    )
    serve.add_argument(
        "--place-visible",
        type=_non_negative_int,
        default=DEFAULT_PLACE_VISIBLE,
        help="in-scheduler mode: pods with no place lifted anyway so autoscalers see them, per namespace "
        f"(default {DEFAULT_PLACE_VISIBLE}; 0: none); only pods carrying their rules' native form, which "
        "kube-scheduler refuses without asking the extender",
    )
    serve.add_argument(
        "--place-lifted-ttl",
        type=_positive_seconds,
        default=DEFAULT_PLACE_LIFTED_TTL,
        help="in-scheduler mode: seconds a lifted pod keeps its slot of the window after kube-scheduler "
        f"has tried it without binding it (it lost its place; default {DEFAULT_PLACE_LIFTED_TTL:g}). "
        "Until kube-scheduler has tried it, it keeps the slot: a partition lifts nothing more",
    )
    serve.add_argument(
        "--scheduler-name",
        action="append",
        metavar="NAME",
        help=f"a schedulerName whose pods are the extender's own (repeatable; default {SCHEDULER_NAME}, adopt's); "
        "pods requesting the opt-in resource are its own too (in-scheduler mode). It lifts gates only of its own pods",
    )
    serve.add_argument(
        "--decision-deadline",
        type=_positive_seconds,
        default=float(_env("EXTENDER_DECISION_DEADLINE", str(DEFAULT_DECISION_DEADLINE)) or DEFAULT_DECISION_DEADLINE),
        help="seconds of dead-end analysis one decision may take before the hard rules alone decide "
        f"(default {DEFAULT_DECISION_DEADLINE}; kube-scheduler's extender timeout is 5 s; in-scheduler mode: "
        f"{IN_SCHEDULER_DECISION_DEADLINE}, its stanza's timeout being 300 ms)",
    )
    serve.add_argument(
        "--failed-node-reasons",
        type=_failed_node_reasons,
        metavar="{" + ",".join(m.value for m in FailedNodeReasons) + "}",
        default=_env("EXTENDER_FAILED_NODE_REASONS", FailedNodeReasons.WHEN_NONE_PASS.value),
        help="when filter lists a reason per refused node: only when no node passes (the default: "
        "kube-scheduler reads them only then), or always (for a kube-scheduler with another extender "
        "after this one)",
    )
    serve.add_argument(
        "--reservation-ttl", type=float, default=DEFAULT_TENTATIVE_TTL, help="seconds a tentative placement is held"
    )
    serve.add_argument(
        "--watch-timeout",
        type=int,
        default=DEFAULT_WATCH_TIMEOUT,
        help=f"seconds a watch stays open before it resumes (default {DEFAULT_WATCH_TIMEOUT})",
    )
    serve.add_argument("--no-events", action="store_true", help="do not record Events on pods")
    serve.add_argument(
        "--no-place-gate",
        action="store_true",
        help="in-scheduler mode: never lift the placeable gate (opted-in pods stay held until something "
        "else removes it); for measuring the gate's own cost, not for a cluster: nothing then bounds "
        "what a hung extender costs other pods",
    )
    serve.add_argument("--access-log", action="store_true")
    serve.add_argument(
        "--tls-cert-file", default=_env("EXTENDER_TLS_CERT_FILE"), help="serve HTTPS with this certificate"
    )
    serve.add_argument("--tls-key-file", default=_env("EXTENDER_TLS_KEY_FILE"))
    serve.add_argument(
        "--tls-client-ca-file",
        default=_env("EXTENDER_TLS_CLIENT_CA_FILE"),
        help="require client certificates signed by this CA (mutual TLS with kube-scheduler); use a CA that "
        "signs for this purpose alone",
    )
    serve.add_argument(
        "--tls-client-name",
        action="append",
        metavar="NAME",
        help="with --tls-client-ca-file: a client certificate name (its CN, or a DNS/URI/email SAN) admitted "
        f"(repeatable; default {DEFAULT_TLS_CLIENT_NAME}, the scheduler's in the TLS install); any other "
        "certificate of the CA gets 403",
    )
    serve.add_argument(
        "--health-listen",
        default=_env("EXTENDER_HEALTH_LISTEN"),
        help="also answer /healthz and /readyz (only those, plain HTTP) on this loopback address:port, "
        "for the pod's exec probes: accepted whatever the verb port is doing (a flood of verb requests "
        "cannot fail them), and beside a TLS listener, which the kubelet cannot pass (it has no client certificate)",
    )
    serve.add_argument(
        "--metrics-listen",
        metavar="HOST:PORT",
        default=_env("EXTENDER_METRICS_LISTEN"),
        help="also serve GET /metrics over HTTPS on this address (e.g. 0.0.0.0:8080; default off), for "
        "Prometheus: the scraper's bearer token is checked by a TokenReview and a SubjectAccessReview "
        "(get on /metrics: the ClusterRole placement-metrics-reader). Its own connections and threads, "
        "apart from the verbs'; the certificate is --tls-cert-file's, else a self-signed one made at start",
    )
    serve.add_argument(
        "--leader-elect",
        action="store_true",
        default=_env("EXTENDER_LEADER_ELECT", "") == "true",
        help="run as one of several replicas: the holder of a Lease decides, the others keep a warm cache and "
        "answer every verb with an Error until they take the Lease (docs/operations/high-availability.md)",
    )
    serve.add_argument(
        "--leader-elect-lease",
        metavar="NAMESPACE/NAME",
        default=_env("EXTENDER_LEADER_ELECT_LEASE", f"{_env('POD_NAMESPACE', 'placement-system')}/placement-extender"),
        help="the Lease the replicas share (default: POD_NAMESPACE/placement-extender)",
    )
    serve.add_argument(
        "--leader-elect-timing",
        metavar="DURATION,DEADLINE,RETRY",
        default=_env("EXTENDER_LEADER_ELECT_TIMING", "10,7,2"),
        help="seconds: the Lease's duration, the holder's renew deadline, the retry period (default 10,7,2: a "
        "killed holder is replaced within 12 s, one ended gracefully within 2 s)",
    )
    serve.add_argument(
        "--active-service",
        metavar="NAME",
        default=_env("EXTENDER_ACTIVE_SERVICE"),
        help="with --leader-elect: the Service (no selector, in the Lease's namespace) whose one endpoint the "
        "active replica makes itself, so kube-scheduler's calls reach it and not a standby; needs the pod's "
        "POD_NAME and POD_IP in the environment (the downward API)",
    )
    serve.set_defaults(func=_serve)


def _add_in_cluster_helpers(sub: Subcommands) -> None:
    """The other processes an install runs in the cluster: the scale-down controller and the
    Helm chart's namespace-labelling hook."""
    dc = sub.add_parser(
        "deletion-costs",
        help="opt-in scale-down controller: pod-deletion-cost on ReplicaSet pods of policy groups",
    )
    dc.add_argument("--kubeconfig", default=_env("EXTENDER_KUBECONFIG", _env("KUBECONFIG")))
    dc.add_argument("--interval", type=_positive_seconds, default=2.0, help="seconds between passes (default 2)")
    dc.add_argument("--rate", type=float, default=10.0, help="most patches a second (default 10)")
    dc.set_defaults(func=_deletion_costs)

    ln = sub.add_parser(
        "label-namespace",
        help="merge labels into a namespace's (the Helm chart's install hook: Pod Security labels on its namespace)",
    )
    ln.add_argument("namespace", help="the namespace to label")
    ln.add_argument("labels", nargs="+", metavar="KEY=VALUE", help="each label to set (the others stay)")
    ln.add_argument("--kubeconfig", default=_env("KUBECONFIG"), help="default: in-cluster credentials")
    ln.set_defaults(func=_label_namespace)


def _add_schema_printers(sub: Subcommands) -> None:
    """What a platform team applies or validates against: the policy's JSON schema and the CRDs."""
    schema = sub.add_parser("schema", help="print the JSON schema of a placement policy spec")
    schema.set_defaults(func=_schema)

    crd = sub.add_parser("crd", help="print a CustomResourceDefinition (PlacementPolicy, or ZoneRotation)")
    crd.add_argument("--kind", choices=["PlacementPolicy", "ZoneRotation"], default="PlacementPolicy")
    crd.set_defaults(func=_crd)


def _add_demo(sub: Subcommands) -> None:
    """dev: the local control plane of the demo."""
    dev = sub.add_parser("dev", help="a local control plane with the extender (the demo)")
    dev_sub = dev.add_subparsers(dest="dev_command", required=True)
    up = dev_sub.add_parser("up", help="start it, apply a sample StatefulSet, print placements, wait for Ctrl-C")
    up.add_argument("--zones", type=int, default=3)
    up.add_argument("--nodes-per-zone", type=int, default=2)
    up.add_argument("--replicas", type=int, default=6)
    up.add_argument("--no-wait", action="store_true", help="tear down right after printing (smoke test)")
    up.set_defaults(func=_dev_up)


def _add_retire_path(sub: Subcommands, quiet: argparse.ArgumentParser) -> None:
    """What the native scheduler would give instead: translate a policy to native constraints, and
    ab to measure both sides on a scenario."""
    tr = sub.add_parser(
        "translate",
        parents=[quiet],
        help="the closest native topologySpreadConstraints/affinity for a policy (the retire path)",
    )
    tr.add_argument(
        "source",
        help="a file (PlacementPolicy, StatefulSet with an inline policy, or a bare spec; '-' for stdin), "
        "or statefulset/NAME or placementpolicy/NAME in the live cluster",
    )
    tr.add_argument("-n", "--namespace", default="default")
    tr.add_argument("--kubeconfig", default=_env("KUBECONFIG"))
    tr.add_argument("--context", help="the kubeconfig context to use (default: its current context)")
    tr.add_argument("--size", type=int, help="group size (default: group.size, else the StatefulSets' replicas)")
    tr.add_argument(
        "--match-labels", help="labels of the group's pods, k=v[,k=v] (default: the StatefulSet's selector)"
    )
    tr.add_argument(
        "--shard-label",
        default="controller-revision-hash",
        help="pod label that differs per shard, for anti-affinity's matchLabelKeys",
    )
    tr.add_argument("--json", action="store_true")
    tr.set_defaults(func=_translate)

    ab = sub.add_parser("ab", help="run a scenario under the native scheduler and under the extender, K times each")
    ab.add_argument("scenario", help="scenario YAML (see config/ab/)")
    ab.add_argument("-k", "--repetitions", type=int, help="repetitions per side (default: the scenario's)")
    ab.add_argument("--out", help="directory for ab-<scenario>.json and .png (default: .)")
    ab.add_argument("--no-png", action="store_true", help="skip the picture (no matplotlib needed)")
    ab.set_defaults(func=_ab)


def _add_inspection(sub: Subcommands, quiet: argparse.ArgumentParser) -> None:
    """Reading a live cluster: explain one pod's verdicts, audit every policy group."""
    ex = sub.add_parser(
        "explain", parents=[quiet], help="for one pod, each node's verdict with the rule and its numbers (live cluster)"
    )
    ex.add_argument("pod", help="POD (with -n NAMESPACE), or NAMESPACE/POD")
    ex.add_argument("-n", "--namespace", help="the pod's namespace (default: default)")
    ex.add_argument("--kubeconfig", default=_env("KUBECONFIG"))
    ex.add_argument("--context", help="the kubeconfig context to use (default: its current context)")
    ex.add_argument("--json", action="store_true")
    ex.set_defaults(func=_explain)

    au = sub.add_parser(
        "audit",
        parents=[quiet],
        help="every policy group: placement table, broken hard rules, scale-down risks, nodes over allocatable, "
        "pending pods; exit 1 on a violation",
    )
    au.add_argument("-n", "--namespace", help="only this namespace")
    au.add_argument(
        "--scheduler-name",
        default=SCHEDULER_NAME,
        help="the schedulerName whose pods are held to their policies (default placement-scheduler, as adopt's); "
        "a workload whose pods another scheduler placed, e.g. after retire, is not audited",
    )
    au.add_argument("--kubeconfig", default=_env("KUBECONFIG"))
    au.add_argument("--context", help="the kubeconfig context to use (default: its current context)")
    au.add_argument("--json", action="store_true")
    au.set_defaults(func=_audit)


def _add_workload_moves(sub: Subcommands, quiet: argparse.ArgumentParser) -> None:
    """adopt and retire: moving a workload to the extender and back, live or as GitOps manifests
    (the two share every option but where the policy comes from)."""
    for verb, func, text in (
        ("adopt", _adopt, "move a workload to the extender: schedulerName, policy, implied native constraints, gate"),
        ("retire", _retire, "move a workload back to the native scheduler: adopt's additions out, translate's in"),
    ):
        cmd = sub.add_parser(
            verb,
            parents=[quiet],
            help=text,
            description=text,
            usage=USAGE[verb],
            epilog=EPILOG[verb],
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        cmd.add_argument(
            "workload", nargs="?", help="statefulset/NAME or deployment/NAME (with -f: which of the file's, if several)"
        )
        cmd.add_argument("-n", "--namespace", default="default")
        cmd.add_argument("--kubeconfig", default=_env("KUBECONFIG"))
        cmd.add_argument("--context", help="the kubeconfig context to use (default: its current context)")
        cmd.add_argument("--dry-run", action="store_true", help="print the new pod template; write nothing")
        cmd.add_argument(
            "-f",
            "--filename",
            help=f"the workload's manifest ('-' for stdin), for GitOps: {verb} it and print, as YAML, every object "
            f"{verb} would write (the workload and, for a running StatefulSet, its ZoneRotation); write nothing",
        )
        cmd.add_argument(
            "-o",
            "--output",
            choices=["text", "yaml"],
            default="text",
            help="yaml: the objects as YAML on stdout, the rest on stderr (with --dry-run or -f)",
        )
        cmd.add_argument(
            "--offline",
            action="store_true",
            help="with -f: read no cluster (no rollout check; a named policy, and for a running StatefulSet its "
            "ZoneRotation, must be in the files: `rotation export` prints it)",
        )
        cmd.add_argument(
            "--kustomize",
            metavar="DIR",
            help="with -f: write a kustomize Component in DIR (the policy, the ZoneRotation, and a patch of the "
            f"workload with {verb}'s changes alone) instead of printing; list it once under `components:` in the "
            "app's kustomization.yaml",
        )
        cmd.set_defaults(func=func)
        if verb == "adopt":
            source = cmd.add_mutually_exclusive_group(required=True)
            source.add_argument("--policy-name", help="a PlacementPolicy in the workload's namespace")
            source.add_argument("--policy-file", help="a policy file to inline in the template ('-' for stdin)")
            cmd.add_argument(
                "--scheduler-name",
                default=SCHEDULER_NAME,
                help="the schedulerName of the kube-scheduler that calls the extender (default placement-scheduler)",
            )
            cmd.add_argument(
                "--mode",
                choices=["second-scheduler", "in-scheduler"],
                default="second-scheduler",
                help="second-scheduler (default): set schedulerName; in-scheduler: request the opt-in resource "
                "placement.extender.dev/opt-in instead (the cluster's own kube-scheduler calls the extender)",
            )
            cmd.add_argument(
                "--node-pool",
                metavar="KEY=VALUE",
                help="keep the workload on a dedicated node pool: nodeSelector KEY=VALUE and a toleration of the "
                "taint KEY=VALUE:NoSchedule (nodes no other scheduler's pods share: docs/concepts/two-ways-to-run.md)",
            )
        else:
            cmd.add_argument("--no-translate", action="store_true", help="do not write translate's constraints")


def _add_rotation(sub: Subcommands, quiet: argparse.ArgumentParser) -> None:
    """rotation export: a StatefulSet's ZoneRotation record, for the GitOps path."""
    ro = sub.add_parser("rotation", help="a StatefulSet's ZoneRotation record")
    ro_sub = ro.add_subparsers(dest="rotation_command", required=True)
    ex = ro_sub.add_parser(
        "export",
        parents=[quiet],
        help="print a StatefulSet's ZoneRotation as YAML to commit (read-only): the live record without its "
        "server fields and ownerReference, else the record adopting the running pods would write",
    )
    ex.add_argument("workload", help="statefulset/NAME")
    ex.add_argument("-n", "--namespace", default="default")
    ex.add_argument("--kubeconfig", default=_env("KUBECONFIG"))
    ex.add_argument("--context", help="the kubeconfig context to use (default: its current context)")
    policy = ex.add_mutually_exclusive_group()
    policy.add_argument("--policy-name", help="the set's PlacementPolicy, when its template names none yet")
    policy.add_argument("--policy-file", help="the set's policy file, when its template has none yet")
    ex.set_defaults(func=_rotation_export)


def _add_planning(sub: Subcommands, quiet: argparse.ArgumentParser) -> None:
    """Before changing anything: plan growth or drains, and check a policy file."""
    pl = sub.add_parser(
        "plan",
        parents=[quiet],
        help="what growing a StatefulSet or draining nodes takes under its policy; exit 1 when not feasible",
    )
    pl.add_argument(
        "target",
        nargs="+",
        help="statefulset/NAME --replicas N, placementpolicy/NAME --size N, or: drain node/NAME ... | drain --all",
    )
    pl.add_argument("--replicas", type=int, help="statefulset/NAME: the replicas to plan for")
    pl.add_argument("--size", type=int, help="placementpolicy/NAME: the group size to plan for")
    pl.add_argument("--all", action="store_true", help="drain: every node alone, safe ones first")
    pl.add_argument("-n", "--namespace", default="default")
    pl.add_argument("--kubeconfig", default=_env("KUBECONFIG"))
    pl.add_argument("--context", help="the kubeconfig context to use (default: its current context)")
    pl.add_argument("--json", action="store_true")
    pl.set_defaults(func=_plan)

    check = sub.add_parser(
        "check", parents=[quiet], help="validate a policy file (PlacementPolicy, bare spec, or '-' for stdin)"
    )
    check.add_argument("file")
    check.set_defaults(func=_check)


def log_level(args: argparse.Namespace) -> str:
    """--log-level when given; else info for the long-running commands and warning for the
    operator commands, whose -v / -vv raise it to info / debug."""
    if args.log_level:
        return args.log_level
    verbose = getattr(args, "verbose", None)
    if verbose is None:
        return _env("EXTENDER_LOG_LEVEL", "info") or "info"
    return ("warning", "info")[verbose] if verbose < 2 else "debug"


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; every expected failure is one line on stderr and its exit code
    (exit_codes.py), never a traceback."""
    args = parser().parse_args(argv)
    setup_logging(log_level(args), args.log_json)
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler below
        return code
    except BrokenPipeError:
        # `... | head`: the reader went away. Point stdout at /dev/null so the interpreter's own
        # flush at exit cannot raise again, and stop quietly, as a shell reports SIGPIPE.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return ExitCode.CLOSED_PIPE
    except KeyboardInterrupt:
        print(f"{args.command}: interrupted", file=sys.stderr)
        return ExitCode.INTERRUPTED
    except Exception as err:  # noqa: BLE001 - the expected ones are answered, the rest re-raised
        known = explained(err)
        if known is None:
            raise
        code, message = known
        print(f"{args.command}: {message}", file=sys.stderr)
        return code


if __name__ == "__main__":
    raise SystemExit(main())
