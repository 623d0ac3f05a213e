"""Secondary instances, as the query plane reads the ingest processes' stores: what
a query can see of a store another process writes (whole checkpoints, and only
those), through the same reads as the primary."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from eddy.eventtime import TimeWindow
from eddy.tables.codecs import window_key_range
from eddy.tables.keyed import state_table
from eddy.tables.secondary import ReadOnlyStoreError, SecondaryStore
from eddy.tables.store import PartitionStore
from eddy.tables.windows import results_table

RESULTS = results_table("results")
LATEST = state_table("latest")


def _result(start_ms: int) -> dict[str, object]:
    return {"window_start_ms": start_ms, "count": start_ms // 1_000}


def test_a_secondary_sees_a_checkpoint_once_caught_up_and_reads_as_the_primary(
    tmp_path: Path,
) -> None:
    primary = PartitionStore(tmp_path / "0")
    secondary = SecondaryStore(tmp_path / "0", tmp_path / "secondary")
    txn = primary.begin()
    for start in (0, 1_000, 2_000):
        txn.put(RESULTS, ("s1", TimeWindow(start, start + 1_000)), _result(start))
    txn.put(LATEST, "s1", 71.5)
    records = txn.changelog_records()
    txn.commit(records, 41)

    assert secondary.get(LATEST, "s1") is None  # not caught up yet: the state it opened
    secondary.catch_up()
    lower, upper = window_key_range("s1", 0, 10_000)
    for store in (primary, secondary):
        assert store.get(LATEST, "s1") == 71.5
        assert [w.start_ms for (_, w), _ in store.scan(RESULTS, lower, upper)] == [0, 1_000, 2_000]
        assert [w.start_ms for (_, w), _ in store.scan(RESULTS, lower, upper, reverse=True)] == [
            2_000,
            1_000,
            0,
        ]
        last = store.last(RESULTS)
        assert last is not None
        assert last[1] == _result(2_000)
        assert store.table_names() == ["results", "state.latest"]
        assert store.changelog_offset() == 41
    primary.close()
    secondary.close()


def test_a_secondary_refuses_writes(tmp_path: Path) -> None:
    PartitionStore(tmp_path / "0").close()
    secondary = SecondaryStore(tmp_path / "0", tmp_path / "secondary")
    with pytest.raises(ReadOnlyStoreError):
        secondary.write([(b"k", b"v")], 1)
    secondary.close()


def test_a_secondary_follows_a_primary_that_closed_and_reopened(tmp_path: Path) -> None:
    """A partition reopened by its ingest process (after a failed checkpoint) is the
    same directory with a new MANIFEST."""
    primary = PartitionStore(tmp_path / "0")
    secondary = SecondaryStore(tmp_path / "0", tmp_path / "secondary")
    primary.write([(LATEST.full_key("s1"), b"1")], 1)
    primary.close()
    primary = PartitionStore(tmp_path / "0")
    primary.write([(LATEST.full_key("s2"), b"2")], 2)
    secondary.catch_up()
    assert (secondary.get(LATEST, "s1"), secondary.get(LATEST, "s2")) == (1, 2)
    primary.close()
    secondary.close()


WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    import eddy.tables.store
    from eddy.tables.store import PartitionStore
    from eddy.tables.keyed import state_table
    # Small memtables: flushes to SST files (and new WAL files) every few checkpoints,
    # so the reader also catches up across those, not only along one log.
    options = eddy.tables.store._options
    def small_memtables():
        found = options()
        found.set_write_buffer_size(256 * 1024)
        return found
    eddy.tables.store._options = small_memtables
    store = PartitionStore(Path(sys.argv[1]))
    table = state_table("latest")
    keys = [table.full_key(f"sensor_{i}") for i in range(200)]
    deadline = time.monotonic() + float(sys.argv[2])
    stop = Path(sys.argv[3])  # the reader has seen enough
    generation = 0
    while time.monotonic() < deadline and not stop.exists():
        generation += 1
        value = str(generation).encode()
        # One checkpoint: every key and the changelog offset in one WriteBatch.
        store.write([(key, value) for key in keys], generation)
    store.close()
    print(generation)
    """
)


def test_a_secondary_reads_what_the_primary_flushed_after_its_last_catch_up(
    tmp_path: Path,
) -> None:
    """A snapshot's checkpoint flushes the primary's memtable and starts a new log;
    a point read through the secondary must then see the newest value, not the one
    it had replayed from the old log (RocksDB's secondary alone keeps that one)."""
    primary = PartitionStore(tmp_path / "0")
    secondary = SecondaryStore(tmp_path / "0", tmp_path / "secondary")
    primary.write([(LATEST.full_key("s1"), b"1")], 1)
    secondary.catch_up()
    assert secondary.get(LATEST, "s1") == 1
    primary.write([(LATEST.full_key("s1"), b"2"), (LATEST.full_key("s2"), b"2")], 2)
    primary.checkpoint(tmp_path / "snapshot")
    for _ in range(2):  # and it stays so
        secondary.catch_up()
        assert (secondary.get(LATEST, "s1"), secondary.get(LATEST, "s2")) == (2, 2)
        assert sorted(secondary.scan(LATEST)) == [("s1", 2), ("s2", 2)]
        assert secondary.changelog_offset() == 2
    primary.write([(LATEST.full_key("s1"), b"3")], 3)
    secondary.catch_up()
    assert secondary.get(LATEST, "s1") == 3
    primary.close()
    secondary.close()


def test_a_secondary_never_sees_part_of_a_checkpoint(tmp_path: Path) -> None:
    """Another process writes checkpoints of 200 keys as fast as it can while this one
    catches up and reads: every read sees all 200 keys from one checkpoint, the one
    whose changelog offset the store reports."""
    PartitionStore(tmp_path / "0").close()
    root = Path(__file__).resolve().parents[2]
    writer = subprocess.Popen(
        # The reader stops the writer once it has seen enough; the deadline is for a
        # machine so loaded that a reopen per flush takes that long (CI saw 30 s).
        [sys.executable, "-c", WRITER, str(tmp_path / "0"), "120.0", str(tmp_path / "stop")],
        cwd=root,
        stdout=subprocess.PIPE,
        text=True,
    )
    secondary = SecondaryStore(tmp_path / "0", tmp_path / "secondary")
    seen: set[int] = set()
    reads = 0
    started_s = time.monotonic()
    try:
        while writer.poll() is None:
            secondary.catch_up()
            values = {value for _, value in secondary.scan(LATEST)}
            offset = secondary.changelog_offset()
            if offset < 0:
                continue  # nothing written yet
            reads += 1
            assert values == {offset}, f"read {reads} mixes checkpoints: {sorted(values)[:5]}"
            # Point reads too: they look at the memtable first (see the flush test).
            assert secondary.get(LATEST, "sensor_7") == offset, f"read {reads} is stale"
            seen.add(offset)
            if len(seen) > 20 and time.monotonic() - started_s > 2:
                (tmp_path / "stop").touch()  # enough, however slow a loaded machine is
            time.sleep(0.001)
    finally:
        (tmp_path / "stop").touch()
        writer.wait(30)
        secondary.close()
    written = int(writer.stdout.read()) if writer.stdout else 0
    assert writer.returncode == 0
    # The reads went on while checkpoints came in, not only after the writer finished.
    assert len(seen) > 20, f"{reads} reads saw {len(seen)} checkpoints of {written}"
    assert max(seen) <= written
