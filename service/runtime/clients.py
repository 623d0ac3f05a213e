"""The Kafka clients of one stage: its topics, its consumer in the group, its
producers (one transactional producer per input partition under exactly-once,
one shared producer otherwise) and its broadcast reader."""

from __future__ import annotations

import asyncio
import logging

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition

from eddy.errors import TopicMismatchError
from eddy.kafka_clients import connection_kwargs
from eddy.pipeline.base import Pipeline
from eddy.runtime.assignor import EddyAssignor
from eddy.runtime.broadcast import BroadcastInput
from eddy.runtime.offsets import committed_offsets
from eddy.runtime.producers import stop_within
from eddy.settings import Settings
from eddy.topics import COMPACTED, TopicSpec, changelog_topic, ensure_topics

log = logging.getLogger(__name__)
# aiokafka's 40 s keeps a worker waiting that long on a broker that stopped
# answering (hung, or behind a cut link) before it looks for another. Not lower:
# a JoinGroup is held by the coordinator until the others rejoin, and they may
# first finish a checkpoint (a third of the transaction timeout at most).
CONSUMER_REQUEST_TIMEOUT_MS = 20_000

# How long opening a partition waits for the group's committed offsets before it
# pauses the partition and retries later (service/runtime/partitions.py).
COMMITTED_TIMEOUT_S = 30.0
# How long the broker holds a fetch that finds no new records (aiokafka: 500 ms).
# A seek (a task started again from its last commit, a reopened partition) waits
# for the fetch in flight before asking from the new position, so on a quiet input
# this is what a replay waits for its first records. 100 ms, the loop's own fetch
# wait: an idle consumer asks 10 times a second instead of twice.
FETCH_MAX_WAIT_MS = 100


