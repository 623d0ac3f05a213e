"""Kafka in memory: topics and a producer, for running the worker's own
:class:`~eddy.runtime.task.Task` without a broker (the test driver, ``eddy.testing``).

Kafka Streams' ``TopologyTestDriver`` runs the real ``StreamTask`` with a mock
producer; this module is that producer. It implements exactly the part of
aiokafka's ``AIOKafkaProducer`` that :class:`~eddy.runtime.task.Task` uses:
``send`` (a future resolved with the record's metadata), ``create_batch`` and
``send_batch`` (the changelog), transactions (``begin_transaction``,
``send_offsets_to_transaction``, ``commit_transaction``, ``abort_transaction``)
and ``partitions_for``.

It keeps Kafka's rules where a test could notice them: offsets are assigned at
send time; a ``read_committed`` reader sees a transaction's records when it
commits, never an aborted one, and stops at the first record of a transaction
still open (the last stable offset); every commit or abort writes one control
record per partition it touched, which takes an offset as on a broker, so the
offsets a dead letter names (``eddy.source.offset``) are the broker's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiokafka import TopicPartition
from aiokafka.partitioner import DefaultPartitioner
from aiokafka.structs import RecordMetadata

Headers = tuple[tuple[str, bytes], ...]
# aiokafka's CreateTime: the timestamp is the producer's (or the record's own).
CREATE_TIME = 0
# How many records one changelog batch holds; aiokafka's is by bytes (batch_size).
BATCH_RECORDS = 1_000


@dataclass(slots=True)  # not frozen: frozen dataclasses are slow to build
class MemoryRecord:
    """A record in a topic, as a consumer gets it (it is an ``InputRecord``).

    Attributes:
        stamped: the producer gave no timestamp, so ``timestamp`` is its clock's.
    """

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()
    stamped: bool = False


@dataclass(slots=True)
class _Entry:
    """One offset of a partition's log: a record, or a transaction's control record."""

    record: MemoryRecord | None
    state: str  # "open", "committed" or "aborted"


class _Log:
    """One partition's log from ``base`` on (what every reader has committed
    before ``base`` is dropped, so a long run holds what is unread, not all)."""

    __slots__ = ("base", "entries")

    def __init__(self) -> None:
        self.base = 0
        self.entries: list[_Entry] = []

    @property
    def end(self) -> int:
        return self.base + len(self.entries)


class MemoryBroker:
    """Every topic's partitions, in memory.

    Args:
        clock_ms: the time a producer stamps on records sent without one (a
            worker's is the wall clock; the test driver's is its processing time).
        partitions: partitions per topic (default 1: the driver runs partition 0).

    Attributes:
        kept: the topics whose records are kept for readers (None: all). Records
            of other topics (outputs, changelogs) take their offsets, are reported
            to :attr:`on_visible`, and are not stored.
    """

    def __init__(self, clock_ms: Callable[[], int], partitions: int = 1) -> None:
        self._clock_ms = clock_ms
        self._partitions = partitions
        self._logs: dict[TopicPartition, _Log] = {}
        self.kept: set[str] | None = None
        # Called with each batch of records as it becomes visible (read_committed).
        self.on_visible: Callable[[list[MemoryRecord]], None] = lambda _records: None

    def partitions_for(self, topic: str) -> set[int]:
        return set(range(self._partitions))

    def append(
        self,
        topic: str,
        value: bytes | None,
        *,
        key: bytes | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Iterable[tuple[str, bytes]] = (),
        state: str = "committed",
    ) -> tuple[MemoryRecord, _Entry]:
        """Write one record; non-transactional writes (``state`` committed) are
        visible at once, but not reported to :attr:`on_visible`: they are inputs."""
        partition = self._partition(topic, key, partition)
        log = self._log(TopicPartition(topic, partition))
        stamped = timestamp_ms is None
        timestamp = self._clock_ms() if timestamp_ms is None else timestamp_ms
        record = MemoryRecord(
            topic, partition, log.end, timestamp, key, value, tuple(headers), stamped
        )
        entry = _Entry(record, state)
        self._add(topic, log, entry)
        return record, entry

    def control(self, tp: TopicPartition) -> None:
        """A transaction marker: it takes an offset, and no reader sees it."""
        self._add(tp.topic, self._log(tp), _Entry(None, "committed"))

    def read(self, topic: str, partition: int, from_offset: int) -> list[MemoryRecord]:
        """What a ``read_committed`` consumer reads from ``from_offset``: committed
        records up to the first one of a transaction still open."""
        log = self._logs.get(TopicPartition(topic, partition))
        if log is None:
            return []
        found = []
        for entry in log.entries[max(0, from_offset - log.base) :]:
            if entry.state == "open":
                break
            if entry.state == "committed" and entry.record is not None:
                found.append(entry.record)
        return found

    def trim(self, topic: str, partition: int, offset: int) -> None:
        """Every reader of the partition has committed ``offset``: drop what is before."""
        log = self._logs.get(TopicPartition(topic, partition))
        if log is not None and offset > log.base:
            del log.entries[: offset - log.base]
            log.base = offset

    def end_offset(self, topic: str, partition: int) -> int:
        return self._log(TopicPartition(topic, partition)).end

    def _log(self, tp: TopicPartition) -> _Log:
        log = self._logs.get(tp)
        if log is None:
            log = self._logs[tp] = _Log()
        return log

    def _add(self, topic: str, log: _Log, entry: _Entry) -> None:
        if self.kept is None or topic in self.kept:
            log.entries.append(entry)
        else:
            log.base += 1

    def _partition(self, topic: str, key: bytes | None, partition: int | None) -> int:
        count = self._partitions
        if partition is not None:
            if not 0 <= partition < count:
                raise ValueError(f"{topic} has {count} partitions; there is no {partition}")
            return partition
        if count == 1:
            return 0
        everything = list(range(count))
        return int(DefaultPartitioner()(key, everything, everything))


@dataclass
class MemoryBatch:
    """aiokafka's ``BatchBuilder``, as the changelog uses it."""

    records: list[tuple[bytes | None, bytes | None, int | None]] = field(default_factory=list)
    closed: bool = False

    def append(self, *, key: bytes | None, value: bytes | None, timestamp: int | None) -> Any:
        """None once the batch is full (the caller starts another), as aiokafka."""
        if self.closed or len(self.records) >= BATCH_RECORDS:
            return None
        self.records.append((key, value, timestamp))
        return len(self.records)

    def record_count(self) -> int:
        return len(self.records)

    def close(self) -> None:
        self.closed = True


