"""The one way the operator commands read a live cluster: the extender's own watch cache, listed
once (state/watcher.list_once), so a command sees exactly what the extender would decide from."""

from __future__ import annotations

from ..kube.client import KubeApiError, connect
from ..state.store import ClusterStore
from ..state.watcher import list_once
from .audit import GATE_ADMISSION_NAME, GateAdmission


def live_store(kubeconfig: str | None, context: str | None = None) -> ClusterStore:
    return list_once(connect(kubeconfig, context))


ADMISSION = "/apis/admissionregistration.k8s.io/v1"


def live_gate_admission(kubeconfig: str | None, context: str | None = None) -> GateAdmission:
    """Whether the placeable gate's MutatingAdmissionPolicy and its binding exist (404: not
    installed, or not served before Kubernetes 1.36; 403: the caller may not read them)."""
    api = connect(kubeconfig, context)
    try:
        for kind in ("mutatingadmissionpolicies", "mutatingadmissionpolicybindings"):
            api.call("GET", f"{ADMISSION}/{kind}/{GATE_ADMISSION_NAME}")
    except KubeApiError as err:
        if err.status == 404:
            return GateAdmission.ABSENT
        if err.status in (401, 403):
            return GateAdmission.UNKNOWN
        raise
    return GateAdmission.INSTALLED
