"""Resuming from a savepoint: rebuild each pipeline's changelog and input offsets.

Run before the workers start (``python -m eddy worker --from-savepoint ID``, or
``python -m eddy savepoint restore ID`` as a one-off job before a multi-worker
deployment starts). For each pipeline and each of its (current) partitions, one
Kafka transaction of the partition's own transactional id (which fences any
worker still holding it) writes:

1. tombstones for every key in the changelog partition that the savepoint does
   not hold (state written after the savepoint, or of keys that moved away);
2. the savepoint's state for that partition, migrated to the declared versions;
3. the savepoint's input offsets, as the pipeline's committed consumer offsets.

So the changelog equals the savepoint and the offsets match it, atomically per
partition; workers then restore local RocksDB state from the changelog as after
any restart (a local copy is merely behind, and catches up through the
tombstones). The same code rebuilds the state of a new app id, or on another
Kafka cluster, where the changelog topics start empty. A restore that fails half
way can be run again: it rewrites every partition from the savepoint.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.admin import NewPartitions

from eddy.errors import EddyError
from eddy.kafka_clients import connection_kwargs
from eddy.pipeline.base import Pipeline
from eddy.redact import redact
from eddy.runtime.restore import changelog_reader, read_to_end
from eddy.savepoint import catalog
from eddy.savepoint.plan import (
    PipelinePlan,
    RestorePlan,
    SavepointIncompatibleError,
    check_rescale,
    migrate_value,
    plan_restore,
    target_partitions,
)
from eddy.settings import Settings
from eddy.snapshot.layout import BrokenSnapshotError, SnapshotRoot
from eddy.tables.export import raw_value
from eddy.topics import COMPACTED, TopicSpec, admin_client, changelog_topic, ensure_topics
from eddy.topics import partition_counts as topic_partition_counts

log = logging.getLogger(__name__)
# The changelog key marking which savepoint a pipeline's state came from. Its empty
# table name makes it local bookkeeping: no table, no export, no REST view.
RESTORED_FROM = b"\x00restored_from"


class ActiveWorkersError(EddyError):
    """Workers of the app are running: a restore under them would be overwritten."""


@dataclass
class PipelineRestored:
    name: str
    saved_partitions: int
    partitions: int
    rows: int = 0
    tombstones: int = 0
    migrated: int = 0
    skipped: bool = False  # already restored from this savepoint


@dataclass
class RestoreReport:
    savepoint_id: str
    pipelines: list[PipelineRestored] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)


async def restore(
    settings: Settings,
    pipelines: Sequence[Pipeline],
    root: SnapshotRoot,
    manifest: Mapping[str, Any],
    *,
    allow_non_restored_state: bool = False,
    once: bool = False,
    group_ids: Mapping[str, str] | None = None,
) -> RestoreReport:
    """Make ``settings.app_id``'s state and offsets those of the savepoint.

    Args:
        once: skip pipelines already restored from this savepoint (a worker started
            with ``--from-savepoint`` that restarts must not rewind again).
        group_ids: the consumer group of each stage whose agent names its own
            (``BuiltApp.group_id_of``); the others read in ``<app id>.<stage>``.

    Raises:
        SavepointIncompatibleError: the savepoint does not fit the code or topics.
        BrokenSnapshotError: a file it lists is missing, outside its root or broken.
        ActiveWorkersError: a pipeline's consumer group has members.
    """
    declared = {p.name: p.state_schemas for p in pipelines}
    plan = plan_restore(manifest, declared, allow_non_restored_state=allow_non_restored_state)
    await _check_files(root, manifest, plan)
    by_name = {p.name: p for p in pipelines}
    report = RestoreReport(str(manifest["snapshot_id"]), dropped=plan.dropped)
    for name, pipeline_plan in plan.pipelines.items():
        report.pipelines.append(
            await _restore_pipeline(
                settings,
                by_name[name],
                root,
                manifest,
                plan,
                pipeline_plan,
                once=once,
                group_id=(group_ids or {}).get(name, f"{settings.app_id}.{name}"),
            )
        )
    await asyncio.to_thread(catalog.clear_stopped, settings)
    return report


async def _restore_pipeline(
    settings: Settings,
    pipeline: Pipeline,
    root: SnapshotRoot,
    manifest: Mapping[str, Any],
    plan: RestorePlan,
    pipeline_plan: PipelinePlan,
    *,
    once: bool,
    group_id: str,
) -> PipelineRestored:
    name = pipeline.name
    changelog = changelog_topic(settings, name)
    saved_count = pipeline_plan.saved_partitions
    count = await _input_partitions(settings, pipeline, saved_count)
    check_rescale(manifest, name, count)
    await _check_idle(settings, group_id, name)
    await _changelog_with(settings, changelog, count)
    done = PipelineRestored(name, saved_count, count)
    marker = str(manifest["snapshot_id"]).encode()
    if once and await _restored_from(settings, changelog) == marker:
        log.info("%s: already restored from savepoint %s; not again", name, marker.decode())
        done.skipped = True
        return done
    state = await asyncio.to_thread(_read_state, root, manifest, pipeline_plan, count, done)
    offsets = _offsets(manifest, pipeline, saved_count, count)
    for partition in range(count):
        await _write_partition(
            settings,
            name,
            TopicPartition(changelog, partition),
            state[partition],
            {tp: o for tp, o in offsets.items() if tp.partition == partition},
            group_id,
            marker,
            done,
        )
    log.info(
        "%s: restored %d rows into %d partitions (saved with %d) from savepoint %s",
        name,
        done.rows,
        count,
        saved_count,
        marker.decode(),
    )
    return done


def _read_state(
    root: SnapshotRoot,
    manifest: Mapping[str, Any],
    plan: PipelinePlan,
    count: int,
    done: PipelineRestored,
) -> dict[int, dict[bytes, bytes]]:
    """The saved rows of the planned tables, as changelog records per new partition."""
    state: dict[int, dict[bytes, bytes]] = defaultdict(dict)
    base = root.snapshot_dir(manifest["app_id"], manifest["snapshot_id"])
    for part in manifest["parts"]:
        if part["pipeline"] != plan.name:
            continue
        for table, info in part["tables"].items():
            table_plan = plan.tables.get(table)
            if table_plan is None:
                continue  # dropped (--allow-non-restored-state)
            prefix = bytes([len(table.encode())]) + table.encode()
            for file in info["files"]:
                for key, raw_key, value in _saved_rows(root, f"{base}/{file}", table):
                    value = migrate_value(table_plan, value)
                    done.migrated += table_plan.migrates
                    targets = target_partitions(
                        table, key, part["partition"], plan.saved_partitions, count
                    )
                    for target in targets:
                        state[target][prefix + raw_key] = value
                        done.rows += 1
    return state


def _saved_rows(root: SnapshotRoot, path: str, table: str) -> list[tuple[str, bytes, bytes]]:
    """``(key, raw key, stored value)`` of every row of one saved file.

    Raises:
        BrokenSnapshotError: the file is missing, outside the root, or not what the
            export writes; the restore stops there, naming the file.
    """
    # pyarrow is loaded with the savepoint's root (layout.py), not with Eddy.
    import pyarrow.parquet as pq

    try:
        rows = pq.read_table(
            root.confine(path), filesystem=root.fs, columns=["key", "value", "raw_key"]
        ).to_pylist()
        saved = [(row["key"], row["raw_key"], raw_value(table, row["value"])) for row in rows]
    except (OSError, ValueError, KeyError, TypeError) as exc:  # ArrowInvalid: a ValueError
        raise BrokenSnapshotError(
            f"savepoint file {root.url_of(path)} cannot be restored ({redact(str(exc))}); "
            "nothing of this pipeline was written: resume from another savepoint"
        ) from None
    for key, raw_key, _ in saved:
        if not isinstance(key, str) or not isinstance(raw_key, bytes):
            raise BrokenSnapshotError(
                f"savepoint file {root.url_of(path)} has a row without its key; nothing of "
                "this pipeline was written: resume from another savepoint"
            )
    return saved


async def _check_files(root: SnapshotRoot, manifest: Mapping[str, Any], plan: RestorePlan) -> None:
    """Every file the restore will read is under the root and there, before
    anything is written: a savepoint with one missing is refused whole."""
    import pyarrow.fs as pafs

    for name, pipeline_plan in plan.pipelines.items():
        for table in pipeline_plan.tables:
            for path in root.files(dict(manifest), name, table):
                info = await asyncio.to_thread(root.fs.get_file_info, path)
                if info.type != pafs.FileType.File:
                    raise BrokenSnapshotError(
                        f"savepoint {manifest['snapshot_id']} lists {root.url_of(path)}, which "
                        "is not there; nothing was written: resume from another savepoint"
                    )


def _offsets(
    manifest: Mapping[str, Any], pipeline: Pipeline, saved_count: int, count: int
) -> dict[TopicPartition, int]:
    """Input offsets to commit: the savepoint's; partitions added since start at 0
    (everything in them was written after the savepoint, by the new partitioning)."""
    offsets = {TopicPartition(t, p): 0 for t in pipeline.sources for p in range(count)}
    for part in manifest["parts"]:
        if part["pipeline"] == pipeline.name:
            for topic, offset in part["committed_offsets"].items():
                if topic in pipeline.sources:
                    offsets[TopicPartition(topic, part["partition"])] = int(offset)
    return offsets


async def _write_partition(
    settings: Settings,
    pipeline: str,
    tp: TopicPartition,
    state: Mapping[bytes, bytes],
    offsets: dict[TopicPartition, int],
    group_id: str,
    marker: bytes,
    done: PipelineRestored,
) -> None:
    stale = [key for key in await _live_keys(settings, tp) if key not in state]
    producer = AIOKafkaProducer(
        **connection_kwargs(settings),
        client_id=f"{group_id}-restore",
        enable_idempotence=True,
        acks="all",
        linger_ms=5,
        transactional_id=f"{settings.app_id}-{pipeline}-{tp.partition}",
        transaction_timeout_ms=settings.transaction_timeout_ms,
    )
    await producer.start()  # fences whoever held the partition's transactional id
    try:
        async with producer.transaction():
            futures = []
            for key in stale:
                futures.append(await producer.send(tp.topic, None, key=key, partition=tp.partition))
            for key, value in state.items():
                futures.append(
                    await producer.send(tp.topic, value, key=key, partition=tp.partition)
                )
            if tp.partition == 0:
                futures.append(
                    await producer.send(tp.topic, marker, key=RESTORED_FROM, partition=0)
                )
            await asyncio.gather(*futures)
            if offsets:
                await producer.send_offsets_to_transaction(offsets, group_id)
    finally:
        await producer.stop()
    done.tombstones += len(stale)


async def _latest(settings: Settings, tp: TopicPartition) -> dict[bytes, bytes | None]:
    """The latest value (None: a tombstone) of every key in changelog partition ``tp``."""
    consumer = changelog_reader(settings, "savepoint-restore")
    await consumer.start()
    latest: dict[bytes, bytes | None] = {}
    try:
        consumer.assign([tp])
        end = (await consumer.end_offsets([tp]))[tp]
        await consumer.seek_to_beginning(tp)
        async for records in read_to_end(consumer, tp, end):
            latest.update((r.key, r.value) for r in records if r.key is not None)
    finally:
        await consumer.stop()
    return latest


async def _live_keys(settings: Settings, tp: TopicPartition) -> set[bytes]:
    """Keys whose latest changelog record is not a tombstone."""
    latest = await _latest(settings, tp)
    return {key for key, value in latest.items() if value is not None} - {RESTORED_FROM}


async def _restored_from(settings: Settings, changelog: str) -> bytes | None:
    return (await _latest(settings, TopicPartition(changelog, 0))).get(RESTORED_FROM)


async def _input_partitions(settings: Settings, pipeline: Pipeline, saved_count: int) -> int:
    """The inputs' partition count now (created with the savepoint's if missing)."""
    specs = [TopicSpec(t, saved_count, exact_partitions=False) for t in pipeline.sources]
    counts = await ensure_topics(settings, specs)
    found = {counts[t] for t in pipeline.sources}
    if len(found) != 1:
        raise SavepointIncompatibleError(
            f"inputs of {pipeline.name} must be co-partitioned; they have {counts}"
        )
    return found.pop()


async def _changelog_with(settings: Settings, changelog: str, count: int) -> None:
    """The changelog topic, with one partition per input partition."""
    admin = admin_client(settings)
    await admin.start()
    try:
        existing = (await topic_partition_counts(admin, [changelog])).get(changelog)
        if existing is not None and existing < count:
            await admin.create_partitions({changelog: NewPartitions(total_count=count)})
    finally:
        await admin.close()
    await ensure_topics(settings, [TopicSpec(changelog, count, COMPACTED)])


async def _check_idle(settings: Settings, group_id: str, stage: str) -> None:
    admin = admin_client(settings)
    await admin.start()
    try:
        responses = await admin.describe_consumer_groups([group_id])
    finally:
        await admin.close()
    for response in responses:
        for group in response.to_object()["groups"]:
            if group["group"] == group_id and group["members"]:
                raise ActiveWorkersError(
                    f"{len(group['members'])} worker(s) of {settings.app_id} are running "
                    f"{stage}: stop them first "
                    "(python -m eddy stop --savepoint), then resume from the savepoint"
                )
