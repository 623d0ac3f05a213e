"""Standby replicas: warm copies of partitions another worker owns.

A standby tails the partition's changelog (committed records only) into a local
store. When the group moves the partition here, opening it restores only the
few records the standby had not applied yet, so failover takes a moment, not a
full restore.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from aiokafka import AIOKafkaConsumer, TopicPartition

from eddy.metrics import Metrics
from eddy.runtime.restore import changelog_reader, check_local
from eddy.runtime.stores import LocalStores
from eddy.settings import Settings

log = logging.getLogger(__name__)


class StandbyReplicas:
    def __init__(
        self,
        settings: Settings,
        pipeline: str,
        changelog: str,
        stores: LocalStores,
        metrics: Metrics,
    ) -> None:
        self._settings = settings
        self._pipeline = pipeline
        self._changelog = changelog
        self._stores = stores
        self._metrics = metrics
        self._consumer: AIOKafkaConsumer | None = None
        self.partitions: frozenset[int] = frozenset()

    async def start(self) -> None:
        self._consumer = changelog_reader(self._settings, "standby")
        await self._consumer.start()

    async def stop(self) -> None:
        if self._consumer is not None:
            await self._consumer.stop()

    async def update(self, partitions: Iterable[int]) -> None:
        """Tail exactly ``partitions`` from now on (call with the runtime's lock held)."""
        consumer = self._require()
        wanted = frozenset(partitions)
        tps = [TopicPartition(self._changelog, p) for p in sorted(wanted)]
        consumer.assign(tps)
        for partition, tp in zip(sorted(wanted), tps, strict=True):
            start, _ = await check_local(consumer, self._stores, partition, tp)
            consumer.seek(tp, start)
        self.partitions = wanted
        self._metrics.standby_partitions.labels(self._pipeline).set(len(wanted))
        if wanted:
            log.info("%s: standby for partitions %s", self._pipeline, sorted(wanted))

    async def poll(self) -> int:
        """Apply whatever changelog records have arrived; never waits."""
        if not self.partitions:
            return 0
        batch = await self._require().getmany(timeout_ms=0, max_records=10_000)
        applied = 0
        for tp, records in batch.items():
            if tp.partition in self.partitions and records:
                store = self._stores.open(tp.partition)
                store.write(((r.key, r.value) for r in records), records[-1].offset)
                applied += len(records)
        if applied:
            self._metrics.standby_records.labels(self._pipeline).inc(applied)
        return applied

    def _require(self) -> AIOKafkaConsumer:
        if self._consumer is None:
            raise RuntimeError("standby replicas are not started")
        return self._consumer
