"""Checkpoints of a stage's tasks: outputs, changelog and offsets commit together.

Under exactly-once each task commits its own Kafka transaction (its producer is
its partition's), concurrently; at-least-once commits every task's offsets with
the group's consumer. A checkpoint that fails discards the task, which is then
reopened from what Kafka committed (docs/architecture.md, "The checkpoint"); one
whose state cannot be encoded starts again from its last commit to replay
carefully, which finds the record that caused it
(:class:`~eddy.runtime.restarts.ReplayCarefully`), while the other tasks commit.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from aiokafka.errors import KafkaError, ProducerFenced

from eddy.eventtime import MIN_WATERMARK, Clock
from eddy.metrics import Metrics
from eddy.runtime.clients import StageClients
from eddy.runtime.gauges import StateGauges
from eddy.runtime.latency import LatencyMarkers
from eddy.runtime.partitions import Partitions
from eddy.runtime.restarts import ReplayCarefully
from eddy.runtime.task import Task
from eddy.settings import Settings

log = logging.getLogger(__name__)
# State size and lag are estimates; once a second is plenty and keeps commits cheap.
GAUGES_EVERY_S = 1.0


class Checkpointer:
    """Commits every task with work, every ``EDDY_COMMIT_INTERVAL_MS``."""

    def __init__(
        self,
        settings: Settings,
        metrics: Metrics,
        clients: StageClients,
        partitions: Partitions,
        markers: LatencyMarkers,
        clock: Clock,
    ) -> None:
        self.settings = settings
        self.metrics = metrics
        self.clients = clients
        self.partitions = partitions
        self.markers = markers
        self.clock = clock
        self.name = partitions.name
        self._gauges = StateGauges(metrics, self.name)
        self._gauges_at = 0.0
        self.last_commit = time.monotonic()
        # Wall-clock ms of each partition's last checkpoint here (GET /jobs).
        self.last_commit_ms: dict[int, int] = {}
        # Called after a checkpoint wrote its stores (the query plane's status).
        self.on_commit: Callable[[], None] = lambda: None

    @property
    def deadline_s(self) -> float:
        """When the next checkpoint is due (``time.monotonic()``)."""
        return self.last_commit + self.settings.commit_interval_ms / 1000

    def due(self) -> bool:
        return time.monotonic() >= self.deadline_s

    async def commit_all(self, *, reopen_failed: bool = True) -> None:
        """Checkpoint every task with work.

        Args:
            reopen_failed: reopen a task whose checkpoint failed, from what Kafka
                committed. False when the partitions are being given up anyway
                (revoke, stop): reopening would only fence our own producer.
        """
        self.last_commit = time.monotonic()
        tasks = [task for task in self.partitions.tasks.values() if task.has_work]
        if not tasks:
            return
        started = time.perf_counter()
        if self.settings.exactly_once:
            await asyncio.gather(*(self._commit_one(task, reopen_failed) for task in tasks))
        else:
            await self._commit_at_least_once(tasks, reopen_failed)
        self.metrics.commit_seconds.labels(self.name).observe(time.perf_counter() - started)
        self.on_commit()
        self._update_watermark_metrics()
        if time.monotonic() - self._gauges_at >= GAUGES_EVERY_S:
            self._gauges_at = time.monotonic()
            stores = self.partitions.stores
            owned = {p: s for p in self.partitions.tasks if (s := stores.get(p)) is not None}
            self._gauges.refresh(self.clients.consumer, self.partitions.tasks, owned)

    @property
    def transaction_deadline_s(self) -> float:
        """How long one task's checkpoint may take under exactly-once.

        A producer whose transaction coordinator or a partition leader is lost (a
        dead broker, a cut link) retries for ever. Past a third of the transaction
        timeout the checkpoint is given up and the task reopened with a new
        producer, which looks its coordinator up anew and fences the old one: the
        rest is left for it to commit before the broker would abort anyway. A
        healthy checkpoint takes a few round trips, well under a second.
        """
        return self.settings.transaction_timeout_ms / 3 / 1000

    async def _commit_one(self, task: Task, reopen_failed: bool) -> None:
        try:
            await asyncio.wait_for(self._checkpoint(task), self.transaction_deadline_s)
        except ProducerFenced:
            self.metrics.commit_failures.labels(self.name).inc()
            await self.partitions.fenced(task, reopen=reopen_failed)
            return
        except ReplayCarefully as failure:
            await self._unwritable(task, failure, reopen_failed)
            return
        except (TimeoutError, KafkaError, OSError) as exc:
            log.warning(
                "%s[%d]: checkpoint failed (%s); reopening from Kafka",
                self.name,
                task.partition,
                f"not done within {self.transaction_deadline_s:.1f} s: a broker is unreachable"
                if isinstance(exc, TimeoutError)
                else repr(exc),
            )
            self.metrics.commit_failures.labels(self.name).inc()
            task.discard()
            if reopen_failed:
                await self.partitions.reopen(task.partition)
            return
        self._finish(task)
        self.metrics.commits.labels(self.name).inc()

    async def _checkpoint(self, task: Task) -> None:
        await task.prepare_commit()
        await task.commit_transaction(self.clients.group_id)

    async def _commit_at_least_once(self, tasks: list[Task], reopen_failed: bool) -> None:
        unwritable: dict[Task, ReplayCarefully] = {}
        try:
            prepared = await asyncio.gather(
                *(task.prepare_commit() for task in tasks), return_exceptions=True
            )
            outcomes = dict(zip(tasks, prepared, strict=True))
            unwritable = {t: o for t, o in outcomes.items() if isinstance(o, ReplayCarefully)}
            tasks = [task for task in tasks if task not in unwritable]
            failed = [o for t in tasks if isinstance(o := outcomes[t], BaseException)]
            if failed:
                raise failed[0]
            offsets = {tp: off for task in tasks for tp, off in task.next_offsets.items()}
            if offsets:  # none when every task's state was unwritable
                await self.clients.consumer.commit(offsets)
        except (TimeoutError, KafkaError, OSError) as exc:
            log.warning("%s: checkpoint failed (%r); reopening from Kafka", self.name, exc)
            self.metrics.commit_failures.labels(self.name).inc(len(tasks))
            for task in tasks:
                task.discard()
                if reopen_failed:
                    await self.partitions.reopen(task.partition)
            return
        finally:
            for task, failure in unwritable.items():
                await self._unwritable(task, failure, reopen_failed)
        for task in tasks:
            self._finish(task)
        if tasks:
            self.metrics.commits.labels(self.name).inc(len(tasks))

    async def _unwritable(self, task: Task, failure: ReplayCarefully, reopen: bool) -> None:
        """The task's state cannot be encoded: replay carefully to find what did it."""
        self.metrics.commit_failures.labels(self.name).inc()
        if reopen:
            await self.partitions.replay_carefully(task, failure)
        else:  # given up anyway: the next owner's checkpoint fails and replays so
            task.discard()

    def _finish(self, task: Task) -> None:
        """The local write; the checkpoint's outputs are visible now: observe markers."""
        task.finish_commit()
        now_ms = self.clock.now_ms()
        self.last_commit_ms[task.partition] = now_ms
        for (topic, partition), seconds in self.markers.observe(task.partition, now_ms):
            self.metrics.latency_markers.labels(self.name, topic, str(partition)).observe(seconds)

    def _update_watermark_metrics(self) -> None:
        now_ms = self.clock.now_ms()
        for partition, task in self.partitions.tasks.items():
            watermark = task.logic.watermark_ms
            if watermark == MIN_WATERMARK:
                continue
            self.metrics.watermark_ms.labels(self.name, str(partition)).set(watermark)
            self.metrics.watermark_lag_ms.labels(self.name, str(partition)).set(now_ms - watermark)
