"""serve: the extender itself, as kube-scheduler calls it. Its flags are the deployment's, registered
in named groups (where it listens, the placeable gate, decisions, what it may skip, TLS, the side
ports, leader election) in the order `--help` lists them."""

from __future__ import annotations

import argparse
import logging
import os
import socket
import sys

from ..api.policy import SCHEDULER_NAME
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
from .common import Subcommands, env, positive_seconds


def _failed_node_reasons(text: str) -> FailedNodeReasons:
    """--failed-node-reasons or EXTENDER_FAILED_NODE_REASONS (argparse checks `choices` only on
    the command line, `type` on both)."""
    try:
        return FailedNodeReasons(text)
    except ValueError:
        allowed = ", ".join(m.value for m in FailedNodeReasons)
        raise argparse.ArgumentTypeError(f"{text!r} is not one of {allowed}") from None


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


def register(sub: Subcommands) -> None:
    """serve: the extender itself, as kube-scheduler calls it (its options are the deployment's flags),
    one function per group of flags, called in the order `--help` lists them."""
    serve = sub.add_parser("serve", help="serve filter/prioritize/bind/preempt to kube-scheduler")
    _add_listening(serve)
    _add_place_gate(serve)
    _add_decisions(serve)
    _add_switches(serve)
    _add_tls(serve)
    _add_side_ports(serve)
    _add_leader_election(serve)
    serve.set_defaults(func=_serve)


def _add_listening(serve: argparse.ArgumentParser) -> None:
    """Where it listens, the cluster it reads, and how much it takes on at once."""
    serve.add_argument(
        "--listen",
        default=env("EXTENDER_LISTEN", DEFAULT_LISTEN),
        help=f"address:port (default {DEFAULT_LISTEN}: a sidecar of its scheduler; docs/security.md before widening)",
    )
    serve.add_argument(
        "--kubeconfig",
        default=env("EXTENDER_KUBECONFIG", env("KUBECONFIG")),
        help="kubeconfig path (default: in-cluster credentials, else ~/.kube/config)",
    )
    serve.add_argument(
        "--threads",
        type=int,
        default=int(env("EXTENDER_THREADS", str(DEFAULT_THREADS)) or DEFAULT_THREADS),
        help="connections served at once, each by its own thread; when all are taken the longest idle "
        "one is closed to make room",
    )
    serve.add_argument("--max-body", type=int, default=DEFAULT_MAX_BODY, help="largest request body in bytes")


def _add_place_gate(serve: argparse.ArgumentParser) -> None:
    """In-scheduler mode's placeable gate: how many held pods it lifts at once, and for how long."""
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
        type=positive_seconds,
        default=DEFAULT_PLACE_LIFTED_TTL,
        help="in-scheduler mode: seconds a lifted pod keeps its slot of the window after kube-scheduler "
        f"has tried it without binding it (it lost its place; default {DEFAULT_PLACE_LIFTED_TTL:g}). "
        "Until kube-scheduler has tried it, it keeps the slot: a partition lifts nothing more",
    )


