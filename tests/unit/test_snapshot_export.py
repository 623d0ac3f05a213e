"""Snapshot export and publication, on stores in tmp_path (no broker)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import orjson
import pyarrow.parquet as pq
import pytest

from eddy.eventtime import Timer, TimeWindow, WindowEntry
from eddy.snapshot.layout import MANIFEST, SnapshotNotFoundError, SnapshotRoot, snapshot_id_at
from eddy.snapshot.offline import snapshot_stores
from eddy.snapshot.publish import PartitionCut, complete, export_partition, prune
from eddy.tables.export import decoder_for, read_checkpoint, schema
from eddy.tables.keyed import state_table
from eddy.tables.store import PartitionStore
from eddy.tables.windows import results_by_window_table, results_table, timer_table, window_table

RESULTS = results_table("results")
BY_WINDOW = results_by_window_table("results.by_window")
RECENT = state_table("recent")
TIMERS = timer_table("timers")
WINDOWS = window_table("windows")


def store_with_rows(path: Path, sensors: int = 3) -> PartitionStore:
    store = PartitionStore(path)
    txn = store.begin()
    for s in range(sensors):
        for w in range(4):
            window = TimeWindow(w * 5_000, (w + 1) * 5_000)
            result = {"sensor_id": f"s{s}", "avg": s + w / 10, "count": w + 1}
            txn.put(RESULTS, (f"s{s}", window), result)
            txn.put(BY_WINDOW, (window, f"s{s}"), result)
        txn.put(RECENT, f"s{s}", [{"kind": "freezing"}])
        txn.put(TIMERS, Timer(9_000, "window", f"s{s}", 5_000, 10_000), True)
        txn.put(WINDOWS, (f"s{s}", TimeWindow(20_000, 25_000)), WindowEntry([1, 2], False, {}, {}))
    txn.commit(txn.changelog_records(), changelog_offset=41)
    return store


def publish_two_partitions(
    root: SnapshotRoot, app_id: str, snapshot_id: str, scratch: Path, kind: str = "snapshot"
) -> dict[str, Any]:
    """A complete snapshot (or savepoint) of sensor_averages as two workers publish
    one: partition p holds ``store_with_rows(sensors=p + 1)`` (11 rows per sensor,
    4 of them results), cut at input offset 10 + p with watermark 9_000 + p."""
    for p in range(2):
        work = scratch / f"{kind}-{snapshot_id}-{p}"
        store = store_with_rows(work / "db", sensors=p + 1)
        store.checkpoint(work / "cp")
        store.close()
        offsets = {"sensor-readings": 10 + p}
        cut = PartitionCut("sensor_averages", p, work / "cp", offsets, 9_000 + p, 41, 0, 2)
        export_partition(root, app_id, snapshot_id, f"w{p}", cut)
        shutil.rmtree(work)
    manifest, missing = complete(root, app_id, snapshot_id, retain=None, kind=kind)
    assert manifest is not None, missing
    return manifest


def assert_summarises_two_partitions(summary: dict[str, Any]) -> None:
    """``summary`` (``eddy snapshot show --json``, ``GET /snapshots/{id}``) describes
    what :func:`publish_two_partitions` published."""
    stage = summary["stages"]["sensor_averages"]
    assert (stage["partitions"], stage["rows"]) == (2, 33)
    assert stage["tables"]["results"] == {"rows": 12, "version": 1}
    assert stage["committed_offsets"] == {
        "0": {"sensor-readings": 10},
        "1": {"sensor-readings": 11},
    }
    assert stage["watermarks_ms"] == {"0": 9_000, "1": 9_001}


def test_every_table_is_exported_with_decoded_keys_and_json_values(tmp_path: Path) -> None:
    store = store_with_rows(tmp_path / "db")
    store.checkpoint(tmp_path / "cp")
    store.close()
    tables: dict[str, list[dict[str, object]]] = {}
    for table, batch in read_checkpoint(tmp_path / "cp", batch_rows=5):
        assert batch.schema == schema()
        tables.setdefault(table, []).extend(batch.to_pylist())
    assert sorted(tables) == ["results", "results.by_window", "state.recent", "timers", "windows"]
    results = tables["results"]
    assert len(results) == 12
    row = next(r for r in results if r["key"] == "s1" and r["window_start_ms"] == 10_000)
    assert row["window_end_ms"] == 15_000
    assert orjson.loads(row["value"]) == {"sensor_id": "s1", "avg": 1.2, "count": 3}
    assert [r["key"] for r in tables["results.by_window"][:3]] == ["s0", "s1", "s2"]
    assert orjson.loads(tables["state.recent"][0]["value"]) == [{"kind": "freezing"}]
    timer = tables["timers"][0]
    assert (timer["key"], timer["window_start_ms"]) == ("s0", 5_000)
    assert orjson.loads(timer["value"]) == {"time_ms": 9_000, "namespace": "window"}


def test_an_unknown_table_is_kept_opaque_not_dropped() -> None:
    key, start, end, value = decoder_for("someday.new")(b"\x01\x02", b"\xff")
    assert (key, start, end) == (b"0102", None, None)
    assert orjson.loads(value or b"null") == {"base64": "/w=="}


def test_a_snapshot_is_published_when_the_last_partition_arrives(tmp_path: Path) -> None:
    root = SnapshotRoot.open(str(tmp_path / "snapshots"))
    stores = {p: store_with_rows(tmp_path / f"db{p}", sensors=p + 1) for p in range(2)}
    snapshot_id = snapshot_id_at(1_700_000_000_000)
    for p, store in stores.items():  # two "workers", one partition each
        store.checkpoint(tmp_path / f"cp{p}")
        cut = PartitionCut(
            "sensor_averages", p, tmp_path / f"cp{p}", {"readings": 10 + p}, 123, 41, 0, 2
        )
        export_partition(root, "app", snapshot_id, f"w{p}", cut)
        manifest, missing = complete(root, "app", snapshot_id, retain=5)
        if p == 0:
            assert manifest is None
            assert missing == ["sensor_averages-1"]
            with pytest.raises(SnapshotNotFoundError):
                root.manifest("app")
    assert manifest is not None
    assert manifest == root.manifest("app")
    assert manifest["complete"] is True
    assert manifest["schema_version"] == 1
    assert [p["committed_offsets"] for p in manifest["parts"]] == [
        {"readings": 10},
        {"readings": 11},
    ]
    files = root.files(manifest, "sensor_averages", "results")
    assert (
        sum(pq.read_table(f).num_rows for f in files)
        == 4 * (1 + 2)
        == sum(p["tables"]["results"]["rows"] for p in manifest["parts"])
    )


CRASH = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    import eddy.snapshot.publish as publish
    from eddy.snapshot.layout import SnapshotRoot
    from eddy.snapshot.offline import snapshot_stores
    from eddy.tables.store import PartitionStore

    real = publish.read_checkpoint
    def crash_after_first_batch(path, batch_rows=65536):
        for n, item in enumerate(real(path, batch_rows=2)):
            if n == 3:
                os._exit(9)  # no finally blocks, no cleanup: a killed process
            yield item
    publish.read_checkpoint = crash_after_first_batch
    tmp = Path(sys.argv[1])
    store = PartitionStore(tmp / "db0")
    snapshot_stores(SnapshotRoot.open(str(tmp / "snapshots")), "app", {"p": {0: store}},
                    tmp / "scratch", snapshot_id="20300101T000000000Z")
    """
)


