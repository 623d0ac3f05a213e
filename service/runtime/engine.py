"""Runs one pipeline: its consumer group, its tasks, their checkpoints.

Exactly-once follows Kafka Streams' per-partition producers: each input partition
has its own transactional producer (``<app>-<pipeline>-<partition>``) and every
record a task emits, its changelog writes and its input offsets commit through
that one producer. Whoever opens a partition first initialises that transactional
id, which fences any zombie still holding it and aborts its open transaction;
only then are the committed offsets read and the changelog tail restored. (A
single producer per worker would need KIP-447's group metadata to fence zombies,
which aiokafka does not send.)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar, cast

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import KafkaError, ProducerFenced

from service.errors import TopicMismatchError
from service.eventtime import MIN_WATERMARK, Clock, SystemClock
from service.kafka_clients import connection_kwargs
from service.metrics import Metrics
from service.pipeline.base import BroadcastLogic, ClosingPipeline, InputRecord, Pipeline
from service.runtime.assignor import EddyAssignor
from service.runtime.broadcast import BroadcastInput
from service.runtime.gauges import StateGauges
from service.runtime.latency import LatencyMarkers
from service.runtime.output import TaskOutput
from service.runtime.progress import InputProgress, input_progress
from service.runtime.restarts import RecordFailedError, RestartPolicy
from service.runtime.restore import restore_partition
from service.runtime.standby import StandbyReplicas
from service.runtime.stores import LocalStores
from service.runtime.task import Task
from service.settings import Settings
from service.topics import COMPACTED, TopicSpec, changelog_topic, ensure_topics

log = logging.getLogger(__name__)
# State size and lag are estimates; once a second is plenty and keeps commits cheap.
GAUGES_EVERY_S = 1.0
T = TypeVar("T")


class PipelineRuntime:
    """Consumes a pipeline's sources and drives one :class:`Task` per owned partition."""

    def __init__(
        self,
        pipeline: Pipeline,
        settings: Settings,
        metrics: Metrics,
        clock: Clock | None = None,
    ) -> None:
        self.pipeline = pipeline
        self.settings = settings
        self.metrics = metrics
        self.clock = clock or SystemClock()
        self.name = pipeline.name
        self.group_id = f"{settings.app_id}.{pipeline.name}"
        self.changelog = changelog_topic(settings, pipeline.name)
        self.state_dir = Path(settings.state_dir) / settings.app_id / pipeline.name
        self.partition_count = 0
        self.tasks: dict[int, Task] = {}
        self.stores = LocalStores(self.state_dir)
        self.standby = StandbyReplicas(settings, self.name, self.changelog, self.stores, metrics)
        # This worker's REST API as other workers reach it; set by the worker.
        self.endpoint: str | None = None
        self._assignor = EddyAssignor(
            settings.num_standby_replicas, self._local_state, lambda: self.endpoint
        )
        self.restoring: set[int] = set()
        self._gauges = StateGauges(metrics, self.name)
        self._restarts = RestartPolicy.from_settings(settings)
        self._last_assigned: frozenset[int] = frozenset()
        self._gauges_at = 0.0
        self.assigned_once = False
        self.failed: BaseException | None = None
        self._lock = asyncio.Lock()
        self._generation = 0
        self._retries: dict[int, int] = {}
        self._retry_at: dict[int, float] = {}
        self._stopping = False
        self._held = False
        self._last_commit = time.monotonic()
        self._consumer: AIOKafkaConsumer | None = None
        self._shared_producer: AIOKafkaProducer | None = None
        self._broadcast: BroadcastInput | None = None
        self._topic_counts: dict[str, int] = {}
        self.markers = LatencyMarkers(settings.latency_marker_interval_ms)
        # Wall-clock ms of each partition's last checkpoint here (GET /jobs).
        self.last_commit_ms: dict[int, int] = {}
        self._in_hand = False  # fetched records not processed yet (see progress.py)

    # -- lifecycle ---------------------------------------------------------------

    async def start(self) -> None:
        counts = await ensure_topics(self.settings, self._topic_specs(None))
        self.partition_count = counts[self.pipeline.sources[0]]
        mismatched = [s for s in self.pipeline.sources if counts[s] != self.partition_count]
        if mismatched:
            raise TopicMismatchError(
                f"inputs of {self.name} must be co-partitioned; {mismatched} differ from "
                f"{self.pipeline.sources[0]} ({self.partition_count} partitions)"
            )
        self._topic_counts = await ensure_topics(
            self.settings, self._topic_specs(self.partition_count)
        )
        if not self.settings.exactly_once:
            self._shared_producer = self._producer(transactional_id=None)
            await self._shared_producer.start()
        self._consumer = AIOKafkaConsumer(
            **connection_kwargs(self.settings),
            group_id=self.group_id,
            client_id=f"{self.group_id}-{self.settings.worker_id}",
            enable_auto_commit=False,
            isolation_level="read_committed",
            auto_offset_reset="earliest",
            partition_assignment_strategy=(self._assignor,),
            session_timeout_ms=self.settings.session_timeout_ms,
            heartbeat_interval_ms=max(100, self.settings.session_timeout_ms // 4),
            max_poll_interval_ms=300_000,
            rebalance_timeout_ms=60_000,
        )
        broadcast_topic = getattr(self.pipeline, "broadcast_topic", None)
        if broadcast_topic is not None:
            self._broadcast = BroadcastInput(self.settings, broadcast_topic)
            await self._broadcast.start(counts.get(broadcast_topic, 1))
        self.stores.discover()
        await self.standby.start()
        await self._consumer.start()
        self._consumer.subscribe(list(self.pipeline.sources), listener=_Listener(self))

    async def run(self) -> None:
        """The consume-process-commit loop; returns when :meth:`stop` is called."""
        consumer = self._require_consumer()
        while not self._stopping:
            if self.failed is not None:
                raise self.failed
            if self._held:
                await asyncio.sleep(0.05)  # still in the group: heartbeats go on
                continue
            generation = self._generation
            batch = await consumer.getmany(timeout_ms=100, max_records=10_000)
            fetched_ms = self.clock.now_ms()
            self._in_hand = bool(batch)
            async with self._lock:
                if self._stopping:
                    break
                if generation != self._generation:
                    # The assignment changed while fetching: these records may predate
                    # the new positions. Drop them and fetch again from the tasks'.
                    self._reseek()
                    self._in_hand = False
                    continue
                await self._handle(batch, fetched_ms)
                self._in_hand = False
                await self.standby.poll()
                if self._commit_due():
                    await self._commit_all()
                if self._retry_at:
                    await self._retry_due()

    async def _handle(
        self, batch: Mapping[TopicPartition, Sequence[InputRecord]], fetched_ms: int | None = None
    ) -> None:
        # Processing time first: records handled now must see the current clock
        # (a timer "in 10 s" is 10 s from now, not from the last tick).
        now_ms = self.clock.now_ms()
        for task in self.tasks.values():
            await task.tick(now_ms)
        if self._broadcast is not None:
            for control in (await self._broadcast.poll()).values():
                for task in self.tasks.values():
                    await task.process_broadcast(control)
        # A task reopened while handling this batch was seeked back to its last
        # commit: the rest of the batch for it (any source) would skip records.
        opened = dict(self.tasks)
        for tp, records in batch.items():
            remaining = records
            while remaining:
                owner = self.tasks.get(tp.partition)
                if owner is None or owner is not opened.get(tp.partition):
                    break
                if not await self._process(owner, tp, remaining, now_ms, fetched_ms):
                    break
                next_offset = owner.next_offsets[tp]
                if next_offset > remaining[-1].offset:
                    remaining = ()  # all processed: the usual case, no scan per record
                else:  # stopped at the deadline: hand over the rest (offset order)
                    remaining = remaining[bisect_left(remaining, next_offset, key=_offset) :]
                if remaining or self._commit_due():
                    # The commit interval holds within a fetch too: slow records
                    # (lookups) must not keep one transaction open for the whole
                    # fetch, past the broker's transaction timeout.
                    await self._commit_all()
            # Sends rarely suspend: without this, REST queries (served by this event
            # loop) would wait for every partition's batch, not just the current one.
            await asyncio.sleep(0)

    async def _process(
        self,
        owner: Task,
        tp: TopicPartition,
        records: Sequence[InputRecord],
        now_ms: int,
        fetched_ms: int | None,
    ) -> bool:
        """Process ``records`` until the next commit is due; False if the task failed
        (it is then dropped, restarted or reopened)."""
        started = time.perf_counter()
        deadline_s = self._last_commit + self.settings.commit_interval_ms / 1000
        try:
            processed = await owner.process(tp, records, deadline_s)
        except ProducerFenced:
            await self._fenced(owner)
            return False
        except RecordFailedError as failure:
            await self._restart_after(owner, failure)
            return False
        except (TimeoutError, KafkaError, OSError) as exc:
            log.warning(
                "%s[%d]: processing failed (%r); reopening from Kafka",
                self.name,
                owner.partition,
                exc,
            )
            owner.discard()
            await self._reopen(owner.partition)
            return False
        self.metrics.records_in.labels(self.name).inc(processed)
        self.markers.note(tp, now_ms if fetched_ms is None else fetched_ms)
        self.metrics.batch_seconds.labels(self.name).observe(time.perf_counter() - started)
        return True

    def _commit_due(self) -> bool:
        return time.monotonic() - self._last_commit >= self.settings.commit_interval_ms / 1000

    async def stop(self) -> None:
        """Commit what was processed, leave the group, close state.

        The consumer stops outside the lock: ``consumer.stop()`` waits for its
        coordinator to finish a rebalance in progress (another worker leaving at the
        same time), whose callbacks take this lock; they return at once now that
        ``_stopping`` is set. Holding the lock across it deadlocks.
        """
        self._stopping = True
        async with self._lock:
            await self._commit_all(reopen_failed=False)
            await self._close_tasks(list(self.tasks))
        if self._consumer is not None:
            await self._consumer.stop()
        async with self._lock:
            if self._shared_producer is not None:
                await self._shared_producer.stop()
            await self.standby.stop()
            if self._broadcast is not None:
                await self._broadcast.stop()
            self.stores.close_all()
            await self._close_pipeline()

    async def _close_pipeline(self) -> None:
        if not isinstance(self.pipeline, ClosingPipeline):
            return
        try:
            await self.pipeline.close()
        except Exception:  # stopping anyway: say so, and let the worker exit cleanly
            log.exception("%s: closing the pipeline's resources failed", self.name)

    def hold(self, held: bool) -> None:
        """Stop (or resume) processing without leaving the group: what
        ``stop --savepoint`` does first, so the savepoint is the final state."""
        self._held = held

    @property
    def ready(self) -> bool:
        return self.assigned_once and not self.restoring and self.failed is None

    def watermarks(self) -> dict[int, int]:
        return {p: t.logic.watermark_ms for p, t in sorted(self.tasks.items())}

    async def inputs(self, partition: int) -> list[InputProgress]:
        """Committed and end offsets and lag of each source of ``partition`` here."""
        task = self.tasks.get(partition)
        if task is None or self._consumer is None:
            return []
        return await input_progress(self._consumer, task, self._in_hand)

    def committed_offsets(self, partition: int) -> dict[str, int]:
        task = self.tasks.get(partition)
        if task is None:
            return {}
        return {tp.topic: offset for tp, offset in task.committed_offsets.items()}

    # -- checkpoints -------------------------------------------------------------

    async def at_commit_boundary(self, action: Callable[[Mapping[int, Task]], T]) -> T:
        """Commit every task, then run ``action`` on the open tasks before another
        record is processed: their stores then hold exactly what Kafka committed at
        ``task.committed_offsets`` (the consistent cut a snapshot needs). Tasks still
        restoring, or reopening after a failed commit, are left out."""
        async with self._lock:
            await self._commit_all()
            return action({p: t for p, t in self.tasks.items() if p not in self.restoring})

    async def _commit_all(self, *, reopen_failed: bool = True) -> None:
        """Checkpoint every task with work.

        Args:
            reopen_failed: reopen a task whose checkpoint failed, from what Kafka
                committed. False when the partitions are being given up anyway
                (revoke, stop): reopening would only fence our own producer.
        """
        self._last_commit = time.monotonic()
        tasks = [task for task in self.tasks.values() if task.has_work]
        if not tasks:
            return
        started = time.perf_counter()
        if self.settings.exactly_once:
            await asyncio.gather(*(self._commit_one(task, reopen_failed) for task in tasks))
        else:
            await self._commit_at_least_once(tasks, reopen_failed)
        self.metrics.commit_seconds.labels(self.name).observe(time.perf_counter() - started)
        self._update_watermark_metrics()
        if time.monotonic() - self._gauges_at >= GAUGES_EVERY_S:
            self._gauges_at = time.monotonic()
            stores = {p: s for p in self.tasks if (s := self.stores.get(p)) is not None}
            self._gauges.refresh(self._consumer, self.tasks, stores)

    async def _commit_one(self, task: Task, reopen_failed: bool) -> None:
        try:
            await task.prepare_commit()
            await task.commit_transaction(self.group_id)
        except ProducerFenced:
            self.metrics.commit_failures.labels(self.name).inc()
            await self._fenced(task, reopen=reopen_failed)
            return
        except (TimeoutError, KafkaError, OSError) as exc:
            log.warning(
                "%s[%d]: checkpoint failed (%r); reopening from Kafka",
                self.name,
                task.partition,
                exc,
            )
            self.metrics.commit_failures.labels(self.name).inc()
            task.discard()
            if reopen_failed:
                await self._reopen(task.partition)
            return
        self._finish_commit(task)
        self.metrics.commits.labels(self.name).inc()

    async def _commit_at_least_once(self, tasks: list[Task], reopen_failed: bool) -> None:
        consumer = self._require_consumer()
        try:
            await asyncio.gather(*(task.prepare_commit() for task in tasks))
            offsets = {tp: off for task in tasks for tp, off in task.next_offsets.items()}
            await consumer.commit(offsets)
        except (TimeoutError, KafkaError, OSError) as exc:
            log.warning("%s: checkpoint failed (%r); reopening from Kafka", self.name, exc)
            self.metrics.commit_failures.labels(self.name).inc(len(tasks))
            for task in tasks:
                task.discard()
                if reopen_failed:
                    await self._reopen(task.partition)
            return
        for task in tasks:
            self._finish_commit(task)
        self.metrics.commits.labels(self.name).inc(len(tasks))

    def _finish_commit(self, task: Task) -> None:
        """The local write; the checkpoint's outputs are visible now: observe markers."""
        task.finish_commit()
        now_ms = self.clock.now_ms()
        self.last_commit_ms[task.partition] = now_ms
        for (topic, partition), seconds in self.markers.observe(task.partition, now_ms):
            self.metrics.latency_markers.labels(self.name, topic, str(partition)).observe(seconds)

    # -- partitions --------------------------------------------------------------

    async def on_revoked(self) -> None:
        async with self._lock:
            self._generation += 1
            if self._stopping:
                return  # stop() committed and closed every task already
            await self._commit_all(reopen_failed=False)
            await self._close_tasks(list(self.tasks))

    async def on_assigned(self, assigned: Iterable[TopicPartition]) -> None:
        async with self._lock:
            self._generation += 1
            if self._stopping:
                return  # never open partitions while stopping
            partitions = sorted({tp.partition for tp in assigned})
            self._last_assigned = frozenset(partitions)
            standby = self._assignor.standby - set(partitions)
            # Stop tailing what becomes active here before restoring it.
            await self.standby.update(standby)
            self.stores.keep_only(set(partitions) | standby)
            self.restoring = set(partitions)
            self.metrics.assigned_partitions.labels(self.name).set(len(partitions))
            self.metrics.restoring_partitions.labels(self.name).set(len(partitions))
            self._retry_at.clear()
            try:
                await asyncio.gather(*(self._open_or_retry(p) for p in partitions))
            except Exception as exc:
                # A bug, not a Kafka hiccup: surface it (readiness, worker exit).
                log.exception("%s: could not open partitions %s", self.name, partitions)
                self.failed = exc
                raise
            self.assigned_once = True

    async def _open(self, partition: int) -> None:
        """Fence, restore the changelog tail, read committed offsets, seek."""
        producer = self._shared_producer
        if producer is None:
            producer = self._producer(f"{self.settings.app_id}-{self.name}-{partition}")
            await producer.start()  # InitProducerId: fences zombies, aborts their txn
        try:
            applied = await restore_partition(
                self.settings, self.stores, partition, TopicPartition(self.changelog, partition)
            )
            store = self.stores.open(partition)
            self.metrics.restored_records.labels(self.name).inc(applied)
            offsets = await self._committed(partition)
        except BaseException:
            if producer is not self._shared_producer:
                await producer.stop()
            raise
        output = TaskOutput(
            self.name, self.settings.dead_letters, self.metrics, dict(self._topic_counts)
        )
        self.tasks[partition] = Task(
            pipeline=self.pipeline,
            partition=partition,
            store=store,
            producer=producer,
            exactly_once=self.settings.exactly_once,
            changelog_topic=self.changelog,
            output=output,
            offsets=offsets,
            restarts=self._restarts,
        )
        consumer = self._require_consumer()
        for tp, offset in offsets.items():
            consumer.seek(tp, offset)
        if self._broadcast is not None:
            logic = cast(BroadcastLogic, self.tasks[partition].logic)
            await self._broadcast.rewind(logic.broadcast_offsets)
        self.restoring.discard(partition)
        self.metrics.restoring_partitions.labels(self.name).set(len(self.restoring))
        log.info(
            "%s[%d]: ready (restored %d changelog records, offsets %s)",
            self.name,
            partition,
            applied,
            {tp.topic: o for tp, o in offsets.items()},
        )

    async def _committed(self, partition: int) -> dict[TopicPartition, int]:
        consumer = self._require_consumer()
        tps = [TopicPartition(topic, partition) for topic in self.pipeline.sources]
        beginnings = await consumer.beginning_offsets(tps)
        offsets = {}
        for tp in tps:
            committed = await consumer.committed(tp)
            offsets[tp] = committed if committed is not None else beginnings[tp]
        return offsets

    async def _fenced(self, task: Task, *, reopen: bool = True) -> None:
        """The task's transactional id has a newer epoch than its producer.

        Either a newer owner initialised it (this worker is a zombie: its group
        membership expired while it was paused or cut off), or the broker aborted a
        transaction that outlived ``EDDY_TRANSACTION_TIMEOUT_MS`` and bumped the
        epoch. A zombie learns of the rebalance at its next heartbeat, which revokes
        the partition; reopening at once would fence the rightful owner in turn. So
        the partition is paused and reopened after a session timeout if this worker
        still owns it then (the abort case), and never left unprocessed.
        """
        partition = task.partition
        log.warning(
            "%s[%d]: fenced (a newer owner, or the transaction outlived its timeout)%s",
            self.name,
            partition,
            "; reopening it if still assigned here" if reopen else "",
        )
        task.discard()
        await self._close_tasks([partition])
        if not reopen:
            return
        self.restoring.add(partition)
        self.metrics.restoring_partitions.labels(self.name).set(len(self.restoring))
        self._pause(partition, True)
        self._retry_at[partition] = time.monotonic() + self.settings.session_timeout_ms / 1000

    async def _restart_after(self, task: Task, failure: RecordFailedError) -> None:
        """Abort the task's open work; reopen it from its last commit after a delay."""
        delay_s = self._restarts.on_failure(failure)  # raises when restarts are exhausted
        reason = type(failure.cause).__name__
        self.metrics.restarts.labels(self.name, reason).inc()
        log.warning(
            "%s[%d]: %s; restarting the partition from its last commit in %.1f s",
            self.name,
            task.partition,
            failure,
            delay_s,
            exc_info=failure.cause,
        )
        task.discard()
        await self._close_tasks([task.partition])
        self.restoring.add(task.partition)
        self._pause(task.partition, True)
        self._retry_at[task.partition] = time.monotonic() + delay_s

    async def _reopen(self, partition: int) -> None:
        await self._close_tasks([partition])
        await self._open_or_retry(partition)

    async def _open_or_retry(self, partition: int) -> None:
        """Open a partition; if Kafka is unreachable, pause it and retry later.

        A partition that cannot be opened is never processed from a guessed
        position: it stays paused (and the worker not ready) until it opens.
        """
        self.restoring.add(partition)
        try:
            await self._open(partition)
        except (TimeoutError, KafkaError, OSError) as exc:
            delay_s = min(30.0, 2 ** self._retries.get(partition, 0))
            self._retries[partition] = self._retries.get(partition, 0) + 1
            log.warning(
                "%s[%d]: open failed (%r); retrying in %.0fs", self.name, partition, exc, delay_s
            )
            self._pause(partition, True)
            self._retry_at[partition] = time.monotonic() + delay_s
        else:
            self._retries.pop(partition, None)
            self._retry_at.pop(partition, None)
            self._pause(partition, False)

    async def _retry_due(self) -> None:
        now = time.monotonic()
        due = [p for p, at in self._retry_at.items() if at <= now]
        owned = {tp.partition for tp in self._require_consumer().assignment()}
        for partition in due:
            del self._retry_at[partition]
            if partition in owned:
                await self._open_or_retry(partition)
            else:  # revoked meanwhile; the next assignment opens what is ours
                self.restoring.discard(partition)

    async def _close_tasks(self, partitions: list[int]) -> None:
        for partition in partitions:
            self.markers.drop(partition)
            task = self.tasks.pop(partition, None)
            if task is None:
                continue
            task.discard()
            if task.producer is not self._shared_producer:
                try:
                    await task.producer.stop()
                except KafkaError:
                    log.debug("producer of %s[%d] did not stop cleanly", self.name, partition)
            for gauge in (self.metrics.watermark_ms, self.metrics.watermark_lag_ms):
                with contextlib.suppress(KeyError):
                    gauge.remove(self.name, str(partition))

    def _reseek(self) -> None:
        consumer = self._require_consumer()
        for task in self.tasks.values():
            for tp, offset in task.next_offsets.items():
                consumer.seek(tp, offset)

    def _pause(self, partition: int, paused: bool) -> None:
        consumer = self._require_consumer()
        tps = [TopicPartition(topic, partition) for topic in self.pipeline.sources]
        if paused:
            consumer.pause(*tps)
        else:
            consumer.resume(*tps)

    # -- helpers -------------------------------------------------------------------

    def _producer(self, transactional_id: str | None) -> AIOKafkaProducer:
        return AIOKafkaProducer(
            **connection_kwargs(self.settings),
            client_id=f"{self.group_id}-{self.settings.worker_id}",
            enable_idempotence=True,
            acks="all",
            linger_ms=5,
            transactional_id=transactional_id,
            transaction_timeout_ms=self.settings.transaction_timeout_ms,
        )

    def _topic_specs(self, partitions: int | None) -> list[TopicSpec]:
        n = partitions or self.settings.partitions
        specs = [TopicSpec(t, n, exact_partitions=False) for t in self.pipeline.sources]
        broadcast_topic = getattr(self.pipeline, "broadcast_topic", None)
        if broadcast_topic is not None:
            specs.append(TopicSpec(broadcast_topic, 1, exact_partitions=False))
        outputs = {*self.pipeline.output_topics, self.settings.dead_letters}
        specs += [TopicSpec(t, n, exact_partitions=False) for t in sorted(outputs)]
        if partitions is not None:
            specs.append(TopicSpec(self.changelog, partitions, COMPACTED))
        return specs

    def _update_watermark_metrics(self) -> None:
        now_ms = self.clock.now_ms()
        for partition, task in self.tasks.items():
            watermark = task.logic.watermark_ms
            if watermark == MIN_WATERMARK:
                continue
            self.metrics.watermark_ms.labels(self.name, str(partition)).set(watermark)
            self.metrics.watermark_lag_ms.labels(self.name, str(partition)).set(now_ms - watermark)

    def owner_of(self, partition: int) -> str | None:
        """The REST endpoint of the worker that owns ``partition`` now, as of the
        last rebalance (None while unknown)."""
        return self._assignor.owners.get(partition)

    def _local_state(self) -> tuple[frozenset[int], dict[int, int]]:
        """What this worker tells the group leader when it joins (see the assignor).

        Revocation closes every task before the rejoin, so "owned" is what the last
        assignment gave, not what is open now: otherwise stickiness never applies.
        """
        return frozenset(self.tasks) | self._last_assigned, self.stores.offsets()

    def _require_consumer(self) -> AIOKafkaConsumer:
        if self._consumer is None:
            raise RuntimeError("the pipeline runtime is not started")
        return self._consumer


def _offset(record: InputRecord) -> int:
    return record.offset


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, runtime: PipelineRuntime) -> None:
        self._runtime = runtime

    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        await self._runtime.on_revoked()

    async def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        await self._runtime.on_assigned(assigned)
