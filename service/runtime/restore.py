"""Rebuilding a partition's local state from its changelog."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition

from eddy.kafka_clients import connection_kwargs
from eddy.runtime.stores import LocalStores
from eddy.settings import Settings
from eddy.tables.store import Restoring

log = logging.getLogger(__name__)
APPLY_CHUNK = 10_000
# How long one fetch of a changelog waits for records. Short, because the last
# offset of a transactional changelog is a commit marker, which no fetch returns
# as a record: the read of the final offset waits out the whole timeout, and a
# 500 ms one made every partition's restore (and every savepoint restore) half a
# second slower than its records.
POLL_MS = 20


def changelog_reader(settings: Settings, purpose: str) -> AIOKafkaConsumer:
    """A group-less consumer for changelogs; aborted transactions stay invisible."""
    return AIOKafkaConsumer(
        **connection_kwargs(settings),
        client_id=f"{settings.app_id}-{purpose}-{settings.worker_id}",
        group_id=None,
        enable_auto_commit=False,
        isolation_level="read_committed" if settings.exactly_once else "read_uncommitted",
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=4 * 1024 * 1024,
        # A changelog leader that stopped answering is replaced after the broker's
        # session timeout; waiting aiokafka's 40 s for it would hold the partition.
        request_timeout_ms=10_000,
    )


def usable(local: int, begin: int, end: int) -> bool:
    """Whether a local copy at changelog offset ``local`` can continue from the log
    ``[begin, end)``: not ahead of it (the topic was recreated) nor older than its start."""
    return local < end and not (local >= 0 and local + 1 < begin)


async def check_local(
    consumer: AIOKafkaConsumer, stores: LocalStores, partition: int, tp: TopicPartition
) -> tuple[int, int]:
    """Open the partition's store, wiping it if it cannot continue from the changelog.

    Returns:
        The offset to read the changelog from, and the changelog's end offset.
    """
    end = (await consumer.end_offsets([tp]))[tp]
    begin = (await consumer.beginning_offsets([tp]))[tp]
    local = stores.open(partition).changelog_offset()
    if not usable(local, begin, end):
        log.warning(
            "local state of %s (offset %d) does not match the changelog [%d, %d): rebuilding",
            tp,
            local,
            begin,
            end,
        )
        stores.wipe(partition)
        local = -1
    return max(local + 1, begin), end


async def restore_partition(
    settings: Settings, stores: LocalStores, partition: int, tp: TopicPartition
) -> int:
    """Bring the partition's store up to the end of changelog partition ``tp``.

    Only the tail after the locally recorded offset is read.

    Returns:
        The number of changelog records applied.
    """
    consumer = changelog_reader(settings, "restore")
    await consumer.start()
    try:
        consumer.assign([tp])
        start, end = await check_local(consumer, stores, partition, tp)
        if start >= end:
            return 0
        consumer.seek(tp, start)
        # A restore that stops midway (error, crash, revocation) leaves the store at
        # the offset of its last complete batch; the next one continues from there.
        with stores.open(partition).restoring() as restoring:
            applied = await _apply(consumer, tp, end, restoring)
            # In a thread: the other partitions' restores go on while this one's
            # memtable is written out.
            await asyncio.to_thread(restoring.flush)
        return applied
    finally:
        await consumer.stop()


async def read_to_end(
    consumer: AIOKafkaConsumer, tp: TopicPartition, end: int
) -> AsyncIterator[list[ConsumerRecord[bytes, bytes]]]:
    """The records of ``tp`` from the consumer's position up to offset ``end``, in
    chunks of at most :data:`APPLY_CHUNK`; it ends when the position reaches ``end``
    (past any commit marker), not when a fetch times out."""
    while await consumer.position(tp) < end:
        batch = await consumer.getmany(tp, timeout_ms=POLL_MS, max_records=APPLY_CHUNK)
        records = batch.get(tp)
        if records:
            yield records


async def _apply(
    consumer: AIOKafkaConsumer, tp: TopicPartition, end: int, restoring: Restoring
) -> int:
    """Write the changelog from the consumer's position up to ``end`` into the store."""
    applied = 0
    async for records in read_to_end(consumer, tp, end):
        restoring.write([(r.key, r.value) for r in records], records[-1].offset)
        applied += len(records)
    return applied
