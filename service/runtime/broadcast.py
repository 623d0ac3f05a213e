"""A broadcast (control) input: every task of a pipeline reads every record.

One group-less consumer per runtime reads all partitions of the control topic.
Each task keeps its own position in its state (committed with its transaction),
so after a restore it re-reads exactly the control records its state has not
seen: the consumer is rewound to the oldest position any task needs, and tasks
skip what they already applied.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aiokafka import AIOKafkaConsumer, TopicPartition

from eddy.pipeline.base import InputRecord
from eddy.runtime.restore import changelog_reader
from eddy.settings import Settings


class BroadcastInput:
    def __init__(self, settings: Settings, topic: str) -> None:
        self.topic = topic
        self._settings = settings
        self._consumer: AIOKafkaConsumer | None = None
        self._tps: list[TopicPartition] = []

    async def start(self, partitions: int) -> None:
        self._consumer = changelog_reader(self._settings, "broadcast")
        await self._consumer.start()
        self._tps = [TopicPartition(self.topic, p) for p in range(partitions)]
        self._consumer.assign(self._tps)
        await self._consumer.seek_to_beginning(*self._tps)

    async def rewind(self, applied: Mapping[int, int]) -> None:
        """Make sure records a task has not applied yet will be read (again)."""
        consumer = self._require()
        for tp in self._tps:
            needed = applied.get(tp.partition, 0)
            if needed < await consumer.position(tp):
                consumer.seek(tp, needed)

    async def poll(self) -> dict[int, Sequence[InputRecord]]:
        """Whatever control records arrived; never waits."""
        batch = await self._require().getmany(timeout_ms=0, max_records=1_000)
        return {tp.partition: records for tp, records in batch.items() if records}

    async def stop(self) -> None:
        if self._consumer is not None:
            await self._consumer.stop()

    def _require(self) -> AIOKafkaConsumer:
        if self._consumer is None:
            raise RuntimeError("the broadcast input is not started")
        return self._consumer
