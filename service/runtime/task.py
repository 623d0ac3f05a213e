"""A task: one input partition of one pipeline, with its state and progress.

Checkpoint order (the consistent cut: docs/semantics.md, "Exactly-once", and
docs/architecture.md, "The checkpoint (a consistent cut)"):

1. the logic writes in-memory progress (watermarks) into the state transaction;
2. the state changes go to the changelog, through the same producer as outputs;
3. all sends are awaited; under exactly-once the input offsets join the
   transaction and it commits, so outputs, changelog and offsets land together;
4. only then is the local RocksDB batch written, with the changelog offset, so
   local state is never ahead of what Kafka committed.

If anything fails, the task is discarded and reopened from what Kafka committed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any, cast

from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.errors import IllegalOperation, KafkaError
from aiokafka.structs import RecordMetadata

from eddy.pipeline.base import (
    AsyncLogic,
    BoundedFiring,
    BroadcastLogic,
    InputRecord,
    Output,
    PartitionLogic,
    Pipeline,
)
from eddy.pipeline.source import prefetch_schemas
from eddy.runtime.inflight import IN_FLIGHT, NONE, SOURCE, InFlight, WhileRunning
from eddy.runtime.output import Pending, TaskOutput
from eddy.runtime.producers import raise_if_failed
from eddy.runtime.restarts import RecordFailedError, ReplayCarefully, RestartPolicy
from eddy.tables.store import ENCODE_ERRORS, PartitionStore, WatchedTransaction, shortened


class ExternalIOError(OSError):
    """Work in flight to an external system (lookup, database) failed at a checkpoint."""


class Task:
    # Longest wait for sends to be acknowledged: a producer whose background sender
    # died (fenced mid-transaction) never resolves its pending futures.
    send_timeout_s = 30.0

    def __init__(
        self,
        *,
        pipeline: Pipeline,
        partition: int,
        store: PartitionStore,
        producer: AIOKafkaProducer,
        exactly_once: bool,
        changelog_topic: str,
        output: TaskOutput,
        offsets: dict[TopicPartition, int],
        restarts: RestartPolicy | None = None,
        inflight: InFlight | None = None,
        suspect: tuple[TopicPartition, int] | None = None,
        careful_until: dict[TopicPartition, int] | None = None,
    ) -> None:
        """
        Args:
            inflight: where the record in flight is noted (service/runtime/inflight.py).
            suspect: a record that was in flight when the process died, not
                committed yet: forgotten once a checkpoint commits past it.
            careful_until: replay carefully (:class:`ReplayCarefully`) until these
                offsets commit.
        """
        self.pipeline = pipeline
        self.partition = partition
        self.store = store
        self.producer = producer
        self.exactly_once = exactly_once
        self.changelog_topic = changelog_topic
        self.output = output
        self.restarts = restarts
        self.careful = careful_until is not None
        self._careful_until = careful_until or {}
        self.txn = store.begin(watched=self.careful)
        output.careful = self.careful
        self._inflight = inflight if inflight is not None else InFlight(None)
        self._note = self._inflight.words
        self._suspect = suspect
        self._source_of = {topic: n for n, topic in enumerate(pipeline.sources)}
        self.logic: PartitionLogic = pipeline.create_logic(partition, store, self.txn)
        self._async = cast(AsyncLogic, self.logic) if hasattr(self.logic, "flush") else None
        self._firing = self.logic if isinstance(self.logic, BoundedFiring) else None
        self.committed_offsets = dict(offsets)
        self.next_offsets = dict(offsets)
        self._futures: list[asyncio.Future[RecordMetadata]] = []
        self._in_transaction = False
        self._prepared: list[tuple[bytes, bytes | None]] = []
        self._changelog_offset: int | None = None
        # Since the task opened (GET /jobs); records_out counts what was sent.
        self.records_in = 0
        self.records_out = 0

    @property
    def has_work(self) -> bool:
        return self.next_offsets != self.committed_offsets or bool(self._futures) or self.txn.dirty

    async def process(
        self, tp: TopicPartition, records: Sequence[InputRecord], deadline_s: float | None = None
    ) -> int:
        """Run the logic over ``records`` (offset order) and send what it emits.

        Stops early, after at least one record, once ``time.monotonic()`` reaches
        ``deadline_s``: the runtime commits then and hands over the rest, so one
        transaction never spans a whole fetch of slow (async) records, which could
        outlast the transaction timeout. ``next_offsets[tp]`` says where it stopped.
        """
        # The batch's unknown schema ids, fetched off the event loop before decoding.
        await prefetch_schemas(self.pipeline, tp.topic, records)
        expected = self.next_offsets.get(tp, 0)
        await self._ensure_transaction()
        processed = 0
        last_offset: int | None = None
        # Looked up once: this loop runs per record.
        poisoned = self.restarts.poisoned if self.restarts is not None else {}
        process, output, monotonic = self.logic.process, self.output, time.monotonic
        firing = self._firing
        process_async = None if self._async is None else self._async.process_async
        if self.careful:  # each record's state changes are checked as it goes
            process = self._checked
            process_async = None if process_async is None else self._checked_async
        # The record in flight, noted where a death leaves it (inflight.py): one
        # store per record, into the page cache.
        note = self._note
        note[SOURCE] = self._source_of.get(tp.topic, NONE)
        try:
            for record in records:
                offset = record.offset
                if offset < expected:
                    continue  # already reflected in state (a re-fetch after a seek)
                if processed and deadline_s is not None and monotonic() >= deadline_s:
                    break
                note[IN_FLIGHT] = offset
                if not (poisoned and self._skip_poisoned(record)):
                    try:
                        if process_async is None:
                            process(record, output)
                        else:  # noted only while it runs, not while it waits
                            await WhileRunning(process_async(record, output), note, offset)
                    except ReplayCarefully as failure:
                        failure.until[tp] = offset + 1  # at least this record, carefully
                        raise
                    except Exception as exc:
                        # The engine aborts this task and replays from the last commit.
                        record_id = (record.topic, record.partition, offset)
                        raise RecordFailedError(record_id, exc) from exc
                processed += 1
                last_offset = offset
                if firing is not None and firing.firing_due:
                    break  # a checkpoint's worth of windows closed: see fire_due
        finally:
            note[IN_FLIGHT] = NONE
        if last_offset is not None:
            self.next_offsets[tp] = last_offset + 1
        self.records_in += processed
        await self._send(self.output.take())
        return processed

    def _checked(self, record: InputRecord, out: Output) -> None:
        """The careful replay's ``process``: the state entries the record changed must
        encode (else the record fails, and is dead-lettered at once: restarts.py)."""
        self.logic.process(record, out)
        cast(WatchedTransaction, self.txn).check()

    async def _checked_async(self, record: InputRecord, out: Output) -> None:
        assert self._async is not None
        await self._async.process_async(record, out)
        cast(WatchedTransaction, self.txn).check()

    def _skip_poisoned(self, record: InputRecord) -> bool:
        """Dead-letter ``record`` if the restart policy gave up on it; True if so."""
        assert self.restarts is not None
        record_id = (record.topic, record.partition, record.offset)
        poison = self.restarts.poisoned.get(record_id)
        if poison is None:
            return False
        self.output.dead_letter(record, poison)
        self.restarts.dead_lettered(record_id)
        return True

    async def process_broadcast(self, records: Sequence[InputRecord]) -> None:
        """Control records for every task; the logic skips those it already applied."""
        await self._ensure_transaction()
        logic = cast(BroadcastLogic, self.logic)
        for record in records:
            logic.process_broadcast(record, self.output)
        await self._send(self.output.take())

    @property
    def firing_due(self) -> bool:
        """The watermark closed more windows than one checkpoint fires: the runtime
        checkpoints and calls :meth:`fire_due` until this is False, before the
        next record."""
        return self._firing is not None and self._firing.firing_due

    async def fire_due(self, tp: TopicPartition | None = None) -> int:
        """Fire the next checkpoint's worth of what the watermark closed; send it.

        Args:
            tp: the input whose last record moved the watermark; a failure is that
                record's, as it would have been had everything fired at once.

        Returns:
            How many records it sent.
        """
        assert self._firing is not None
        await self._ensure_transaction()
        try:
            self._firing.fire_due(self.output)
        except ReplayCarefully:
            raise
        except Exception as exc:
            last = None if tp is None else self.next_offsets.get(tp)
            if tp is None or not last:
                raise
            raise RecordFailedError((tp.topic, tp.partition, last - 1), exc) from exc
        pending = self.output.take()
        await self._send(pending)
        return len(pending)

    async def tick(self, now_ms: int) -> None:
        """Let the logic act on processing time; send what it emits, if anything."""
        if self._async is not None:
            await self._async.tick_async(now_ms, self.output)
        else:
            self.logic.on_tick(now_ms, self.output)
        pending = self.output.take()
        if pending:
            await self._ensure_transaction()
            await self._send(pending)

    async def advance_watermark(self, watermark_ms: int) -> None:
        """An explicit watermark (the test driver's, or the end of a bounded input):
        the logic fires what it closes; send it."""
        if self._async is not None:
            await self._async.advance_watermark_async(watermark_ms, self.output)
        else:
            self.logic.advance_watermark(watermark_ms, self.output)
        await self.send_emitted()

    async def send_emitted(self) -> None:
        """Send what the logic emitted outside the task's own calls (the test driver
        asks a re-keying stage for its watermark after each batch)."""
        pending = self.output.take()
        if pending:
            await self._ensure_transaction()
            await self._send(pending)

    async def prepare_commit(self) -> None:
        """Steps 1-3 up to the transaction commit: send state, await every send."""
        if self._async is not None:
            try:
                await self._async.flush(self.output)
            except (TimeoutError, KafkaError, OSError, ReplayCarefully):
                raise
            except Exception as exc:
                # A database or service error: the engine reopens the task from its
                # last commit, as for a failed Kafka send, and the work is redone.
                raise ExternalIOError(f"{self.pipeline.name}[{self.partition}]: {exc!r}") from exc
        self.logic.prepare_commit()
        pending = self.output.take()  # e.g. watermark markers written at commit time
        if pending:
            await self._ensure_transaction()
            await self._send(pending)
        try:
            records = self.txn.changelog_records()
        except ENCODE_ERRORS as exc:
            # State is encoded here, once per checkpoint, not per change: which
            # record made this value is not known. The careful replay finds it.
            reason = f"the checkpoint's state cannot be written ({shortened(str(exc))})"
            raise ReplayCarefully(reason) from None
        self._raise_if_failed()
        await self._ensure_transaction()
        changelog = await self._send_changelog(records)
        await asyncio.wait_for(asyncio.gather(*self._futures), self.send_timeout_s)
        self._futures.clear()
        futures = [future for future, _ in changelog]
        metadata = await asyncio.wait_for(asyncio.gather(*futures), self.send_timeout_s)
        self._prepared = records
        # A batch's metadata is its first record's offset; the store keeps the last's.
        last = [m.offset + count - 1 for m, (_, count) in zip(metadata, changelog, strict=True)]
        self._changelog_offset = max(last, default=None)

    async def commit_transaction(self, group_id: str) -> None:
        """Exactly-once: offsets join the transaction, which then commits."""
        offsets: dict[Any, int] = dict(self.next_offsets)
        self._raise_if_failed()
        if offsets:
            await self.producer.send_offsets_to_transaction(offsets, group_id)
        await self.producer.commit_transaction()
        self._in_transaction = False

    def finish_commit(self) -> None:
        """Step 4: the local write, once Kafka has the checkpoint."""
        self.txn.commit(self._prepared, self._changelog_offset)
        self._prepared = []
        self._changelog_offset = None
        self.committed_offsets = dict(self.next_offsets)
        if self.careful and all(
            self.committed_offsets.get(tp, 0) >= offset
            for tp, offset in self._careful_until.items()
        ):
            self._end_careful()
        if self._suspect is not None:
            tp, offset = self._suspect
            if self.committed_offsets.get(tp, 0) > offset:
                self._inflight.forget()  # it went through (or was dead-lettered)
                self._suspect = None

    def _end_careful(self) -> None:
        """The careful replay committed past where the failure was: back to normal."""
        self.careful = False
        self.output.careful = False
        cast(WatchedTransaction, self.txn).watching = False

    async def abort(self) -> None:
        """Abort the open transaction (exactly-once), so that this producer can
        start the next one: a task started again in place (Partitions.rewind)."""
        if self._in_transaction:
            self._raise_if_failed()
            await asyncio.wait_for(self.producer.abort_transaction(), self.send_timeout_s)
            self._in_transaction = False

    def discard(self) -> None:
        """Forget everything uncommitted (the caller reopens the task from Kafka)."""
        if self._async is not None:
            self._async.cancel()
        self.txn.discard()
        self.output.take()
        for future in self._futures:
            future.cancel()
        self._futures.clear()
        self._prepared = []

    async def _ensure_transaction(self) -> None:
        if self.exactly_once and not self._in_transaction:
            self._raise_if_failed()
            await self.producer.begin_transaction()
            self._in_transaction = True

    def _raise_if_failed(self) -> None:
        raise_if_failed(self.producer)

    async def _checked_send(self, topic: str, value: bytes | None, **kwargs: Any) -> Any:
        try:
            return await self.producer.send(topic, value, **kwargs)
        except IllegalOperation:
            self._raise_if_failed()
            raise

    async def _send_changelog(
        self, records: list[tuple[bytes, bytes | None]]
    ) -> list[tuple[asyncio.Future[RecordMetadata], int]]:
        """Send the checkpoint's changelog records in batches of the producer's batch
        size: one ``send_batch`` per batch, where a ``send`` per record was most of
        a checkpoint's cost. Batches are closed before they are sent, so none waits
        for the producer's linger. The transactional producer adds the partition to
        the transaction as ``send`` does.

        Returns:
            Each batch's future (its first record's metadata) and record count.
        """
        sent: list[tuple[asyncio.Future[RecordMetadata], int]] = []
        batch = self.producer.create_batch()
        for key, value in records:
            if batch.append(key=key, value=value, timestamp=None) is None:
                sent.append((await self._send_batch(batch), batch.record_count()))
                batch = self.producer.create_batch()
                batch.append(key=key, value=value, timestamp=None)  # a first one always fits
        if batch.record_count():
            sent.append((await self._send_batch(batch), batch.record_count()))
        return sent

    async def _send_batch(self, batch: Any) -> asyncio.Future[RecordMetadata]:
        batch.close()
        try:
            future: asyncio.Future[RecordMetadata] = await self.producer.send_batch(
                batch, self.changelog_topic, partition=self.partition
            )
        except IllegalOperation:
            self._raise_if_failed()
            raise
        return future

    async def _send(self, pending: list[Pending]) -> None:
        for item in pending:
            self._futures.append(
                await self._checked_send(
                    item.topic,
                    item.value,
                    key=item.key,
                    headers=item.headers or None,
                    timestamp_ms=item.timestamp_ms,
                    partition=item.partition,
                )
            )
        self.records_out += len(pending)
