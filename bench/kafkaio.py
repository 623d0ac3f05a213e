"""The harness's own Kafka I/O, with librdkafka (confluent-kafka): topics, group
progress, reading outputs back. Blocking calls; the harness is not on a hot path.

The harness polls committed offsets while a contender drains, so these calls are
cheap (one admin request each) and never join the contender's group.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence

from confluent_kafka import (  # type: ignore[import-untyped]
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[import-untyped]

from bench.errors import BenchError


class Kafka:
    """Admin and offsets for one bootstrap address."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self._offsets = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "bench-harness-offsets",
                "enable.auto.commit": False,
                "isolation.level": "read_uncommitted",
            }
        )

    def close(self) -> None:
        self._offsets.close()

    # -- topics ----------------------------------------------------------------------

    def topics(self) -> set[str]:
        return set(self.admin.list_topics(timeout=15).topics)

    def create(self, name: str, partitions: int, config: dict[str, str] | None = None) -> None:
        """Create ``name`` afresh (deleting an old one of the same name first)."""
        self.delete([name])
        futures = self.admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])
        for future in futures.values():
            future.result(30)
        self._wait(lambda: name in self.topics(), f"topic {name} to appear")

    def delete(self, names: Sequence[str]) -> None:
        doomed = sorted(set(names) & self.topics())
        if not doomed:
            return
        for future in self.admin.delete_topics(doomed, operation_timeout=30).values():
            try:
                future.result(60)
            except KafkaException as exc:
                if "UNKNOWN_TOPIC" not in str(exc):
                    raise
        self._wait(lambda: not set(doomed) & self.topics(), f"topics {doomed} to go")

    def delete_prefixed(self, *prefixes: str) -> list[str]:
        doomed = [t for t in self.topics() if t.startswith(prefixes)]
        self.delete(doomed)
        return doomed

    def delete_groups(self, groups: Sequence[str]) -> None:
        if not groups:
            return
        for future in self.admin.delete_consumer_groups(list(groups), request_timeout=30).values():
            # never created, or already gone
            with contextlib.suppress(KafkaException):
                future.result(30)

    def list_groups(self) -> list[str]:
        result = self.admin.list_consumer_groups(request_timeout=30).result(30)
        return [g.group_id for g in result.valid]

    @staticmethod
    def _wait(done: object, what: str, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if done():  # type: ignore[operator]
                return
            time.sleep(0.2)
        raise BenchError(f"timed out waiting for {what}")

    # -- offsets ---------------------------------------------------------------------

    def end_offsets(self, topic: str, partitions: int) -> dict[int, int]:
        out = {}
        for p in range(partitions):
            _low, high = self._offsets.get_watermark_offsets(TopicPartition(topic, p), timeout=15)
            out[p] = high
        return out

    def committed(self, group: str, topic: str, partitions: int) -> int:
        """Sum of the group's committed offsets on ``topic`` (0 where none)."""
        request = ConsumerGroupTopicPartitions(
            group, [TopicPartition(topic, p) for p in range(partitions)]
        )
        result = self.admin.list_consumer_group_offsets([request], request_timeout=10)
        tps = result[group].result(10).topic_partitions
        return sum(tp.offset for tp in tps if tp.offset >= 0 and tp.error is None)

    # -- reading ---------------------------------------------------------------------

    def read(
        self, topic: str, *, committed: bool = True, timeout_s: float = 300.0
    ) -> Iterator[tuple[int, bytes | None, bytes | None]]:
        """Every record of ``topic`` up to its current end (the last stable offset
        when ``committed``), as (partition, key, value)."""
        meta = self.admin.list_topics(topic, timeout=15).topics.get(topic)
        if meta is None or meta.error is not None:
            raise BenchError(f"topic {topic} does not exist")
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"bench-reader-{time.monotonic_ns()}",
                "enable.auto.commit": False,
                "isolation.level": "read_committed" if committed else "read_uncommitted",
                "auto.offset.reset": "earliest",
                "enable.partition.eof": True,
            }
        )
        try:
            tps = [TopicPartition(topic, p, 0) for p in meta.partitions]
            # read_committed: the end is the last stable offset, which the consumer
            # reports as the high watermark it may read to.
            ends = {}
            for tp in tps:
                _low, high = consumer.get_watermark_offsets(tp, timeout=15)
                ends[tp.partition] = high
            pending = {p for p, end in ends.items() if end > 0}
            consumer.assign(tps)
            deadline = time.monotonic() + timeout_s
            while pending:
                if time.monotonic() > deadline:
                    raise BenchError(f"reading {topic} did not reach its end in {timeout_s:.0f} s")
                for msg in consumer.consume(10_000, timeout=0.5):
                    err = msg.error()
                    p = msg.partition()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            pending.discard(p)  # the contender is stopped: the end is final
                            continue
                        raise BenchError(f"reading {topic}: {err}")
                    yield p, msg.key(), msg.value()
                    if msg.offset() + 1 >= ends[p]:
                        pending.discard(p)
        finally:
            consumer.close()
