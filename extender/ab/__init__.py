"""`python -m extender ab`: one scenario under the native scheduler and under the extender."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .scenario import Scenario, load

__all__ = ["Scenario", "load", "run"]


def run(
    scenario: Scenario, *, repetitions: int | None = None, json_path: Path | None = None, png_path: Path | None = None
) -> dict[str, Any]:
    from ..devcluster.cluster import LocalCluster, zoned_nodes
    from . import report
    from .runner import Runner

    if repetitions is not None:
        scenario = scenario.model_copy(update={"repetitions": repetitions})
    most = max(
        [scenario.workload.shards * scenario.workload.replicas]
        + [
            (s.shards or scenario.workload.shards)
            * (s.replicas if s.replicas is not None else scenario.workload.replicas)
            for s in scenario.steps
            if s.action == "scale"
        ]
    )
    with LocalCluster() as cluster:
        nodes = zoned_nodes(scenario.nodes)
        for node in nodes:
            node.labels.update(scenario.zoneLabels.get(node.zone or "", {}))
        cluster.add_nodes(nodes)
        if scenario.workload.volumes:
            for zone in scenario.nodes:
                cluster.add_zonal_volumes(zone, most * scenario.repetitions * 2)
        result = Runner(cluster, scenario).run()
        result["kubernetes"] = cluster.admin.get("/version")["gitVersion"] if cluster.admin else "?"  # KUBE_VERSION
        node_zone = {n.name: n.zone or "-" for n in nodes}
    print()
    print(report.table(result))
    if json_path is not None:
        report.write_json(result, json_path)
        print(f"\nJSON: {json_path}")
    if png_path is not None:
        report.write_png(result, node_zone, png_path)
        print(f"PNG:  {png_path}")
    return result
