"""The partitions a stage owns on this worker, and their tasks' lives.

Opening a partition fences zombies and restores its state before any record is
processed (docs/architecture.md, "Opening a partition"); a partition that
cannot be opened, or whose task failed, is paused and retried later, never
processed from a guessed position.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from typing import cast

from aiokafka import TopicPartition
from aiokafka.errors import KafkaError

from service.metrics import Metrics
from service.pipeline.base import BroadcastLogic, Pipeline
from service.runtime.clients import StageClients
from service.runtime.latency import LatencyMarkers
from service.runtime.output import TaskOutput
from service.runtime.restarts import RecordFailedError, RestartPolicy
from service.runtime.restore import restore_partition
from service.runtime.stores import LocalStores
from service.runtime.task import Task
from service.settings import Settings

log = logging.getLogger(__name__)


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
                await producer.stop()
            raise
        output = TaskOutput(
            self.name, self.settings.dead_letters, self.metrics, dict(self.clients.topic_counts)
        )
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
        )
        for tp, offset in offsets.items():
            self.clients.consumer.seek(tp, offset)
        if self.clients.broadcast is not None:
            logic = cast(BroadcastLogic, self.tasks[partition].logic)
            await self.clients.broadcast.rewind(logic.broadcast_offsets)
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
        log.warning(
            "%s[%d]: %s; restarting the partition from its last commit in %.1f s",
            self.name,
            task.partition,
            failure,
            delay_s,
            exc_info=failure.cause,
        )
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
        for partition, task in closed.items():
            task.discard()
            if task.producer is not self.clients.shared_producer:
                try:
                    await task.producer.stop()
                except KafkaError:
                    log.debug("producer of %s[%d] did not stop cleanly", self.name, partition)
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
