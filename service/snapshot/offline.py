"""Snapshots of stores on local disk, without a worker or Kafka: for tests, the
benchmark and tools that build state directly."""

from __future__ import annotations

import shutil
import time
from collections.abc import Mapping
from pathlib import Path

from eddy.snapshot.layout import SnapshotRoot, check_id, snapshot_id_at
from eddy.snapshot.publish import PartitionCut, Published, complete, export_partition
from eddy.tables.store import PartitionStore


def snapshot_stores(
    root: SnapshotRoot,
    app_id: str,
    stores: Mapping[str, Mapping[int, PartitionStore]],
    scratch: Path,
    *,
    snapshot_id: str | None = None,
    retain: int = 5,
) -> Published:
    """Checkpoint and export ``stores`` (pipeline -> partition -> store), each
    pipeline complete with exactly the partitions given, and publish."""
    # Checked: it names the scratch folder deleted below.
    snapshot_id = check_id(snapshot_id or snapshot_id_at(int(time.time() * 1000)))
    published = Published(snapshot_id)
    try:
        for pipeline, partitions in stores.items():
            for partition, store in sorted(partitions.items()):
                path = scratch / snapshot_id / pipeline / str(partition)
                store.checkpoint(path)
                cut = PartitionCut(
                    pipeline=pipeline,
                    partition=partition,
                    path=path,
                    committed_offsets={},
                    watermark_ms=None,
                    changelog_offset=store.changelog_offset(),
                    taken_ms=int(time.time() * 1000),
                    partition_count=len(partitions),
                )
                published.parts.append(export_partition(root, app_id, snapshot_id, "offline", cut))
    finally:
        shutil.rmtree(scratch / snapshot_id, ignore_errors=True)
    published.manifest, published.missing = complete(root, app_id, snapshot_id, retain)
    return published
