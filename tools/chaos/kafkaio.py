"""Kafka I/O of the harness: the paced input feeder, readers, group lag, markers.

Readers read each partition up to the end offset their isolation level reports
(the last stable offset for ``read_committed``), never "until it goes quiet", so a
verification reads a definite snapshot and cannot stop early on a slow broker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError

from eddy.topics import admin_client
from tools.chaos.errors import ChaosError
from tools.chaos.verify import Rec
from tools.chaos.workload import Message

log = logging.getLogger(__name__)


def _consumer(bootstrap: str, committed: bool) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        isolation_level="read_committed" if committed else "read_uncommitted",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        max_partition_fetch_bytes=4 * 1024 * 1024,
        request_timeout_ms=30_000,
    )


def partitions_of(topics: Iterable[str], partitions: int) -> list[TopicPartition]:
    return [TopicPartition(t, p) for t in topics for p in range(partitions)]


async def read_topics(
    bootstrap: str,
    topics: Sequence[str],
    partitions: int,
    *,
    committed: bool = True,
    timeout_s: float = 180.0,
) -> dict[str, list[Rec]]:
    """Every record of ``topics`` from the beginning up to the current end offsets.

    Raises:
        ChaosError: the end was not reached within ``timeout_s``.
    """
    consumer = _consumer(bootstrap, committed)
    await consumer.start()
    try:
        tps = partitions_of(topics, partitions)
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        end = await consumer.end_offsets(tps)
        out: dict[str, list[Rec]] = {t: [] for t in topics}
        pending = {tp for tp in tps if end[tp] > 0}
        deadline = time.monotonic() + timeout_s
        while pending:
            if time.monotonic() > deadline:
                raise ChaosError(
                    f"reading {sorted(str(tp) for tp in pending)[:3]}... did not reach the end "
                    f"offsets within {timeout_s:.0f} s"
                )
            batch = await consumer.getmany(*pending, timeout_ms=500, max_records=20_000)
            for tp, records in batch.items():
                out[tp.topic].extend(
                    Rec(r.partition, r.offset, r.key, r.value, tuple(r.headers)) for r in records
                )
            for tp in list(pending):
                if await consumer.position(tp) >= end[tp]:
                    pending.discard(tp)
        return out
    finally:
        await consumer.stop()


async def end_offsets(bootstrap: str, topics: Sequence[str], partitions: int) -> dict[str, int]:
    """Sum of the (uncommitted) end offsets per topic."""
    consumer = _consumer(bootstrap, committed=False)
    await consumer.start()
    try:
        ends = await consumer.end_offsets(partitions_of(topics, partitions))
        totals = dict.fromkeys(topics, 0)
        for tp, offset in ends.items():
            totals[tp.topic] += offset
        return totals
    finally:
        await consumer.stop()


class GroupLag:
    """Each stage's consumer group: committed input offsets and how far behind the
    end of its inputs they are.

    An input another stage writes in transactions (the repartition topic) ends
    with a commit marker that no consumer ever commits past, so there "behind" is
    the number of records a ``read_committed`` reader finds after the committed
    offset, plus whatever an open transaction still holds.
    """

    def __init__(
        self,
        bootstrap: str,
        groups: Mapping[str, Sequence[str]],
        partitions: int,
        transactional: Iterable[str] = (),
    ) -> None:
        self._bootstrap = bootstrap
        self._groups = groups  # group id -> input topics
        self._partitions = partitions
        self._transactional = set(transactional)

    async def positions(self) -> dict[str, tuple[int, int]] | None:
        """Per group: (committed records, records behind), or None if Kafka is away."""
        from eddy.settings import load_settings

        settings = load_settings(bootstrap_servers=self._bootstrap, worker_id="chaos")
        admin = admin_client(settings)
        consumer = _consumer(self._bootstrap, committed=False)
        committed_reader = _consumer(self._bootstrap, committed=True)
        try:
            await admin.start()
            await consumer.start()
            if self._transactional:
                await committed_reader.start()
            out = {}
            for group, topics in self._groups.items():
                tps = partitions_of(topics, self._partitions)
                ends = await consumer.end_offsets(tps)
                offsets = await admin.list_consumer_group_offsets(group, partitions=tps)
                done = behind = 0
                for tp in tps:
                    meta = offsets.get(tp)
                    at = meta.offset if meta is not None and meta.offset >= 0 else 0
                    done += at
                    if tp.topic in self._transactional and at < ends[tp]:
                        behind += await _records_after(committed_reader, tp, at, ends[tp])
                    else:
                        behind += ends[tp] - at
                out[group] = (done, behind)
            return out
        except (KafkaError, OSError, TimeoutError) as exc:
            log.debug("group offsets unavailable: %r", exc)
            return None
        finally:
            for client in (consumer, committed_reader):
                with contextlib.suppress(Exception):
                    await client.stop()
            with contextlib.suppress(Exception):
                await admin.close()


async def _records_after(reader: AIOKafkaConsumer, tp: TopicPartition, at: int, end: int) -> int:
    """Records ``read_committed`` finds in ``tp`` from offset ``at``, plus the records
    of a transaction still open (between the last stable offset and ``end``)."""
    stable = int((await reader.end_offsets([tp]))[tp])
    reader.assign([tp])
    reader.seek(tp, at)
    found = 0
    empty_polls = 0
    # A lone commit marker yields no record and does not move the position: stop
    # after two empty polls rather than wait for the position to pass it.
    while await reader.position(tp) < stable and empty_polls < 2:
        batch = await reader.getmany(tp, timeout_ms=200, max_records=10_000)
        records = sum(len(r) for r in batch.values())
        found += records
        empty_polls = 0 if records else empty_polls + 1
    return found + (end - stable)


async def check_markers(
    bootstrap: str, topics: Sequence[str], partitions: int, tag: str, timeout_s: float = 60.0
) -> tuple[list[str], float]:
    """Commit a marker to every partition of ``topics`` in a fresh transaction and wait
    until a ``read_committed`` reader reaches each one. A partition whose marker stays
    invisible has a transaction left open before it (its last stable offset is stuck).

    Returns:
        The partitions whose marker never became visible, and the seconds it took.
    """
    started = time.monotonic()
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, transactional_id=f"chaos-marker-{tag}", acks="all"
    )
    await producer.start()
    try:
        async with producer.transaction():
            futures = [
                await producer.send(t.topic, b"chaos-marker", key=b"chaos", partition=t.partition)
                for t in partitions_of(topics, partitions)
            ]
        offsets = {
            TopicPartition(m.topic, m.partition): m.offset for m in await asyncio.gather(*futures)
        }
    finally:
        await producer.stop()
    consumer = _consumer(bootstrap, committed=True)
    await consumer.start()
    try:
        consumer.assign(list(offsets))
        for tp, offset in offsets.items():
            consumer.seek(tp, offset)
        pending = set(offsets)
        while pending and time.monotonic() - started < timeout_s:
            batch = await consumer.getmany(*pending, timeout_ms=500)
            for tp, records in batch.items():
                if any(r.offset >= offsets[tp] for r in records):
                    pending.discard(tp)
        stuck = [f"{tp.topic}[{tp.partition}] marker @{offsets[tp]}" for tp in sorted(pending)]
        return stuck, time.monotonic() - started
    finally:
        await consumer.stop()


async def delete_topics(bootstrap: str, names: Sequence[str]) -> None:
    from eddy.settings import load_settings

    admin = admin_client(load_settings(bootstrap_servers=bootstrap, worker_id="chaos"))
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        doomed = [n for n in names if n in existing]
        if doomed:
            await admin.delete_topics(doomed)
    finally:
        await admin.close()


class Feeder:
    """Produces the input at a steady pace with an idempotent producer.

    ``limit`` gates progress: the fault injector lets the feeder run only up to the
    next fault's point until the current fault is done, so every fault lands with
    records still flowing and the input never outruns the schedule. ``running``
    pauses it altogether (while the broker is down).
    """

    def __init__(
        self,
        bootstrap: str,
        topics: dict[str, str],
        messages: Sequence[Message],
        rate_per_s: float,
        on_progress: Callable[[int], None] = lambda _: None,
    ) -> None:
        self._bootstrap = bootstrap
        self._topics = topics
        self._messages = messages
        self._rate = rate_per_s
        self._on_progress = on_progress
        self.acked = 0
        self.failed_sends = 0
        self.limit = len(messages)
        self.running = asyncio.Event()
        self.running.set()
        self._changed = asyncio.Event()
        self._advanced = asyncio.Event()
        self.sent_at: dict[int, float] = {}

    @property
    def total(self) -> int:
        return len(self._messages)

    async def wait_acked(self, count: int) -> None:
        """Return once ``count`` records are acknowledged (or all of them)."""
        while self.acked < min(count, self.total):
            self._advanced.clear()
            await self._advanced.wait()

    def set_limit(self, limit: int) -> None:
        self.limit = min(self.total, limit)
        self._changed.set()

    async def run(self) -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=self._bootstrap,
            enable_idempotence=True,
            acks="all",
            linger_ms=5,
            request_timeout_ms=60_000,
        )
        await producer.start()
        tick_s = 0.05
        chunk = max(1, round(self._rate * tick_s))
        try:
            next_tick = time.monotonic()
            while self.acked < self.total:
                if self.acked >= self.limit or not self.running.is_set():
                    self._changed.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._changed.wait(), 0.2)
                    next_tick = time.monotonic()
                    continue
                end = min(self.acked + chunk, self.limit)
                await self._send(producer, range(self.acked, end))
                self.acked = end
                self._advanced.set()
                self._on_progress(self.acked)
                next_tick += tick_s
                await asyncio.sleep(max(0.0, next_tick - time.monotonic()))
                next_tick = max(next_tick, time.monotonic() - tick_s)
        finally:
            await producer.stop()

    async def _send(self, producer: AIOKafkaProducer, indexes: Iterable[int]) -> None:
        todo = list(indexes)
        while todo:
            futures = []
            for i in todo:
                m = self._messages[i]
                self.sent_at[i] = time.monotonic()
                topic = self._topics[m.stream]
                futures.append(
                    await producer.send(topic, m.value, key=m.key, headers=list(m.headers) or None)
                )
            results = await asyncio.gather(*futures, return_exceptions=True)
            failed = [i for i, r in zip(todo, results, strict=True) if isinstance(r, Exception)]
            if failed:
                # Re-sent by the application: may duplicate; the ledger check says so.
                self.failed_sends += len(failed)
                log.warning("%d input sends failed (%r); re-sending", len(failed), results[0])
                await asyncio.sleep(1.0)
            todo = failed


class LiveReader:
    """A ``read_committed`` reader of ``topic`` that runs through every fault."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self._consumer = _consumer(bootstrap, committed=True)
        self._tps = partitions_of([topic], partitions)
        self.seen: list[tuple[int, int]] = []
        self.values: list[tuple[float, bytes | None]] = []  # (seen at, value)
        self.keep_values = False
        self.errors = 0

    async def run(self, stop: asyncio.Event) -> None:
        await self._consumer.start()
        try:
            self._consumer.assign(self._tps)
            await self._consumer.seek_to_beginning(*self._tps)
            while not stop.is_set():
                try:
                    batch = await self._consumer.getmany(timeout_ms=200, max_records=20_000)
                except KafkaError as exc:
                    self.errors += 1
                    log.warning("live reader: %r", exc)
                    await asyncio.sleep(0.5)
                    continue
                now = time.monotonic()
                for records in batch.values():
                    self.seen.extend((r.partition, r.offset) for r in records)
                    if self.keep_values:
                        self.values.extend((now, r.value) for r in records)
        finally:
            await self._consumer.stop()

    async def caught_up(self) -> bool:
        ends = await self._consumer.end_offsets(self._tps)
        positions = [await self._consumer.position(tp) for tp in self._tps]
        return all(p >= ends[tp] for p, tp in zip(positions, self._tps, strict=True))