def test_a_crash_in_the_middle_of_an_export_publishes_nothing(tmp_path: Path) -> None:
    root = SnapshotRoot.open(str(tmp_path / "snapshots"))
    store = store_with_rows(tmp_path / "db0")
    before = snapshot_stores(root, "app", {"p": {0: store}}, tmp_path / "scratch")
    store.close()
    assert before.manifest is not None
    crashed = subprocess.run([sys.executable, "-c", CRASH, str(tmp_path)], check=False)
    assert crashed.returncode == 9
    half = tmp_path / "snapshots" / "app" / "20300101T000000000Z"
    assert any(half.rglob("*.parquet"))  # it did crash half-way through
    assert not (half / MANIFEST).exists()
    assert not any(half.rglob("_parts/*.json"))
    assert [m["snapshot_id"] for m in root.manifests("app")] == [before.snapshot_id]
    assert root.manifest("app")["snapshot_id"] == before.snapshot_id
    with pytest.raises(SnapshotNotFoundError):
        root.manifest("app", "20300101T000000000Z")


def test_retention_keeps_the_newest_complete_snapshots_and_drops_abandoned_ones(
    tmp_path: Path,
) -> None:
    root = SnapshotRoot.open(str(tmp_path / "snapshots"))
    store = store_with_rows(tmp_path / "db0")
    abandoned = tmp_path / "snapshots" / "app" / snapshot_id_at(1_000)
    (abandoned / "pipeline=p").mkdir(parents=True)
    ids = [snapshot_id_at(1_700_000_000_000 + n * 60_000) for n in range(4)]
    for snapshot_id in ids:
        snapshot_stores(
            root, "app", {"p": {0: store}}, tmp_path / "s", snapshot_id=snapshot_id, retain=2
        )
    assert [m["snapshot_id"] for m in root.manifests("app")] == ids[-2:]
    assert sorted(d.name for d in (tmp_path / "snapshots" / "app").iterdir()) == ids[-2:]
    assert prune(root, "app", retain=2) == []


def test_an_object_store_takes_the_same_code_path(tmp_path: Path) -> None:
    """Not a local filesystem (pyarrow's in-memory mock, as S3 would be): manifests
    are single PUTs, no rename, and the snapshot reads back the same."""
    from pyarrow._fs import _MockFileSystem

    root = SnapshotRoot(_MockFileSystem(), "bucket/prefix", "mock://bucket/prefix")
    assert not root.local
    store = store_with_rows(tmp_path / "db0")
    published = snapshot_stores(root, "app", {"p": {0: store}}, tmp_path / "scratch")
    assert published.manifest == root.manifest("app")
    files = root.files(root.manifest("app"), "p", "results")
    with root.fs.open_input_file(files[0]) as f:
        assert pq.read_table(f).num_rows == 12
    assert root.url_of(files[0]).startswith("mock://bucket/prefix/app/")
    names = [i.base_name for i in root.listdir(root.snapshot_dir("app", published.snapshot_id))]
    assert MANIFEST in names
    assert not [n for n in names if ".tmp-" in n]
