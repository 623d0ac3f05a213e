"""The partitions a stage owns on this worker, and their tasks' lives.

Opening a partition fences zombies and restores its state before any record is
processed (docs/architecture.md, "Opening a partition"); a partition that
cannot be opened, or whose task failed, is paused and retried later, never
processed from a guessed position. Opening also reads the partition's note of
the record in flight (:mod:`eddy.runtime.inflight`): a record the process
died on twice in a row is dead-lettered, unprocessed.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from typing import cast

from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError, ProducerFenced

from eddy.metrics import Metrics
from eddy.pipeline.base import BroadcastLogic, Pipeline
from eddy.runtime.clients import StageClients
from eddy.runtime.inflight import InFlight, Suspect
from eddy.runtime.latency import LatencyMarkers
from eddy.runtime.output import TaskOutput
from eddy.runtime.producers import stop_within
from eddy.runtime.restarts import RecordFailedError, ReplayCarefully, RestartPolicy
from eddy.runtime.restore import restore_partition
from eddy.runtime.stores import LocalStores
from eddy.runtime.task import Task
from eddy.settings import Settings
from eddy.tables.store import PartitionStore

log = logging.getLogger(__name__)
# A task's producer is closed after its checkpoint (nothing in flight: it stops at
# once) or when the task is reopened or given up (what it still holds is not needed,
# and a lost broker would make stop() wait for ever).
PRODUCER_STOP_S = 2.0


def _unobserved() -> None:
    """Nobody watches the partitions (no query plane reads this process's stores)."""


class Partitions:
    """Tasks of the partitions assigned here; those restoring; those to retry."""

    def __init__(
        self,
        pipeline: Pipeline,
        settings: Settings,
        metrics: Metrics,
        clients: StageClients,
        stores: LocalStores,
        markers: LatencyMarkers,
    ) -> None:
        self.pipeline = pipeline
        self.name = pipeline.name
        self.settings = settings
        self.metrics = metrics
        self.clients = clients
        self.stores = stores
        self.markers = markers
        self.restarts = RestartPolicy.from_settings(settings)
        self.tasks: dict[int, Task] = {}
        self.restoring: set[int] = set()
        self._retries: dict[int, int] = {}
        self._retry_at: dict[int, float] = {}
        # Partitions to replay carefully, until these offsets commit (ReplayCarefully).
        self._careful: dict[int, dict[TopicPartition, int]] = {}
        self._inflight: dict[int, InFlight] = {}
        # Called whenever a partition starts or stops being served here, before its
        # store is touched: the query plane must stop reading a partition before a
        # restore rewrites it (service/plane/status.py).
        self.on_change: Callable[[], None] = _unobserved

    @property
    def retrying(self) -> bool:
        return bool(self._retry_at)

    def restoring_now(self, partitions: set[int]) -> None:
        self.restoring = set(partitions)
        self._retry_at.clear()
        self.metrics.restoring_partitions.labels(self.name).set(len(self.restoring))
        self.on_change()

    async def open(self, partition: int) -> None:
        """Fence, restore the changelog tail, read committed offsets, seek."""
        producer = await self.clients.task_producer(partition)
        try:
            applied = await restore_partition(
                self.settings,
                self.stores,
                partition,
                TopicPartition(self.clients.changelog, partition),
            )
            store = self.stores.open(partition)
            self.metrics.restored_records.labels(self.name).inc(applied)
            offsets = await self.clients.committed(partition)
        except BaseException:
            if producer is not self.clients.shared_producer:
                await stop_within(producer, PRODUCER_STOP_S, f"{self.name}[{partition}]")
            raise
        await self._start(partition, store, producer, offsets)
        self.restoring.discard(partition)
        self.metrics.restoring_partitions.labels(self.name).set(len(self.restoring))
        self.on_change()
        log.info(
            "%s[%d]: ready (restored %d changelog records, offsets %s)",
            self.name,
            partition,
            applied,
            {tp.topic: o for tp, o in offsets.items()},
        )

    async def _start(
        self,
        partition: int,
        store: PartitionStore,
        producer: AIOKafkaProducer,
        offsets: dict[TopicPartition, int],
        *,
        first: bool = True,
    ) -> None:
        """A task over the committed ``store``, the consumer at ``offsets``.

        Args:
            first: the partition was just opened (not :meth:`rewind`): say what its
                note of the record in flight shows.
        """
        output = TaskOutput(
            self.name, self.settings.dead_letters, self.metrics, dict(self.clients.topic_counts)
        )
        inflight = self._inflight.get(partition)
        if inflight is None:
            path = self.stores.root / f"{partition}.inflight"
            inflight = self._inflight[partition] = InFlight(path)
        careful = self._careful.get(partition)
        if careful is not None and all(offsets.get(tp, 0) >= o for tp, o in careful.items()):
            del self._careful[partition]  # committed past it since
            careful = None
        self.tasks[partition] = Task(
            pipeline=self.pipeline,
            partition=partition,
            store=store,
            producer=producer,
            exactly_once=self.settings.exactly_once,
            changelog_topic=self.clients.changelog,
            output=output,
            offsets=offsets,
            restarts=self.restarts,
            inflight=inflight,
            suspect=self._suspect(partition, inflight, offsets, announce=first),
            careful_until=careful,
        )
        for tp, offset in offsets.items():
            self.clients.consumer.seek(tp, offset)
        if self.clients.broadcast is not None:
            logic = cast(BroadcastLogic, self.tasks[partition].logic)
            await self.clients.broadcast.rewind(logic.broadcast_offsets)

    async def rewind(self, task: Task) -> None:
        """Start ``task`` again from its last commit, in place: abort its open
        transaction, and a new task over the committed store with the same producer.

        Far cheaper than :meth:`reopen` (no new producer, no changelog read, no
        offsets asked): for a failure of the records, not of Kafka. The store is at
        the last commit already (this task is its only writer), the committed
        offsets are the task's own. If Kafka fails the abort, it reopens.
        """
        partition = task.partition
        try:
            await task.abort()
        except ProducerFenced:
            await self.fenced(task)
            return
        except (TimeoutError, KafkaError, OSError) as exc:
            log.warning("%s[%d]: abort failed (%r); reopening", self.name, partition, exc)
            task.discard()
            await self.reopen(partition)
            return
        task.discard()
        self.markers.drop(partition)
        offsets = dict(task.committed_offsets)
        await self._start(partition, task.store, task.producer, offsets, first=False)

    def _suspect(
        self,
        partition: int,
        inflight: InFlight,
        offsets: dict[TopicPartition, int],
        *,
        announce: bool = True,
    ) -> tuple[TopicPartition, int] | None:
        """The record the process died on, if it is still to be processed; poison
        (dead-lettered unprocessed) if it died on it twice in a row."""
        found = inflight.recover()
        if found is None:
            return None
        sources = self.pipeline.sources
        known = 0 <= found.source < len(sources)
        tp = TopicPartition(sources[found.source], partition) if known else None
        if tp is None or offsets.get(tp, 0) > found.offset:
            inflight.forget()  # committed since, or not one of ours any more
            return None
        if announce:
            self._log_suspect(tp, found)
        if found.poison:
            self.restarts.died_twice((tp.topic, partition, found.offset))
        return tp, found.offset

    def _log_suspect(self, tp: TopicPartition, found: Suspect) -> None:
        where = f"{tp.topic}[{tp.partition}] offset {found.offset}"
        if found.poison:
            log.error(
                "%s: the process died %d times in a row while processing %s: it goes to "
                "the dead-letter topic unprocessed",
                self.name,
                found.deaths,
                where,
            )
        else:
            log.warning(
                "%s: the process died while processing %s; should it die on it again, "
                "the record is dead-lettered",
                self.name,
                where,
            )

    async def open_or_retry(self, partition: int) -> None:
        """Open a partition; if Kafka is unreachable, pause it and retry later.

        A partition that cannot be opened is never processed from a guessed
        position: it stays paused (and the worker not ready) until it opens.
        """
        self.restoring.add(partition)
        self.on_change()
        try:
            await self.open(partition)
        except (TimeoutError, KafkaError, OSError) as exc:
            delay_s = min(30.0, 2 ** self._retries.get(partition, 0))
            self._retries[partition] = self._retries.get(partition, 0) + 1
            log.warning(
                "%s[%d]: open failed (%r); retrying in %.0fs", self.name, partition, exc, delay_s
            )
            self._later(partition, delay_s)
        else:
            self._retries.pop(partition, None)
            self._retry_at.pop(partition, None)
            self.clients.pause(partition, False)

    async def reopen(self, partition: int) -> None:
        await self.close([partition])
        await self.open_or_retry(partition)

    async def fenced(self, task: Task, *, reopen: bool = True) -> None:
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
        await self.close([partition])
        if not reopen:
            return
        self.restoring.add(partition)
        self.metrics.restoring_partitions.labels(self.name).set(len(self.restoring))
        self.on_change()
        self._later(partition, self.settings.session_timeout_ms / 1000)

    async def restart_after(self, task: Task, failure: RecordFailedError) -> None:
        """Abort the task's open work; reopen it from its last commit after a delay.

        Raises:
            RecordFailedError: the restart strategy gives up (the worker stops).
        """
        delay_s = self.restarts.on_failure(failure)
        reason = type(failure.cause).__name__
        self.metrics.restarts.labels(self.name, reason).inc()
        if failure.deterministic:  # bad input, not a bug: one line, no traceback
            log.warning(
                "%s[%d]: record %s: %s; it goes to the dead-letter topic",
                self.name,
                task.partition,
                failure.record,
                failure.cause,
            )
            await self.rewind(task)  # its record is poison now: no delay, no reopen
            return
        log.warning(
            "%s[%d]: %s; restarting the partition from its last commit in %.1f s",
            self.name,
            task.partition,
            failure,
            delay_s,
            exc_info=failure.cause,
        )
        await self._restart(task, delay_s)

    async def replay_carefully(self, task: Task, failure: ReplayCarefully) -> None:
        """Something the task must write cannot be encoded: start it again from its
        last commit, at once (:meth:`rewind`), to replay carefully (restarts.py,
        :class:`ReplayCarefully`).

        A careful replay that fails so has met a value no record made (processing
        time's timers, a broadcast): the partition is retried after
        ``EDDY_RESTART_DELAY_MS``, as for any failure that is nobody's record.
        """
        partition = task.partition
        if task.careful:
            log.error(
                "%s[%d]: %s, and no record of the replay made it; retrying in %d ms",
                self.name,
                partition,
                failure.reason,
                self.settings.restart_delay_ms,
            )
            self.metrics.restarts.labels(self.name, "unwritable").inc()
            await self._restart(task, self.settings.restart_delay_ms / 1000)
            return
        until = dict(task.next_offsets)
        for tp, offset in failure.until.items():
            until[tp] = max(until.get(tp, 0), offset)
        self._careful[partition] = until
        log.warning(
            "%s[%d]: %s; replaying from the last commit to find what caused it",
            self.name,
            partition,
            failure.reason,
        )
        await self.rewind(task)

    async def _restart(self, task: Task, delay_s: float) -> None:
        task.discard()
        await self.close([task.partition])
        self.restoring.add(task.partition)
        self.on_change()
        self._later(task.partition, delay_s)

    async def retry_due(self) -> None:
        """Reopen the paused partitions whose time came, if still assigned here."""
        now = time.monotonic()
        due = [p for p, at in self._retry_at.items() if at <= now]
        owned = self.clients.assigned()
        for partition in due:
            del self._retry_at[partition]
            if partition in owned:
                await self.open_or_retry(partition)
            else:  # revoked meanwhile; the next assignment opens what is ours
                self.restoring.discard(partition)
                self.on_change()

    async def close(self, partitions: list[int]) -> None:
        closed = {p: task for p in partitions if (task := self.tasks.pop(p, None)) is not None}
        if closed:
            self.on_change()  # not served any more, before anything else happens to them
        for partition in partitions:
            self.markers.drop(partition)
            inflight = self._inflight.pop(partition, None)
            if inflight is not None:
                inflight.close()
        for partition, task in closed.items():
            task.discard()
            if task.producer is not self.clients.shared_producer:
                await stop_within(task.producer, PRODUCER_STOP_S, f"{self.name}[{partition}]")
            for gauge in (self.metrics.watermark_ms, self.metrics.watermark_lag_ms):
                with contextlib.suppress(KeyError):
                    gauge.remove(self.name, str(partition))

    def reseek(self) -> None:
        """Move the consumer back to every task's position (a fetch was dropped)."""
        for task in self.tasks.values():
            for tp, offset in task.next_offsets.items():
                self.clients.consumer.seek(tp, offset)

    def _later(self, partition: int, delay_s: float) -> None:
        self.clients.pause(partition, True)
        self._retry_at[partition] = time.monotonic() + delay_s
