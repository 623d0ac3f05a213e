"""What resuming from a savepoint will do, decided before anything is written.

Pure: a savepoint's manifest and the code's declared states in, a plan (or a
refusal that names the state and the reason) out. State is matched by stable
names, pipeline and table, never by position (docs/savepoints.md):

* a table the code declares at the savepoint's version is copied;
* one at an older version is migrated by the declared schema, if it can be;
* one the code no longer declares is refused, unless non-restored state is
  allowed (then it is dropped);
* a state the code declares and the savepoint lacks starts empty.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aiokafka.partitioner import murmur2

from eddy.errors import EddyError
from eddy.tables.export import keyed_by_record_key
from eddy.tables.schema import StateSchema, schema_for


class SavepointIncompatibleError(EddyError):
    """The savepoint's state does not fit the code that is to resume from it."""


@dataclass(frozen=True)
class TablePlan:
    pipeline: str
    table: str
    saved_version: int
    schema: StateSchema

    @property
    def migrates(self) -> bool:
        return self.saved_version != self.schema.version


@dataclass
class PipelinePlan:
    name: str
    saved_partitions: int
    tables: dict[str, TablePlan] = field(default_factory=dict)


@dataclass
class RestorePlan:
    pipelines: dict[str, PipelinePlan] = field(default_factory=dict)
    dropped: list[str] = field(default_factory=list)  # "pipeline/table", not restored


def saved_tables(manifest: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    """``{pipeline: {table: schema version}}`` over every part of a savepoint."""
    tables: dict[str, dict[str, int]] = {p: {} for p in manifest["pipelines"]}
    for part in manifest["parts"]:
        versions = part.get("table_versions", {})
        for table in part["tables"]:
            tables[part["pipeline"]][table] = int(versions.get(table, 1))
    return tables


def plan_restore(
    manifest: Mapping[str, Any],
    declared: Mapping[str, Mapping[str, StateSchema]],
    *,
    allow_non_restored_state: bool,
) -> RestorePlan:
    """Match every saved table to a declared state, or refuse.

    Args:
        manifest: the savepoint's manifest.
        declared: ``{pipeline: state_schemas}`` of the pipelines that will run.
        allow_non_restored_state: drop saved state the code no longer declares.

    Raises:
        SavepointIncompatibleError: with every problem found, one per line.
    """
    plan = RestorePlan()
    problems: list[str] = []
    orphans: list[str] = []
    for pipeline, tables in sorted(saved_tables(manifest).items()):
        schemas = declared.get(pipeline)
        if schemas is None:
            orphans += [f"{pipeline}/{t}" for t in sorted(tables)] or [f"{pipeline}/*"]
            continue
        pipeline_plan = plan.pipelines[pipeline] = PipelinePlan(
            pipeline, int(manifest["pipelines"][pipeline])
        )
        for table, version in sorted(tables.items()):
            schema = schema_for(schemas, table)
            if schema is None:
                orphans.append(f"{pipeline}/{table}")
                continue
            problem = _version_problem(pipeline, table, version, schema)
            if problem is not None:
                problems.append(problem)
                continue
            pipeline_plan.tables[table] = TablePlan(pipeline, table, version, schema)
    if orphans and not allow_non_restored_state:
        problems.append(
            "the savepoint holds state that this code does not declare: "
            f"{', '.join(orphans)}; declare it (a pipeline's state_schemas, a KeyedProcess's "
            "states) or pass --allow-non-restored-state to drop it"
        )
    if problems:
        raise SavepointIncompatibleError(
            "cannot resume from the savepoint:\n  " + "\n  ".join(problems)
        )
    plan.dropped = orphans
    return plan


def _version_problem(pipeline: str, table: str, version: int, schema: StateSchema) -> str | None:
    where = f"state {table!r} of pipeline {pipeline!r}"
    if version > schema.version:
        return (
            f"{where} was saved at schema version {version}, newer than this code's "
            f"{schema.version}: resume it with the code that wrote it"
        )
    if version < schema.version and (schema.migrate is None or version < schema.migrates_from):
        return (
            f"{where} was saved at schema version {version}; this code declares "
            f"{schema.version} and no migration from {version} (give the StateSchema a "
            "migrate function, e.g. eddy.tables.schema.json_schema)"
        )
    return None


def partition_of(key: str, partitions: int) -> int:
    """The input partition Kafka's default partitioner gives ``key``: where its
    records arrive after a rescale, so where its state must be."""
    return int(murmur2(key.encode()) & 0x7FFFFFFF) % partitions


def target_partitions(
    table: str, key: str, saved_partition: int, saved_count: int, new_count: int
) -> list[int]:
    """The new partitions a saved row goes to (what Flink's key groups do: the
    partition function decides which task owns a key). Keyed rows go to their key's
    partition; per-partition rows (``meta``: watermarks, broadcast state) to each new
    partition they are the source of."""
    if new_count == saved_count:
        return [saved_partition]
    if keyed_by_record_key(table):
        return [partition_of(key, new_count)]
    return [q for q in range(new_count) if source_of(q, saved_count) == saved_partition]


def source_of(new_partition: int, saved_count: int) -> int:
    """The saved partition whose per-partition state (watermark) a new partition
    takes: ``q % saved_count``. With the new count a multiple of the saved one,
    every key of partition q came from there (``h % n == (h % kn) % n``), so the
    watermark is exactly right; otherwise it is one of several sources."""
    return new_partition % saved_count


def check_rescale(manifest: Mapping[str, Any], pipeline: str, new_count: int) -> None:
    """A savepoint can move to more partitions only if its input was fully consumed
    at the cut: records left in the old partitions were written by the old
    partition function, and their keys' state may have moved to another partition.

    Raises:
        SavepointIncompatibleError: fewer partitions, or input left unprocessed.
    """
    saved_count = int(manifest["pipelines"][pipeline])
    if new_count == saved_count:
        return
    if new_count < saved_count:
        raise SavepointIncompatibleError(
            f"pipeline {pipeline!r}: the savepoint has {saved_count} partitions and its input "
            f"now {new_count}; Kafka topics cannot shrink, and Eddy only rescales up"
        )
    behind = []
    for part in manifest["parts"]:
        if part["pipeline"] != pipeline:
            continue
        for topic, committed in part["committed_offsets"].items():
            end = part.get("end_offsets", {}).get(topic)
            if end is None or end > committed:
                left = "unknown" if end is None else str(end - committed)
                behind.append(f"{topic}[{part['partition']}] ({left} records)")
    if behind:
        raise SavepointIncompatibleError(
            f"pipeline {pipeline!r} cannot move from {saved_count} to {new_count} partitions: "
            f"the savepoint was taken with input not yet processed in partitions "
            f"{', '.join(behind[:5])}. Stop the producers, let the workers catch up, then "
            "take it with `python -m eddy stop --savepoint` before adding partitions"
        )


def migrate_value(plan: TablePlan, raw: bytes) -> bytes:
    if not plan.migrates:
        return raw
    assert plan.schema.migrate is not None  # plan_restore checked
    return plan.schema.migrate(plan.saved_version, raw)