class MemoryProducer:
    """The part of ``AIOKafkaProducer`` a task uses, writing to a :class:`MemoryBroker`.

    Args:
        transactional: whether it is a transactional producer (exactly-once): its
            records are seen by readers when its transaction commits.
    """

    def __init__(self, broker: MemoryBroker, *, transactional: bool) -> None:
        self._broker = broker
        self._transactional = transactional
        self._in_transaction = False
        self._open: list[_Entry] = []
        self.committed_offsets: dict[TopicPartition, int] = {}

    def partitions_for(self, topic: str) -> set[int]:
        return self._broker.partitions_for(topic)

    async def send(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Sequence[tuple[str, bytes]] | None = None,
    ) -> asyncio.Future[RecordMetadata]:
        record = self._append(topic, value, key, partition, timestamp_ms, headers or ())
        return self._resolved(record)

    def create_batch(self) -> MemoryBatch:
        return MemoryBatch()

    async def send_batch(
        self, batch: MemoryBatch, topic: str, *, partition: int
    ) -> asyncio.Future[RecordMetadata]:
        """The batch's records in order; the future holds the first one's metadata."""
        appended = [self._append(topic, v, k, partition, t, ()) for k, v, t in batch.records]
        return self._resolved(appended[0])

    async def begin_transaction(self) -> None:
        if not self._transactional or self._in_transaction:
            raise RuntimeError("begin_transaction: not a transactional producer, or one is open")
        self._in_transaction = True

    async def send_offsets_to_transaction(
        self, offsets: dict[TopicPartition, int], group_id: str
    ) -> None:
        self._require_transaction()
        self.committed_offsets.update(offsets)

    async def commit_transaction(self) -> None:
        self._end("committed")

    async def abort_transaction(self) -> None:
        self._end("aborted")

    async def stop(self) -> None:
        """Nothing to release; an open transaction is aborted, as a broker would."""
        if self._in_transaction:
            self._end("aborted")

    def _append(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None,
        partition: int | None,
        timestamp_ms: int | None,
        headers: Iterable[tuple[str, bytes]],
    ) -> MemoryRecord:
        if self._transactional:
            self._require_transaction()
        state = "open" if self._transactional else "committed"
        record, entry = self._broker.append(
            topic,
            value,
            key=key,
            partition=partition,
            timestamp_ms=timestamp_ms,
            headers=headers,
            state=state,
        )
        if self._transactional:
            self._open.append(entry)
        else:
            self._broker.on_visible([record])
        return record

    def _end(self, state: str) -> None:
        self._require_transaction()
        touched = []
        for entry in self._open:
            entry.state = state
            assert entry.record is not None
            tp = TopicPartition(entry.record.topic, entry.record.partition)
            if tp not in touched:
                touched.append(tp)
        for tp in touched:
            self._broker.control(tp)
        if state == "committed":
            self._broker.on_visible([e.record for e in self._open if e.record is not None])
        self._open = []
        self._in_transaction = False

    def _require_transaction(self) -> None:
        if not self._in_transaction:
            raise RuntimeError("no transaction is open")

    @staticmethod
    def _resolved(record: MemoryRecord) -> asyncio.Future[RecordMetadata]:
        future: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()
        tp = TopicPartition(record.topic, record.partition)
        future.set_result(
            RecordMetadata(
                record.topic, record.partition, tp, record.offset, record.timestamp, CREATE_TIME, 0
            )
        )
        return future
