"""Exporting checkpointed partitions to Parquet and publishing complete snapshots.

Runs in a thread (it is all blocking I/O), never inside the worker's event loop.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eddy.snapshot.layout import (
    MANIFEST,
    PARTS,
    BrokenSnapshotError,
    SnapshotRoot,
    is_id,
    time_of,
)
from eddy.snapshot.manifest import check_manifest, check_part, check_segment, relative_folder
from eddy.tables.export import SCHEMA_VERSION, read_checkpoint, schema

if TYPE_CHECKING:
    import pyarrow.parquet as pq

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PartitionCut:
    """One partition's state as of a commit boundary, checkpointed at ``path``."""

    pipeline: str
    partition: int
    path: Path
    committed_offsets: dict[str, int]
    watermark_ms: int | None
    changelog_offset: int
    taken_ms: int
    # Partitions of this pipeline: a snapshot is complete when it has all of them.
    partition_count: int
    # Savepoints: each table's schema version, and the input's end offsets at the
    # cut (a savepoint with input left unprocessed cannot move to more partitions).
    table_versions: dict[str, int] = field(default_factory=dict)
    end_offsets: dict[str, int] = field(default_factory=dict)


@dataclass
class Published:
    """What one worker contributed to a snapshot, and whether that completed it."""

    snapshot_id: str
    parts: list[dict[str, Any]] = field(default_factory=list)
    manifest: dict[str, Any] | None = None
    missing: list[str] = field(default_factory=list)


def export_partition(
    root: SnapshotRoot, app_id: str, snapshot_id: str, worker_id: str, cut: PartitionCut
) -> dict[str, Any]:
    """Write every table of ``cut`` to Parquet, then its part manifest (atomically).

    File names are unique per export, so a partition exported twice (a retry, or
    an ownership change during the snapshot) never mixes the two: the part
    manifest names the files that belong together.
    """
    import pyarrow.parquet as pq  # pyarrow only where snapshots are written (layout.py)

    base = root.snapshot_dir(app_id, snapshot_id)
    check_segment(cut.pipeline)
    token = uuid.uuid4().hex[:12]
    tables: dict[str, dict[str, Any]] = {}
    writer: pq.ParquetWriter | None = None
    current = ""
    try:
        for table, batch in read_checkpoint(cut.path):
            if table != current:
                if writer is not None:
                    writer.close()
                current = table
                # A table's name comes from the store's keys: one folder name, or refused.
                folder = relative_folder(cut.pipeline, check_segment(table), cut.partition)
                relative = f"{folder}/part-{token}.parquet"
                root.fs.create_dir(f"{base}/{relative.rsplit('/', 1)[0]}", recursive=True)
                writer = pq.ParquetWriter(
                    f"{base}/{relative}", schema(), filesystem=root.fs, compression="zstd"
                )
                tables[table] = {"rows": 0, "files": [relative]}
            assert writer is not None
            writer.write_batch(batch)
            tables[table]["rows"] += batch.num_rows
    finally:
        if writer is not None:
            writer.close()
    part = {
        "pipeline": cut.pipeline,
        "partition": cut.partition,
        "partition_count": cut.partition_count,
        "worker_id": worker_id,
        "taken_ms": cut.taken_ms,
        "committed_offsets": cut.committed_offsets,
        "watermark_ms": cut.watermark_ms,
        "changelog_offset": cut.changelog_offset,
        "rows": sum(t["rows"] for t in tables.values()),
        "tables": tables,
        "table_versions": {t: cut.table_versions.get(t, 1) for t in tables},
        "end_offsets": cut.end_offsets,
    }
    check_part(part)  # as readers will check it: never publish what they refuse
    root.write_json(f"{base}/{PARTS}/{cut.pipeline}-{cut.partition}.json", part)
    return part


def complete(
    root: SnapshotRoot, app_id: str, snapshot_id: str, retain: int | None, kind: str = "snapshot"
) -> tuple[dict[str, Any] | None, list[str]]:
    """Publish the manifest if every partition of every pipeline has its part.

    ``retain``: how many complete ones to keep (None: all, as for savepoints).

    Returns:
        The manifest (None while incomplete) and the missing ``pipeline-partition``
        names. Any worker may call this; the one that sees the full set publishes.
    """
    base = root.snapshot_dir(app_id, snapshot_id)
    if root.exists(f"{base}/{MANIFEST}"):
        return root.read_manifest(app_id, snapshot_id), []
    parts = [
        _read_part(root, app_id, snapshot_id, info.path)
        for info in root.plain_files(f"{base}/{PARTS}")
        if info.base_name.endswith(".json")
    ]
    expected = {p["pipeline"]: p["partition_count"] for p in parts}
    have = {(p["pipeline"], p["partition"]) for p in parts}
    missing = [
        f"{pipeline}-{n}"
        for pipeline, count in sorted(expected.items())
        for n in range(count)
        if (pipeline, n) not in have
    ]
    if missing or not parts:
        return None, missing
    parts.sort(key=lambda p: (p["pipeline"], p["partition"]))
    manifest = {
        "snapshot_id": snapshot_id,
        "kind": kind,
        "app_id": app_id,
        "schema_version": SCHEMA_VERSION,
        "created_ms": time_of(snapshot_id),
        "completed_ms": int(time.time() * 1000),
        "complete": True,
        "pipelines": dict(sorted(expected.items())),
        "rows": sum(p["rows"] for p in parts),
        "parts": parts,
    }
    check_manifest(manifest)
    root.write_json(f"{base}/{MANIFEST}", manifest)
    log.info("%s %s of %s complete: %d rows", kind, snapshot_id, app_id, manifest["rows"])
    if retain is not None:
        prune(root, app_id, retain)
    return manifest, []


def prune(root: SnapshotRoot, app_id: str, retain: int) -> list[str]:
    """Keep the newest ``retain`` complete snapshots; delete older ones, and
    incomplete ones older than the oldest kept (abandoned: a crash, a rebalance).
    Newer incomplete ones may still be in progress on another worker."""
    complete_ids = [m["snapshot_id"] for m in root.manifests(app_id)]
    kept = complete_ids[-retain:]
    if not kept:
        return []
    oldest_kept = min(kept)
    deleted = []
    for info in root.directories(root.app_dir(app_id)):
        name = info.base_name
        if name in kept or not is_id(name):
            continue
        if name in complete_ids or name < oldest_kept:
            try:
                root.delete_dir(info.path)
            except (OSError, BrokenSnapshotError) as exc:
                # The next prune tries again; the snapshot that was published stays.
                log.warning("retention: %s %s not deleted: %s", root.kind, name, exc)
                continue
            deleted.append(name)
    return deleted


def _read_part(root: SnapshotRoot, app_id: str, snapshot_id: str, path: str) -> dict[str, Any]:
    """One part manifest, checked. Raises BrokenSnapshotError if it cannot be used:
    the snapshot then cannot be completed, and says why."""
    try:
        root.confine(path)
        part: dict[str, Any] = check_part(root.read_json(path))
    except (ValueError, OSError) as exc:
        name = path.rsplit("/", 1)[-1]
        raise BrokenSnapshotError(
            f"{root.kind} {snapshot_id} of {app_id}: part {PARTS}/{name} is broken ({exc}); "
            "it cannot be completed: take another"
        ) from None
    return part
