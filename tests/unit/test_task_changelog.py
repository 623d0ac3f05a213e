"""A checkpoint sends its changelog in batches and records the offset of the last
changelog record, whatever the number of batches (no broker: a producer that
hands out offsets as the broker would)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aiokafka.producer.message_accumulator import BatchBuilder
from aiokafka.record.default_records import DefaultRecordBatch
from aiokafka.structs import RecordMetadata, TopicPartition

from eddy.metrics import Metrics
from eddy.runtime.output import TaskOutput
from eddy.runtime.task import Task
from eddy.tables.codecs import decode_json, decode_utf8, encode_json, encode_utf8
from eddy.tables.store import PartitionStore, PartitionTransaction, TableSpec

TABLE: TableSpec[str, Any] = TableSpec("state", encode_utf8, decode_utf8, encode_json, decode_json)


class BatchingProducer:
    """What a task's producer does with changelog batches: appends each batch's
    records to the partition's log and resolves its future with its first offset."""

    def __init__(self, batch_size: int) -> None:
        self.batch_size = batch_size
        self.log: list[tuple[bytes | None, bytes | None]] = [(None, b"earlier record")]
        self.batches = 0

    def create_batch(self) -> BatchBuilder:
        return BatchBuilder(self.batch_size, 0, is_transactional=False)

    async def send_batch(
        self, batch: BatchBuilder, topic: str, *, partition: int
    ) -> asyncio.Future[RecordMetadata]:
        first = len(self.log)
        records = DefaultRecordBatch(bytes(batch._build()))
        self.log += [(r.key, r.value) for r in records]
        self.batches += 1
        future: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()
        tp = TopicPartition(topic, partition)
        future.set_result(RecordMetadata(topic, partition, tp, first, -1, 0, 0))
        return future


class Writes:
    """A pipeline whose logic writes one key per record it is given."""

    name = "writes"
    sources: Sequence[str] = ("in",)
    output_topics: Sequence[str] = ()
    state_schemas: dict[str, Any] = {}

    def create_logic(self, partition: int, store: PartitionStore, txn: PartitionTransaction) -> Any:
        return _WritesLogic(txn)


class _WritesLogic:
    watermark_ms = 0

    def __init__(self, txn: PartitionTransaction) -> None:
        self.txn = txn

    def process(self, record: Any, out: Any) -> None:
        self.txn.put(TABLE, f"key-{record.offset}", {"offset": record.offset, "pad": "x" * 40})

    def prepare_commit(self) -> None:
        pass

    def reload(self) -> None:
        pass


class Record:
    def __init__(self, offset: int) -> None:
        self.topic, self.partition, self.offset = "in", 3, offset
        self.timestamp, self.key, self.value, self.headers = 0, None, b"{}", ()


async def test_a_checkpoint_of_many_records_goes_in_batches_and_keeps_the_last_offset(
    tmp_path: Path,
) -> None:
    store = PartitionStore(tmp_path / "p3")
    producer = BatchingProducer(batch_size=1_024)
    task = Task(
        pipeline=Writes(),  # type: ignore[arg-type]
        partition=3,
        store=store,
        producer=producer,  # type: ignore[arg-type]
        exactly_once=False,
        changelog_topic="app-writes-changelog",
        output=TaskOutput("writes", "dead-letters", Metrics()),
        offsets={TopicPartition("in", 3): 0},
    )
    await task.process(TopicPartition("in", 3), [Record(n) for n in range(200)])
    await task.prepare_commit()
    task.finish_commit()

    assert producer.batches > 1  # 200 records of ~70 B do not fit one 1 KB batch
    assert len(producer.log) == 201
    assert store.changelog_offset() == 200  # the last changelog record, not a batch's first
    sent = dict(producer.log[1:])
    assert sent == {
        TABLE.full_key(f"key-{n}"): encode_json(store.get(TABLE, f"key-{n}")) for n in range(200)
    }
    store.close()