class StageClients:
    """Creates, starts and stops a stage's clients; answers what they know."""

    def __init__(
        self,
        pipeline: Pipeline,
        settings: Settings,
        assignor: EddyAssignor,
        group_id: str | None = None,
    ) -> None:
        self.pipeline = pipeline
        self.settings = settings
        # The agent's own group if it named one (App.stream/agent group_id).
        self.group_id = group_id or f"{settings.app_id}.{pipeline.name}"
        self.changelog = changelog_topic(settings, pipeline.name)
        self.partition_count = 0
        self.topic_counts: dict[str, int] = {}
        self.shared_producer: AIOKafkaProducer | None = None
        self.broadcast: BroadcastInput | None = None
        self._assignor = assignor
        self._consumer: AIOKafkaConsumer | None = None

    @property
    def consumer(self) -> AIOKafkaConsumer:
        if self._consumer is None:
            raise RuntimeError("the stage's clients are not started")
        return self._consumer

    async def prepare(self) -> None:
        """Check the topics (creating what is missing) and start the producers;
        the consumer joins its group in :meth:`subscribe`.

        Raises:
            TopicMismatchError: the inputs are not co-partitioned.
        """
        counts = await ensure_topics(self.settings, self._topic_specs(None))
        sources = self.pipeline.sources
        self.partition_count = counts[sources[0]]
        mismatched = [s for s in sources if counts[s] != self.partition_count]
        if mismatched:
            raise TopicMismatchError(
                f"inputs of {self.pipeline.name} must be co-partitioned; {mismatched} differ "
                f"from {sources[0]} ({self.partition_count} partitions)"
            )
        self.topic_counts = await ensure_topics(
            self.settings, self._topic_specs(self.partition_count)
        )
        if not self.settings.exactly_once:
            self.shared_producer = self.producer(transactional_id=None)
            await self.shared_producer.start()
        self._consumer = self._new_consumer()
        broadcast_topic = getattr(self.pipeline, "broadcast_topic", None)
        if broadcast_topic is not None:
            self.broadcast = BroadcastInput(self.settings, broadcast_topic)
            await self.broadcast.start(counts.get(broadcast_topic, 1))

    async def subscribe(self, listener: ConsumerRebalanceListener) -> None:
        """Join the group. Local state must be known by now: the assignor reports
        it when the consumer joins."""
        await self.consumer.start()
        self.consumer.subscribe(list(self.pipeline.sources), listener=listener)

    def _new_consumer(self) -> AIOKafkaConsumer:
        settings = self.settings
        return AIOKafkaConsumer(
            **connection_kwargs(settings),
            group_id=self.group_id,
            client_id=f"{self.group_id}-{settings.worker_id}",
            enable_auto_commit=False,
            isolation_level="read_committed",
            auto_offset_reset="earliest",
            partition_assignment_strategy=(self._assignor,),
            session_timeout_ms=settings.session_timeout_ms,
            heartbeat_interval_ms=max(100, settings.session_timeout_ms // 4),
            max_poll_interval_ms=300_000,
            rebalance_timeout_ms=60_000,
            fetch_max_wait_ms=FETCH_MAX_WAIT_MS,
            request_timeout_ms=CONSUMER_REQUEST_TIMEOUT_MS,
        )

    async def stop_consumer(self, timeout_s: float) -> None:
        """Leave the group (it may wait for a rebalance in progress to finish).

        Past ``timeout_s`` (its coordinator unreachable) the worker goes without
        saying so: the group notices after a session timeout, as after a crash.
        """
        if self._consumer is not None:
            try:
                await asyncio.wait_for(self._consumer.stop(), timeout_s)
            except TimeoutError:
                log.warning(
                    "%s: could not leave the group within %.0f s", self.pipeline.name, timeout_s
                )

    async def stop_producers(self, timeout_s: float) -> None:
        name = self.pipeline.name
        if self.shared_producer is not None:
            await stop_within(self.shared_producer, timeout_s, name)
        if self.broadcast is not None:
            await self.broadcast.stop()

    def producer(self, transactional_id: str | None) -> AIOKafkaProducer:
        return AIOKafkaProducer(
            **connection_kwargs(self.settings),
            client_id=f"{self.group_id}-{self.settings.worker_id}",
            enable_idempotence=True,
            acks="all",
            linger_ms=5,
            transactional_id=transactional_id,
            transaction_timeout_ms=self.settings.transaction_timeout_ms,
            # A broker that stops answering (hung, or behind a cut link) holds a
            # request until this passes: aiokafka's 40 s would outlast the
            # transaction, and with it the time to find a new coordinator.
            request_timeout_ms=max(2_000, self.settings.transaction_timeout_ms // 4),
        )

    async def task_producer(self, partition: int) -> AIOKafkaProducer:
        """The producer of ``partition``'s task, started. Under exactly-once a new
        transactional producer ``<app>-<stage>-<partition>``: starting it sends
        InitProducerId, which fences any zombie holding the id and aborts its open
        transaction, so the offsets and changelog read next are final."""
        if self.shared_producer is not None:
            return self.shared_producer
        name = f"{self.settings.app_id}-{self.pipeline.name}-{partition}"
        producer = self.producer(name)
        await producer.start()
        return producer

    async def committed(self, partition: int) -> dict[TopicPartition, int]:
        """The group's committed offsets of ``partition`` (the beginning if none)."""
        consumer = self.consumer
        tps = [TopicPartition(topic, partition) for topic in self.pipeline.sources]
        # Not consumer.committed(): it takes a coordinator that is still loading
        # the group's offsets for "nothing committed" (service/runtime/offsets.py).
        committed = await committed_offsets(consumer, tps, COMMITTED_TIMEOUT_S)
        # The beginnings only when needed: asking a partition leader that stopped
        # answering waits out the whole request timeout, however often it is retried.
        missing = [tp for tp in tps if tp not in committed]
        beginnings = await consumer.beginning_offsets(missing) if missing else {}
        return {tp: committed.get(tp, beginnings.get(tp, 0)) for tp in tps}

    def pause(self, partition: int, paused: bool) -> None:
        tps = [TopicPartition(topic, partition) for topic in self.pipeline.sources]
        if paused:
            self.consumer.pause(*tps)
        else:
            self.consumer.resume(*tps)

    def assigned(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

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
