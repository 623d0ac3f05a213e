"""Metrics read from the runtime's parts rather than counted as events: consumer
lag, state size, RocksDB reads and writes. Refreshed after each commit."""

from __future__ import annotations

from collections.abc import Mapping

from aiokafka import AIOKafkaConsumer

from eddy.metrics import Metrics
from eddy.runtime.task import Task
from eddy.tables.store import PartitionStore


class StateGauges:
    def __init__(self, metrics: Metrics, pipeline: str) -> None:
        self._metrics = metrics
        self._pipeline = pipeline
        # Last seen counter values per store, to add only what is new.
        self._seen: dict[int, tuple[int, int]] = {}

    def refresh(
        self,
        consumer: AIOKafkaConsumer | None,
        tasks: Mapping[int, Task],
        stores: Mapping[int, PartitionStore],
    ) -> None:
        m, name = self._metrics, self._pipeline
        for partition, task in tasks.items():
            if consumer is not None:
                for tp, next_offset in task.next_offsets.items():
                    end = consumer.last_stable_offset(tp) or consumer.highwater(tp)
                    if end is not None:
                        lag = max(0, end - next_offset)
                        m.consumer_lag.labels(name, tp.topic, str(partition)).set(lag)
            store = stores.get(partition)
            if store is None:
                continue
            keys, live = store.size()
            m.state_keys.labels(name, str(partition)).set(keys)
            m.state_bytes.labels(name, str(partition)).set(live)
            reads, writes = self._seen.get(partition, (0, 0))
            if store.reads < reads or store.writes < writes:
                reads, writes = 0, 0  # the store was reopened: its counters restarted
            m.state_reads.labels(name).inc(store.reads - reads)
            m.state_writes.labels(name).inc(store.writes - writes)
            self._seen[partition] = (store.reads, store.writes)
