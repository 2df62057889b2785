"""The one way the operator commands read a live cluster: the extender's own watch cache, listed
once (state/watcher.list_once), so a command sees exactly what the extender would decide from."""

from __future__ import annotations

from ..kube.client import connect
from ..state.store import ClusterStore
from ..state.watcher import list_once


def live_store(kubeconfig: str | None, context: str | None = None) -> ClusterStore:
    return list_once(connect(kubeconfig, context))
