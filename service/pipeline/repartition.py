"""Re-keying through a repartition topic, with watermarks carried across.

A :class:`Repartition` stage reads its input, turns each record into zero or
more keyed elements (its source's steps and ``key_by``) and writes them, keyed
by their new key, to a repartition topic that the next stage reads. Because a
downstream task now receives records from every upstream task, each upstream
task also writes its watermark into every partition of the repartition topic as
a control record (an empty value with ``eddy.watermark`` headers), inside the
same transaction as its data. A downstream stage whose watermark strategy is
:class:`eddy.eventtime.watermarks.FromUpstream` takes the minimum over the
upstream tasks (minus idle ones), as Flink does across a shuffle.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from eddy.eventtime.watermarks import MIN_WATERMARK, WatermarkStrategy, WatermarkTracker
from eddy.pipeline.base import InputRecord, Output, Target
from eddy.pipeline.keyed import META
from eddy.pipeline.markers import UPSTREAM, UPSTREAMS, WATERMARK, marker_of
from eddy.pipeline.source import Source
from eddy.tables.schema import StateSchema
from eddy.tables.store import PartitionStore, PartitionTransaction


@dataclass(frozen=True)
class Repartition:
    name: str
    source: Source
    target: Target
    watermark: WatermarkStrategy
    marker_every_ms: int = 200

    @property
    def state_schemas(self) -> Mapping[str, StateSchema]:
        return {META.name: StateSchema()}  # the watermark

    @property
    def sources(self) -> Sequence[str]:
        return (self.source.topic,)

    @property
    def output_topics(self) -> Sequence[str]:
        return (self.target.topic,)

    def create_logic(
        self, partition: int, store: PartitionStore, txn: PartitionTransaction
    ) -> RepartitionLogic:
        return RepartitionLogic(self, partition, store, txn)


class RepartitionLogic:
    def __init__(
        self,
        definition: Repartition,
        partition: int,
        store: PartitionStore,
        txn: PartitionTransaction,
    ) -> None:
        self._d = definition
        self._partition = partition
        self._store = store
        self._txn = txn
        self._tracker = WatermarkTracker(definition.watermark, definition.sources)
        self._sent_ms = MIN_WATERMARK
        self._sent_at = 0
        self._active = False
        self._now_ms = 0
        self._saved: dict[str, Any] | None = None
        self.reload()

    @property
    def watermark_ms(self) -> int:
        return self._tracker.watermark_ms

    def reload(self) -> None:
        self._tracker = WatermarkTracker(self._d.watermark, self._d.sources)
        self._saved = self._store.get(META, "repartition")
        if self._saved is not None:
            self._tracker.restore(self._saved)
        self._sent_ms = MIN_WATERMARK

    def process(self, record: InputRecord, out: Output) -> None:
        marker = marker_of(record)
        if marker is not None:  # a chain of repartitions: the clock follows upstream
            self._tracker.on_marker(*marker, self._now_ms)
            return
        read = self._d.source.read(record, out)
        if read is None:
            return
        target = self._d.target
        for key, value in read.elements:
            for data in target.write(value):
                out.send(target.topic, key.encode(), data, (), read.timestamp_ms)
        self._tracker.on_event(record.topic, read.timestamp_ms, read.value, self._now_ms)
        self._active = True

    def advance_watermark(self, watermark_ms: int, out: Output) -> None:
        """An explicit watermark goes downstream as this task's own."""
        self._send_markers(watermark_ms, out)

    def send_watermark(self, out: Output) -> None:
        """Send the watermark downstream now if it moved (the test driver does,
        after every record; a worker sends it every ``marker_every_ms``)."""
        watermark_ms = self._tracker.watermark_ms
        if watermark_ms != MIN_WATERMARK and watermark_ms > self._sent_ms:
            self._send_markers(watermark_ms, out)
            self._sent_ms, self._active = watermark_ms, False

    def on_tick(self, now_ms: int, out: Output) -> None:
        """Send this task's watermark downstream when it moved, and as a heartbeat
        while records flow (so a busy task is never mistaken for an idle one)."""
        self._now_ms = now_ms
        self._tracker.on_tick(now_ms)
        watermark_ms = self._tracker.watermark_ms
        due = now_ms - self._sent_at >= self._d.marker_every_ms
        if watermark_ms == MIN_WATERMARK or not due:
            return
        if watermark_ms > self._sent_ms or self._active:
            self._send_markers(watermark_ms, out)
            self._sent_ms, self._sent_at, self._active = watermark_ms, now_ms, False

    def prepare_commit(self) -> None:
        snapshot = self._tracker.snapshot()
        if snapshot != self._saved:
            self._txn.put(META, "repartition", snapshot)
            self._saved = snapshot

    def _send_markers(self, watermark_ms: int, out: Output) -> None:
        upstreams = out.partitions_of(self._d.source.topic)
        headers = (
            (WATERMARK, str(watermark_ms).encode()),
            (UPSTREAM, str(self._partition).encode()),
            (UPSTREAMS, str(upstreams).encode()),
        )
        for partition in range(out.partitions_of(self._d.target.topic)):
            out.send(self._d.target.topic, None, b"", headers, None, partition)
