"""Rebuilding a partition's local state from its changelog."""

from __future__ import annotations

import logging
from pathlib import Path

from aiokafka import AIOKafkaConsumer, TopicPartition

from service.settings import Settings
from tables.store import PartitionStore

log = logging.getLogger(__name__)
APPLY_CHUNK = 10_000


async def restore_partition(
    settings: Settings, store_path: Path, store: PartitionStore | None, tp: TopicPartition
) -> tuple[PartitionStore, int]:
    """Bring ``store`` up to the end of changelog partition ``tp``.

    Only the tail after the locally recorded offset is read. If the local state is
    ahead of the changelog (the topic was recreated) or older than its start, it is
    wiped and rebuilt from the beginning.

    Returns:
        The (possibly new) store and the number of changelog records applied.
    """
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.bootstrap_servers,
        client_id=f"{settings.app_id}-restore-{settings.worker_id}",
        group_id=None,
        enable_auto_commit=False,
        # Aborted transactions never reached a committed input offset: skip them.
        isolation_level="read_committed" if settings.exactly_once else "read_uncommitted",
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=4 * 1024 * 1024,
    )
    await consumer.start()
    try:
        consumer.assign([tp])
        end = (await consumer.end_offsets([tp]))[tp]
        begin = (await consumer.beginning_offsets([tp]))[tp]
        if store is None:
            store = PartitionStore(store_path)
        local = store.changelog_offset()
        if local >= end or (local >= 0 and local + 1 < begin):
            log.warning(
                "local state of %s (offset %d) does not match the changelog [%d, %d): rebuilding",
                tp,
                local,
                begin,
                end,
            )
            store.close()
            PartitionStore.destroy(store_path)
            store = PartitionStore(store_path)
            local = -1
        start = max(local + 1, begin)
        if start >= end:
            return store, 0
        consumer.seek(tp, start)
        applied = 0
        while await consumer.position(tp) < end:
            batch = await consumer.getmany(tp, timeout_ms=500, max_records=APPLY_CHUNK)
            records = batch.get(tp, [])
            if records:
                store.write(((r.key, r.value) for r in records), records[-1].offset)
                applied += len(records)
        return store, applied
    finally:
        await consumer.stop()
