"""The operator commands' expected failures, each as one line saying what to do, and its exit code.

No expected condition prints a traceback: a missing kubeconfig, an API server that does not answer,
a 401/403/404, a file that cannot be read, a policy that is invalid, a wrong argument. Anything
else is a bug and keeps its traceback (it is worth reporting).
"""

from __future__ import annotations

import yaml

from ..api.policy import PolicyError
from ..kube.client import KubeApiError
from .exit_codes import ExitCode


class UsageError(ValueError):
    """The command line names something the command cannot take (exit 2, as argparse's own)."""


def explained(err: BaseException) -> tuple[ExitCode, str] | None:
    """(exit code, one line) for an expected failure; None for anything else."""
    import requests
    import urllib3
    from kubernetes.config import ConfigException

    if isinstance(err, ConfigException) or (isinstance(err, FileNotFoundError) and "kube" in str(err.filename)):
        return ExitCode.COULD_NOT_RUN, (
            f"no usable kubeconfig ({_short(err)}): set KUBECONFIG or pass --kubeconfig (after `make demo`, "
            "paste the export lines it printed), and --context NAME for another context"
        )
    if isinstance(err, KubeApiError):
        return ExitCode.COULD_NOT_RUN, _api_error(err)
    if isinstance(err, (requests.ConnectionError, requests.Timeout, urllib3.exceptions.HTTPError)):
        return ExitCode.COULD_NOT_RUN, (
            f"cannot reach the API server ({_short(err)}): is the cluster up and the kubeconfig's server "
            "right? (`kubectl cluster-info` checks both)"
        )
    if isinstance(err, PolicyError):
        return ExitCode.FINDING, str(err)
    if isinstance(err, yaml.YAMLError):
        return ExitCode.FINDING, f"not YAML or JSON: {_short(err)}"
    if isinstance(err, LookupError) and not isinstance(err, (KeyError, IndexError)):  # those are bugs
        return ExitCode.COULD_NOT_RUN, str(err).strip("'\"")
    if isinstance(err, (OSError, UnicodeDecodeError)):
        return ExitCode.COULD_NOT_RUN, f"cannot read {getattr(err, 'filename', None) or 'the input'}: {_short(err)}"
    if isinstance(err, ValueError):
        return ExitCode.USAGE, str(err)
    return None


def _api_error(err: KubeApiError) -> str:
    what = {
        401: "the API server did not accept the kubeconfig's credentials: refresh them (log in again)",
        403: "forbidden: the kubeconfig's identity may not read what the command needs (get/list on nodes, "
        "pods, PVCs, PVs, StatefulSets, PlacementPolicies, ZoneRotations; the auditor role in "
        "deploy/optional/audit/ grants exactly that; adopt and retire also update the workload)",
        404: "not found",
        409: "another writer changed the object on every attempt (409 Conflict); nothing was written, run the "
        "command again",
    }.get(err.status, f"the API server answered {err.status} {err.reason}")
    return f"{what}: {_short(err)}"


def _short(err: BaseException, limit: int = 300) -> str:
    text = " ".join(str(err).split())
    return text if len(text) <= limit else text[:limit] + "..."
