"""Runs one stage: the consume-process-commit loop over its tasks.

Exactly-once follows Kafka Streams' per-partition producers: each input partition
has its own transactional producer (``<app>-<stage>-<partition>``) and every
record a task emits, its changelog writes and its input offsets commit through
that one producer. Whoever opens a partition first initialises that transactional
id, which fences any zombie still holding it and aborts its open transaction;
only then are the committed offsets read and the changelog tail restored. (A
single producer per worker would need KIP-447's group metadata to fence zombies,
which aiokafka does not send.)

The parts, each doing one thing: :mod:`~eddy.runtime.clients` (the Kafka
clients), :mod:`~eddy.runtime.partitions` (opening, fencing, restarting and
retrying partitions), :mod:`~eddy.runtime.checkpoint` (commits); this module
is the loop and the group's rebalance callbacks, which share one lock so that
a rebalance happens between two batches, never in the middle of one.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from bisect import bisect_left
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from aiokafka import ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import KafkaError, ProducerFenced

from eddy.eventtime import Clock, SystemClock
from eddy.metrics import Metrics
from eddy.pipeline.base import ClosingPipeline, InputRecord, Pipeline
from eddy.runtime.assignor import EddyAssignor
from eddy.runtime.checkpoint import Checkpointer
from eddy.runtime.clients import StageClients
from eddy.runtime.latency import LatencyMarkers
from eddy.runtime.partitions import Partitions
from eddy.runtime.progress import InputProgress, input_progress
from eddy.runtime.restarts import RecordFailedError, ReplayCarefully
from eddy.runtime.standby import StandbyReplicas
from eddy.runtime.stores import LocalStores
from eddy.runtime.task import Task
from eddy.settings import Settings

log = logging.getLogger(__name__)
# Closing clients at stop: a lost broker would make each wait for ever, and the
# whole stop must fit in EDDY_STOP_TIMEOUT_MS.
CLIENT_STOP_S = 5.0
T = TypeVar("T")
# The longest a fetch waits for records before the loop looks at checkpoints,
# processing time and stopping again.
FETCH_WAIT_MS = 100


def fetch_wait_ms(checkpoint_due_s: float, now_s: float) -> int:
    """How long a fetch may wait for records: :data:`FETCH_WAIT_MS`, but never past
    the next checkpoint. On a quiet input a full wait would hold a due checkpoint, and
    the results waiting in it, up to 100 ms past the commit interval."""
    until_due_ms = (checkpoint_due_s - now_s) * 1000
    return max(0, min(FETCH_WAIT_MS, math.ceil(until_due_ms)))


class PipelineRuntime:
    """Consumes a stage's sources and drives one :class:`Task` per owned partition."""

    def __init__(
        self,
        pipeline: Pipeline,
        settings: Settings,
        metrics: Metrics,
        clock: Clock | None = None,
        group_id: str | None = None,
    ) -> None:
        self.pipeline = pipeline
        self.settings = settings
        self.metrics = metrics
        self.clock = clock or SystemClock()
        self.name = pipeline.name
        self.state_dir = Path(settings.state_dir) / settings.app_id / pipeline.name
        self.stores = LocalStores(self.state_dir)
        # This worker's REST API as other workers reach it; set by the worker.
        self.endpoint: str | None = None
        self._assignor = EddyAssignor(
            settings.num_standby_replicas, self._local_state, lambda: self.endpoint
        )
        self.clients = StageClients(pipeline, settings, self._assignor, group_id)
        self.group_id = self.clients.group_id
        self.changelog = self.clients.changelog
        self.standby = StandbyReplicas(settings, self.name, self.changelog, self.stores, metrics)
        self.markers = LatencyMarkers(settings.latency_marker_interval_ms)
        self.partitions = Partitions(
            pipeline, settings, metrics, self.clients, self.stores, self.markers
        )
        self.checkpoints = Checkpointer(
            settings, metrics, self.clients, self.partitions, self.markers, self.clock
        )
        self._last_assigned: frozenset[int] = frozenset()
        self.assigned_once = False
        self.failed: BaseException | None = None
        self._lock = asyncio.Lock()
        self._generation = 0
        self._stopping = False
        self._held = False
        self._in_hand = False  # fetched records not processed yet (see progress.py)

    # -- what the worker and queries read ----------------------------------------------

    @property
    def tasks(self) -> dict[int, Task]:
        return self.partitions.tasks

    @property
    def restoring(self) -> set[int]:
        return self.partitions.restoring

    @property
    def partition_count(self) -> int:
        return self.clients.partition_count

    @property
    def last_commit_ms(self) -> dict[int, int]:
        return self.checkpoints.last_commit_ms

    @property
    def ready(self) -> bool:
        return self.assigned_once and not self.restoring and self.failed is None

    def watermarks(self) -> dict[int, int]:
        return {p: t.logic.watermark_ms for p, t in sorted(self.tasks.items())}

    async def inputs(self, partition: int) -> list[InputProgress]:
        """Committed and end offsets and lag of each source of ``partition`` here."""
        task = self.tasks.get(partition)
        if task is None:
            return []
        return await input_progress(self.clients.consumer, task, self._in_hand)

    def committed_offsets(self, partition: int) -> dict[str, int]:
        task = self.tasks.get(partition)
        if task is None:
            return {}
        return {tp.topic: offset for tp, offset in task.committed_offsets.items()}

    def owner_of(self, partition: int) -> str | None:
        """The REST endpoint of the worker that owns ``partition`` now, as of the
        last rebalance (None while unknown)."""
        return self._assignor.owners.get(partition)

    def owners(self) -> dict[int, str]:
        """Every partition's owner endpoint, as of the last rebalance."""
        return dict(self._assignor.owners)

    def observe(self, changed: Callable[[bool], None]) -> None:
        """Call ``changed(True)`` when a partition starts or stops being served here
        (before its store is touched), ``changed(False)`` after each checkpoint:
        what the query plane reads (service/plane/status.py)."""
        self.partitions.on_change = lambda: changed(True)
        self.checkpoints.on_commit = lambda: changed(False)

    def _local_state(self) -> tuple[frozenset[int], dict[int, int]]:
        """What this worker tells the group leader when it joins (see the assignor).

        Revocation closes every task before the rejoin, so "owned" is what the last
        assignment gave, not what is open now: otherwise stickiness never applies.
        """
        return frozenset(self.tasks) | self._last_assigned, self.stores.offsets()

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        await self.clients.prepare()
        self.stores.discover()
        await self.standby.start()
        await self.clients.subscribe(_Listener(self))

    async def run(self) -> None:
        """The consume-process-commit loop; returns when :meth:`stop` is called."""
        consumer = self.clients.consumer
        while not self._stopping:
            if self.failed is not None:
                raise self.failed
            if self._held:
                await asyncio.sleep(0.05)  # still in the group: heartbeats go on
                continue
            generation = self._generation
            batch = await consumer.getmany(
                timeout_ms=fetch_wait_ms(self.checkpoints.deadline_s, time.monotonic()),
                max_records=10_000,
            )
            fetched_ms = self.clock.now_ms()
            self._in_hand = bool(batch)
            async with self._lock:
                if self._stopping:
                    break
                if generation != self._generation:
                    # The assignment changed while fetching: these records may predate
                    # the new positions. Drop them and fetch again from the tasks'.
                    self.partitions.reseek()
                    self._in_hand = False
                    continue
                await self._handle(batch, fetched_ms)
                self._in_hand = False
                await self.standby.poll()
                if self.checkpoints.due():
                    await self.checkpoints.commit_all()
                if self.partitions.retrying:
                    await self.partitions.retry_due()

    async def stop(self) -> None:
        """Commit what was processed, leave the group, close state.

        The consumer stops outside the lock: ``consumer.stop()`` waits for its
        coordinator to finish a rebalance in progress (another worker leaving at the
        same time), whose callbacks take this lock; they return at once now that
        ``_stopping`` is set. Holding the lock across it deadlocks.
        """
        self._stopping = True
        async with self._lock:
            await self.checkpoints.commit_all(reopen_failed=False)
            await self.partitions.close(list(self.tasks))
        await self.clients.stop_consumer(CLIENT_STOP_S)
        async with self._lock:
            await self.clients.stop_producers(CLIENT_STOP_S)
            await self.standby.stop()
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

    async def at_commit_boundary(self, action: Callable[[Mapping[int, Task]], T]) -> T:
        """Commit every task, then run ``action`` on the open tasks before another
        record is processed: their stores then hold exactly what Kafka committed at
        ``task.committed_offsets`` (the consistent cut a snapshot needs). Tasks still
        restoring, or reopening after a failed commit, are left out."""
        async with self._lock:
            await self.checkpoints.commit_all()
            return action({p: t for p, t in self.tasks.items() if p not in self.restoring})

    # -- one fetch ---------------------------------------------------------------------

    async def _handle(
        self, batch: Mapping[TopicPartition, Sequence[InputRecord]], fetched_ms: int | None = None
    ) -> None:
        # Processing time first: records handled now must see the current clock
        # (a timer "in 10 s" is 10 s from now, not from the last tick).
        now_ms = self.clock.now_ms()
        for task in list(self.tasks.values()):
            await self._guarded(task, task.tick(now_ms))
        await self._fire_due()
        broadcast = self.clients.broadcast
        if broadcast is not None:
            for control in (await broadcast.poll()).values():
                for task in list(self.tasks.values()):
                    await self._guarded(task, task.process_broadcast(control))
        # A task reopened while handling this batch was seeked back to its last
        # commit: the rest of the batch for it (any source) would skip records.
        opened = dict(self.tasks)
        for tp, records in batch.items():
            await self._handle_partition(tp, records, opened, now_ms, fetched_ms)
            # Sends rarely suspend: without this, REST queries (served by this event
            # loop) would wait for every partition's batch, not just the current one.
            await asyncio.sleep(0)

    async def _handle_partition(
        self,
        tp: TopicPartition,
        records: Sequence[InputRecord],
        opened: Mapping[int, Task],
        now_ms: int,
        fetched_ms: int | None,
    ) -> None:
        remaining = records
        while True:
            owner = self.tasks.get(tp.partition)
            if owner is None or owner is not opened.get(tp.partition):
                return
            if owner.firing_due:
                # A watermark closed more windows than one checkpoint holds: fire
                # the next part, checkpoint, and only then go on with records.
                if await self._guarded(owner, owner.fire_due(tp)) is None:
                    return
                await self.checkpoints.commit_all()
                continue
            if not remaining:
                return
            if not await self._process(owner, tp, remaining, now_ms, fetched_ms):
                return
            next_offset = owner.next_offsets[tp]
            if next_offset > remaining[-1].offset:
                remaining = ()  # all processed: the usual case, no scan per record
            else:  # stopped at the deadline: hand over the rest (offset order)
                remaining = remaining[bisect_left(remaining, next_offset, key=_offset) :]
            if remaining or owner.firing_due or self.checkpoints.due():
                # The commit interval holds within a fetch too: slow records
                # (lookups) must not keep one transaction open for the whole
                # fetch, past the broker's transaction timeout.
                await self.checkpoints.commit_all()

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
        processed = await self._guarded(
            owner, owner.process(tp, records, self.checkpoints.deadline_s)
        )
        if processed is None:
            return False
        self.metrics.records_in.labels(self.name).inc(processed)
        self.markers.note(tp, now_ms if fetched_ms is None else fetched_ms)
        self.metrics.batch_seconds.labels(self.name).observe(time.perf_counter() - started)
        return True

    async def _guarded(self, owner: Task, work: Awaitable[T]) -> T | None:
        """``work``'s result; None if the task failed (it is then dropped,
        restarted or reopened)."""
        try:
            return await work
        except ProducerFenced:
            await self.partitions.fenced(owner)
        except RecordFailedError as failure:
            await self.partitions.restart_after(owner, failure)
        except ReplayCarefully as failure:  # an output that cannot be encoded
            await self.partitions.replay_carefully(owner, failure)
        except (TimeoutError, KafkaError, OSError) as exc:
            log.warning(
                "%s[%d]: processing failed (%r); reopening from Kafka",
                self.name,
                owner.partition,
                exc,
            )
            owner.discard()
            await self.partitions.reopen(owner.partition)
        return None

    async def _fire_due(self) -> None:
        """Processing time moved a watermark (or a task reopened in the middle of
        firing): fire what it closed, a checkpoint's worth at a time."""
        while due := [task for task in self.tasks.values() if task.firing_due]:
            for task in due:
                if await self._guarded(task, task.fire_due()) is None:
                    return
            await self.checkpoints.commit_all()

    # -- the group's rebalances ------------------------------------------------------------

    async def on_revoked(self) -> None:
        async with self._lock:
            self._generation += 1
            if self._stopping:
                return  # stop() committed and closed every task already
            await self.checkpoints.commit_all(reopen_failed=False)
            await self.partitions.close(list(self.tasks))

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
            self.metrics.assigned_partitions.labels(self.name).set(len(partitions))
            self.partitions.restoring_now(set(partitions))
            try:
                await asyncio.gather(*(self.partitions.open_or_retry(p) for p in partitions))
            except Exception as exc:
                # A bug, not a Kafka hiccup: surface it (readiness, worker exit).
                log.exception("%s: could not open partitions %s", self.name, partitions)
                self.failed = exc
                raise
            self.assigned_once = True


def _offset(record: InputRecord) -> int:
    return record.offset


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, runtime: PipelineRuntime) -> None:
        self._runtime = runtime

    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        await self._runtime.on_revoked()

    async def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        await self._runtime.on_assigned(assigned)
