"""Savepoint restore planning (no broker): exported rows restore byte for byte,
state is matched by name and version, rows move to their key's new partition."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest
from aiokafka.partitioner import DefaultPartitioner
from hypothesis import given
from hypothesis import strategies as st
from rocksdict import AccessType, Options, Rdict

from eddy.eventtime import Timer, TimeWindow, WindowEntry
from eddy.pipeline.keyed import ANY_STATE, META
from eddy.savepoint.plan import (
    SavepointIncompatibleError,
    check_rescale,
    migrate_value,
    partition_of,
    plan_restore,
    target_partitions,
)
from eddy.tables.export import keyed_by_record_key, raw_value, read_checkpoint
from eddy.tables.keyed import state_table
from eddy.tables.schema import StateSchema, json_schema
from eddy.tables.store import PartitionStore, TableSpec
from eddy.tables.windows import results_by_window_table, results_table, timer_table, window_table


def _manifest(tables: dict[str, dict[str, int]], partitions: int = 2) -> dict[str, Any]:
    """A manifest whose parts hold ``{pipeline: {table: version}}``."""
    parts = [
        {
            "pipeline": pipeline,
            "partition": p,
            "tables": {t: {"rows": 1, "files": []} for t in versions},
            "table_versions": versions,
            "committed_offsets": {"in": 10},
            "end_offsets": {"in": 10},
        }
        for pipeline, versions in tables.items()
        for p in range(partitions)
    ]
    return {"pipelines": dict.fromkeys(tables, partitions), "parts": parts}


def test_exported_rows_restore_to_the_stored_bytes(tmp_path: Path) -> None:
    store = PartitionStore(tmp_path / "db")
    txn = store.begin()
    window = TimeWindow(0, 5_000)
    txn.put(results_table("results"), ("s1", window), {"avg": 1.5})
    txn.put(results_by_window_table("results.by_window"), (window, "s1"), {"avg": 1.5})
    txn.put(window_table("windows"), ("s2", window), WindowEntry([1.0, 2.5], False, {}, {}))
    txn.put(timer_table("timers"), Timer(4_999, "window", "s2", 0, 5_000), True)
    txn.put(state_table("recent"), "s1", [{"kind": "freezing", "t": "é"}])
    txn.put(META, "windowed", {"watermark": 42})
    opaque: TableSpec[str, bytes] = TableSpec(
        "custom", str.encode, bytes.decode, lambda b: b, lambda b: b
    )
    txn.put(opaque, "k", b"\x00\xff binary")
    txn.commit(txn.changelog_records(), changelog_offset=7)
    store.checkpoint(tmp_path / "cp")
    store.close()

    db = Rdict(str(tmp_path / "cp"), Options(raw_mode=True), access_type=AccessType.read_only())
    stored = {k: v for k, v in cast(Any, db.items()) if not k.startswith(b"\x00")}
    db.close()
    restored = {}
    for table, batch in read_checkpoint(tmp_path / "cp"):
        prefix = bytes([len(table)]) + table.encode()
        for row in batch.to_pylist():
            restored[prefix + row["raw_key"]] = raw_value(table, row["value"])
    assert restored == stored
    assert len(stored) == 7


def test_matching_versions_are_copied_and_new_states_need_nothing() -> None:
    manifest = _manifest({"alerts": {"state.recent": 1, "meta": 1}})
    declared = {
        "alerts": {"state.recent": StateSchema(), "meta": StateSchema(), "state.new": StateSchema()}
    }
    plan = plan_restore(manifest, declared, allow_non_restored_state=False)
    assert sorted(plan.pipelines["alerts"].tables) == ["meta", "state.recent"]
    assert not any(t.migrates for t in plan.pipelines["alerts"].tables.values())
    assert plan.dropped == []


def test_state_the_code_no_longer_declares_is_refused_then_dropped_with_the_flag() -> None:
    manifest = _manifest({"alerts": {"state.recent": 1, "state.old": 1}, "gone": {"meta": 1}})
    declared = {"alerts": {"state.recent": StateSchema()}}
    with pytest.raises(SavepointIncompatibleError) as refused:
        plan_restore(manifest, declared, allow_non_restored_state=False)
    message = str(refused.value)
    assert "alerts/state.old" in message
    assert "gone/meta" in message
    assert "--allow-non-restored-state" in message
    plan = plan_restore(manifest, declared, allow_non_restored_state=True)
    assert plan.dropped == ["alerts/state.old", "gone/meta"]
    assert list(plan.pipelines["alerts"].tables) == ["state.recent"]


def test_undeclared_keyed_states_are_accepted_under_the_wildcard() -> None:
    manifest = _manifest({"p": {"state.anything": 1}})
    plan = plan_restore(manifest, {"p": {ANY_STATE: StateSchema()}}, allow_non_restored_state=False)
    assert list(plan.pipelines["p"].tables) == ["state.anything"]


def test_an_older_version_is_migrated_by_the_declared_steps() -> None:
    schema = json_schema(3, {1: lambda v: {"celsius": v}, 2: lambda v: {**v, "unit": "C"}})
    plan = plan_restore(
        _manifest({"p": {"state.t": 1}}), {"p": {"state.t": schema}}, allow_non_restored_state=False
    )
    table = plan.pipelines["p"].tables["state.t"]
    assert table.migrates
    assert migrate_value(table, b"21.5") == b'{"celsius":21.5,"unit":"C"}'


@pytest.mark.parametrize(
    ("saved", "schema", "why"),
    [
        (1, StateSchema(version=2), "no migration from 1"),
        (3, StateSchema(version=2), "newer than this code's 2"),
        (1, json_schema(3, {2: lambda v: v}), "no migration from 1"),
    ],
)
def test_an_incompatible_version_fails_naming_the_state_and_why(
    saved: int, schema: StateSchema, why: str
) -> None:
    with pytest.raises(SavepointIncompatibleError) as refused:
        plan_restore(
            _manifest({"p": {"state.t": saved}}),
            {"p": {"state.t": schema}},
            allow_non_restored_state=True,  # never hides an incompatible state
        )
    assert "state 'state.t' of pipeline 'p'" in str(refused.value)
    assert why in str(refused.value)


def test_partition_of_is_kafkas_default_partitioner() -> None:
    partitioner = DefaultPartitioner()
    for i in range(200):
        key = f"sensor_{i}"
        assert partition_of(key, 6) == partitioner(key.encode(), list(range(6)), list(range(6)))


@given(st.text(min_size=1, max_size=20), st.integers(1, 8), st.integers(2, 4))
def test_doubling_keeps_each_key_within_its_old_partitions_share(
    key: str, saved: int, factor: int
) -> None:
    old = partition_of(key, saved)
    for table in ("results", "windows", "timers", "state.recent", "results.by_window"):
        assert keyed_by_record_key(table)
        (new,) = target_partitions(table, key, old, saved, saved * factor)
        assert new == partition_of(key, saved * factor)
        assert new % saved == old  # so the old partition's watermark is exactly its


def test_per_partition_state_goes_to_each_partition_it_is_the_source_of() -> None:
    assert not keyed_by_record_key("meta")
    assert not keyed_by_record_key("state.broadcast.thresholds")
    assert target_partitions("meta", "windowed", 1, 3, 6) == [1, 4]
    assert target_partitions("state.broadcast.thresholds", "", 0, 2, 2) == [0]


def test_rescaling_needs_a_savepoint_taken_with_its_input_consumed() -> None:
    drained = _manifest({"p": {"meta": 1}})
    check_rescale(drained, "p", 2)
    check_rescale(drained, "p", 4)
    behind = _manifest({"p": {"meta": 1}})
    behind["parts"][1]["end_offsets"] = {"in": 15}
    with pytest.raises(SavepointIncompatibleError, match=r"in\[1\] \(5 records\)"):
        check_rescale(behind, "p", 4)
    check_rescale(behind, "p", 2)  # same partition count: resumes where it was
    with pytest.raises(SavepointIncompatibleError, match="cannot shrink"):
        check_rescale(drained, "p", 1)
