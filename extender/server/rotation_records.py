"""The first decision for a StatefulSet under ordinal zones decides its rotation: kept in the
store at once (the next decision reads it) and recorded in the cluster, so no restart, zone
outage or adoption decides it again (extender/api/rotation.py)."""

from __future__ import annotations

import logging

from ..engine import ZoneOrder
from ..state.objects import PodRecord, RotationRecord
from ..state.store import ClusterStore
from .ports import RecordWriter

log = logging.getLogger(__name__)


class RotationRecorder:
    def __init__(self, store: ClusterStore, records: RecordWriter | None) -> None:
        self.store = store
        self.records = records  # None: rotations are decided and kept in this process only

    def record(self, pod: PodRecord, order: ZoneOrder | None) -> None:
        """Remember (and write) the order a decision derived for the pod's set, if it is new.
        Called under the store lock."""
        if order is None or not order.derived or not order.order or pod.shard is None:
            return
        sts = self.store.statefulsets.get((pod.namespace, pod.shard))
        if sts is None or not self.store.rotations_enabled:
            return
        record = RotationRecord(pod.namespace, sts.name, sts.name, order.order, dict(order.adopted))
        if self.store.remember_rotation(record):
            log.info("decided the zone rotation of StatefulSet %s/%s: %s", pod.namespace, sts.name, order.how)
            if self.records is not None:
                self.records.zone_rotation(record)
