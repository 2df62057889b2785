"""Where a group's pods landed, read from the API server (for the demo)."""

from __future__ import annotations

from ..ops.table import zone_table
from .api import Api

ZONE = "topology.kubernetes.io/zone"


def placements(api: Api, namespace: str, selector: str) -> dict[str, str | None]:
    """pod name -> node name (None while Pending)."""
    pods = api.list(f"/api/v1/namespaces/{namespace}/pods", labelSelector=selector)
    return {p["metadata"]["name"]: p["spec"].get("nodeName") for p in pods}


def node_zones(api: Api) -> dict[str, str]:
    return {
        n["metadata"]["name"]: (n["metadata"].get("labels") or {}).get(ZONE, "(no zone)")
        for n in api.list("/api/v1/nodes")
    }


__all__ = ["node_zones", "placements", "zone_table"]