def _add_decisions(serve: argparse.ArgumentParser) -> None:
    """Which pods are its own, how long one decision may take, what filter answers, how long it holds
    a placement and a watch."""
    serve.add_argument(
        "--scheduler-name",
        action="append",
        metavar="NAME",
        help=f"a schedulerName whose pods are the extender's own (repeatable; default {SCHEDULER_NAME}, adopt's); "
        "pods requesting the opt-in resource are its own too (in-scheduler mode). It lifts gates only of its own pods",
    )
    serve.add_argument(
        "--decision-deadline",
        type=positive_seconds,
        default=float(env("EXTENDER_DECISION_DEADLINE", str(DEFAULT_DECISION_DEADLINE)) or DEFAULT_DECISION_DEADLINE),
        help="seconds of dead-end analysis one decision may take before the hard rules alone decide "
        f"(default {DEFAULT_DECISION_DEADLINE}; kube-scheduler's extender timeout is 5 s; in-scheduler mode: "
        f"{IN_SCHEDULER_DECISION_DEADLINE}, its stanza's timeout being 100 ms)",
    )
    serve.add_argument(
        "--failed-node-reasons",
        type=_failed_node_reasons,
        metavar="{" + ",".join(m.value for m in FailedNodeReasons) + "}",
        default=env("EXTENDER_FAILED_NODE_REASONS", FailedNodeReasons.WHEN_NONE_PASS.value),
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


def _add_switches(serve: argparse.ArgumentParser) -> None:
    """What it can be told to leave out: Events, lifting the gate, the access log."""
    serve.add_argument("--no-events", action="store_true", help="do not record Events on pods")
    serve.add_argument(
        "--no-place-gate",
        action="store_true",
        help="in-scheduler mode: never lift the placeable gate (opted-in pods stay held until something "
        "else removes it); for measuring the gate's own cost, not for a cluster: nothing then bounds "
        "what a hung extender costs other pods",
    )
    serve.add_argument("--access-log", action="store_true")


def _add_tls(serve: argparse.ArgumentParser) -> None:
    """HTTPS on the verbs' port, and which client certificates it admits."""
    serve.add_argument(
        "--tls-cert-file", default=env("EXTENDER_TLS_CERT_FILE"), help="serve HTTPS with this certificate"
    )
    serve.add_argument("--tls-key-file", default=env("EXTENDER_TLS_KEY_FILE"))
    serve.add_argument(
        "--tls-client-ca-file",
        default=env("EXTENDER_TLS_CLIENT_CA_FILE"),
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


def _add_side_ports(serve: argparse.ArgumentParser) -> None:
    """The ports beside the verbs': health for the kubelet's probes, metrics for Prometheus."""
    serve.add_argument(
        "--health-listen",
        default=env("EXTENDER_HEALTH_LISTEN"),
        help="also answer /healthz and /readyz (only those, plain HTTP) on this loopback address:port, "
        "for the pod's exec probes: accepted whatever the verb port is doing (a flood of verb requests "
        "cannot fail them), and beside a TLS listener, which the kubelet cannot pass (it has no client certificate)",
    )
    serve.add_argument(
        "--metrics-listen",
        metavar="HOST:PORT",
        default=env("EXTENDER_METRICS_LISTEN"),
        help="also serve GET /metrics over HTTPS on this address (e.g. 0.0.0.0:8080; default off), for "
        "Prometheus: the scraper's bearer token is checked by a TokenReview and a SubjectAccessReview "
        "(get on /metrics: the ClusterRole placement-metrics-reader). Its own connections and threads, "
        "apart from the verbs'; the certificate is --tls-cert-file's, else a self-signed one made at start",
    )


def _add_leader_election(serve: argparse.ArgumentParser) -> None:
    """Several replicas, one deciding: the Lease, its timing, and the Service that follows the holder."""
    serve.add_argument(
        "--leader-elect",
        action="store_true",
        default=env("EXTENDER_LEADER_ELECT", "") == "true",
        help="run as one of several replicas: the holder of a Lease decides, the others keep a warm cache and "
        "answer every verb with an Error until they take the Lease (docs/operations/high-availability.md)",
    )
    serve.add_argument(
        "--leader-elect-lease",
        metavar="NAMESPACE/NAME",
        default=env("EXTENDER_LEADER_ELECT_LEASE", f"{env('POD_NAMESPACE', 'placement-system')}/placement-extender"),
        help="the Lease the replicas share (default: POD_NAMESPACE/placement-extender)",
    )
    serve.add_argument(
        "--leader-elect-timing",
        metavar="DURATION,DEADLINE,RETRY",
        default=env("EXTENDER_LEADER_ELECT_TIMING", "10,7,2"),
        help="seconds: the Lease's duration, the holder's renew deadline, the retry period (default 10,7,2: a "
        "killed holder is replaced within 12 s, one ended gracefully within 2 s)",
    )
    serve.add_argument(
        "--active-service",
        metavar="NAME",
        default=env("EXTENDER_ACTIVE_SERVICE"),
        help="with --leader-elect: the Service (no selector, in the Lease's namespace) whose one endpoint the "
        "active replica makes itself, so kube-scheduler's calls reach it and not a standby; needs the pod's "
        "POD_NAME and POD_IP in the environment (the downward API)",
    )
