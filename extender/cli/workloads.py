"""adopt and retire: moving a workload to the extender and back, live (read, decide, write again
on a conflict) or from its manifest for GitOps (-f, printed as YAML or written as a kustomize
component, nothing written to the cluster). Also the workload and policy lookups rotation export
shares with them."""

from __future__ import annotations

import argparse
import sys

import yaml

from ..api.policy import (
    INLINE_POLICY_ANNOTATION,
    KIND,
    POLICY_REF_ANNOTATION,
    SCHEDULER_NAME,
    PlacementPolicySpec,
    parse_annotation,
    parse_spec,
)
from .common import Subcommands, env
from .errors import UsageError
from .exit_codes import ExitCode

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


def register(sub: Subcommands, quiet: argparse.ArgumentParser) -> None:
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
        cmd.add_argument("--kubeconfig", default=env("KUBECONFIG"))
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
            source.add_argument("--policy-name", type=_not_empty, help="a PlacementPolicy in the workload's namespace")
            source.add_argument(
                "--policy-file", type=_not_empty, help="a policy file to inline in the template ('-' for stdin)"
            )
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


# adopt and retire on the live cluster: read, decide, write (again on a 409).


def _adopt(args: argparse.Namespace) -> int:
    from ..kube.client import connect, retry_on_conflict

    _check_output(args)
    if args.filename:
        return _adopt_manifest(args)
    kind, path = workload_path(args.workload, args.namespace)
    from_file = None if args.policy_name else policy_file(args.policy_file)  # stdin is read once
    api = connect(args.kubeconfig, args.context)
    # Read, decide and write again on a 409: the StatefulSet controller's status writes alone
    # can move the resourceVersion between our read and our update.
    change, rollout = retry_on_conflict(lambda: _adopt_once(args, api, kind, path, from_file))
    if rollout is not None and not rollout.completes:
        print("adopt: refused, nothing written: the rollout adopting starts would stall", file=sys.stderr)
        _show_rollout(rollout)
        return ExitCode.FINDING
    _show_change(args, "adopt", kind, change, rollout, record_document(rollout))
    return ExitCode.OK


def _adopt_once(args: argparse.Namespace, api, kind: str, path: str, from_file: PlacementPolicySpec | None):  # noqa: ANN001, ANN202
    """One read-decide-write of adopt: the change and the rollout check (None for a Deployment);
    nothing is written when the rollout would stall."""
    from ..ops.rollout import check_adoption
    from ..server.effects import update_workload, write_adopted_rotation
    from ..state.watcher import list_once

    workload = {"kind": kind, **api.call("GET", path)}
    if from_file is None:
        spec = named_policy(api, args.namespace, args.policy_name)
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


def _not_empty(text: str) -> str:
    """--policy-name or --policy-file: an empty one named neither (it fell through to reading no file)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(
            "is empty: name a PlacementPolicy in the workload's namespace or a policy file"
        )
    return text


def _node_pool(text: str | None) -> tuple[str, str] | None:
    if text is None:
        return None
    key, sep, value = text.partition("=")
    if not sep or not key or not value:
        raise ValueError(f"--node-pool {text!r}: give it as KEY=VALUE, the label (and taint) of the pool's nodes")
    return key, value


def _retire(args: argparse.Namespace) -> int:
    from ..kube.client import connect, retry_on_conflict

    _check_output(args)
    if args.filename:
        return _retire_manifest(args)
    kind, path = workload_path(args.workload, args.namespace)
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
        spec = named_policy(api, args.namespace, annotations[POLICY_REF_ANNOTATION])
    change = retire(workload, spec, translated=not args.no_translate)
    if not args.dry_run:
        update_workload(api, path, change.workload)
    return change


# -f FILE, for GitOps: the workload from its manifest, every object to commit printed (or written as
# a kustomize component); nothing is written to the cluster.


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
        workload_path(args.workload, args.namespace)  # the same spelling as the live command
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
        spec = policy_file(args.policy_file)
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
    record = record_document(rollout)
    if record is None and spec.ordinalZones is not None:
        record = live_rotation(api, namespace, name)
    return rollout, record


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
            spec = named_policy(connect(args.kubeconfig, args.context), namespace, ref)
    change = retire(workload, spec, translated=not args.no_translate)
    if spec is None and not args.no_translate and POLICY_REF_ANNOTATION in annotations:
        change.notes.append("--offline and the policy is not in the manifests: no native constraints translated")
    others = [] if args.kustomize else other_documents(docs, before)
    _show_change(args, "retire", kind, change, before=before, others=others)
    return ExitCode.OK


# What adopt and retire print, and the component -f --kustomize writes.


def _check_output(args: argparse.Namespace) -> None:
    if args.output == "yaml" and not (args.dry_run or args.filename):
        raise UsageError("-o yaml prints what would be written: give --dry-run, or -f FILE (which never writes)")
    if args.filename is None and args.workload is None:
        raise UsageError("name the workload (statefulset/NAME or deployment/NAME), or give its manifest with -f FILE")
    if args.offline and args.filename is None:
        raise UsageError("--offline reads no cluster, so it needs the workload's manifest: -f FILE")
    if args.kustomize and args.filename is None:
        raise UsageError("--kustomize DIR writes a component for the app's manifest: give it with -f FILE")


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


# Looking up the workload, its policy and its ZoneRotation (rotation export uses these too).


def workload_path(ref: str, namespace: str) -> tuple[str, str]:
    from ..ops.adopt import KINDS

    alias, _, name = ref.partition("/")
    kind = KINDS.get({"sts": "statefulset", "deploy": "deployment"}.get(alias.lower(), alias.lower().removesuffix("s")))
    if not kind or not name:
        raise UsageError(f"{ref!r}: name the workload as statefulset/NAME or deployment/NAME")
    plural = kind.lower() + "s"
    return kind, f"/apis/apps/v1/namespaces/{namespace}/{plural}/{name}"


def named_policy(api, namespace: str, name: str) -> PlacementPolicySpec:
    from ..api.policy import API_GROUP, API_VERSION, PLURAL

    obj = api.call("GET", f"/apis/{API_GROUP}/{API_VERSION}/namespaces/{namespace}/{PLURAL}/{name}")
    return parse_spec((obj or {}).get("spec") or {}, f"{KIND} {namespace}/{name}")


def _named_policy_object(api, namespace: str, name: str) -> dict:  # noqa: ANN001
    from ..api.policy import API_GROUP, API_VERSION, PLURAL

    obj = api.call("GET", f"/apis/{API_GROUP}/{API_VERSION}/namespaces/{namespace}/{PLURAL}/{name}") or {}
    return {"apiVersion": f"{API_GROUP}/{API_VERSION}", "kind": KIND, **obj}


def policy_file(path: str) -> PlacementPolicySpec:
    text = sys.stdin.read() if path == "-" else open(path, encoding="utf-8").read()
    docs = [d for d in yaml.safe_load_all(text) if d is not None]
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise ValueError(f"{path}: expected one PlacementPolicy or one bare policy spec")
    doc = docs[0]
    return parse_spec(doc.get("spec") or {}, f"{KIND} in {path}") if doc.get("kind") == KIND else parse_spec(doc, path)


def live_rotation(api, namespace: str, statefulset: str) -> dict | None:  # noqa: ANN001
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


def record_document(rollout) -> dict | None:  # noqa: ANN001
    """The ZoneRotation adopt writes for this rollout, as an object (None: none to write)."""
    from ..api.rotation import rotation_object

    if rollout is None or rollout.record is None:
        return None
    record = rollout.record
    return rotation_object(record.namespace, record.statefulset, record.order, record.adopted)
