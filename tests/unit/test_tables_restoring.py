"""Rebuilding a partition store from its changelog without RocksDB's write-ahead log."""

from __future__ import annotations

import pickle
import random
import subprocess
import sys
from pathlib import Path

from eddy.tables.store import PartitionStore, TableSpec

Record = tuple[bytes, bytes | None]


def _same(raw: bytes) -> bytes:
    return raw


TABLE = TableSpec("t", _same, _same, _same, _same)


def changelog(count: int, seed: int = 7) -> list[Record]:
    """Records over few keys, so keys repeat and tombstones hit live keys."""
    rng = random.Random(seed)
    records: list[Record] = []
    for n in range(count):
        key = TABLE.prefix + b"k%03d" % rng.randrange(40)
        records.append((key, None if rng.random() < 0.25 else b"v%d" % n))
    return records


def state(store: PartitionStore) -> list[tuple[bytes, bytes]]:
    return list(store.scan(TABLE))


def written(path: Path, records: list[Record]) -> PartitionStore:
    """A store holding ``records`` written the way a checkpoint writes them."""
    store = PartitionStore(path)
    for offset, record in enumerate(records):
        store.write([record], offset)
    return store


def test_batched_unlogged_writes_give_the_state_of_one_write_per_record(tmp_path: Path) -> None:
    records = changelog(1_000)
    expected = written(tmp_path / "logged", records)
    store = PartitionStore(tmp_path / "restored")
    with store.restoring() as restoring:
        for first in range(0, len(records), 300):
            chunk = records[first : first + 300]
            restoring.write(chunk, first + len(chunk) - 1)
    assert state(store) == state(expected)
    assert store.changelog_offset() == len(records) - 1


def test_a_tombstone_and_a_rewrite_inside_one_batch_apply_in_order(tmp_path: Path) -> None:
    a, b = TABLE.prefix + b"a", TABLE.prefix + b"b"
    store = PartitionStore(tmp_path / "p")
    store.write([(a, b"old"), (b, b"old")], 1)
    with store.restoring() as restoring:
        restoring.write([(a, None), (b, None), (b, b"new"), (a, b"gone"), (a, None)], 6)
    assert state(store) == [(b"b", b"new")]


def test_restored_state_survives_a_reopen(tmp_path: Path) -> None:
    records = changelog(500)
    store = PartitionStore(tmp_path / "p")
    with store.restoring() as restoring:
        restoring.write(records, len(records) - 1)
    store.close()
    reopened = PartitionStore(tmp_path / "p")
    assert state(reopened) == state(written(tmp_path / "logged", records))
    assert reopened.changelog_offset() == len(records) - 1


# Run as a separate interpreter: a fork of a process with RocksDB's threads can hang.
_RESTORE_THEN_DIE = """
import os, pickle, sys
from pathlib import Path
from eddy.tables.store import PartitionStore

path, records_file, flushed_upto = sys.argv[1], sys.argv[2], int(sys.argv[3])
records = pickle.loads(Path(records_file).read_bytes())
restoring = PartitionStore(Path(path)).restoring()
for first in range(0, len(records), 100):
    restoring.write(records[first : first + 100], first + 99)
    if first + 99 == flushed_upto:
        restoring.flush()
os._exit(0)  # a crash: no flush, no close
"""


def test_a_restore_killed_midway_then_redone_gives_the_same_state(tmp_path: Path) -> None:
    records = changelog(1_000)
    path, records_file = tmp_path / "p", tmp_path / "records.pickle"
    records_file.write_bytes(pickle.dumps(records))
    # Restores in batches of 100, flushes once after offset 499, then dies.
    subprocess.run(
        [sys.executable, "-c", _RESTORE_THEN_DIE, str(path), str(records_file), "499"],
        check=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
    )

    store = PartitionStore(path)
    survived = store.changelog_offset()
    # What survived is a prefix of the batches with that prefix's own offset.
    assert 499 <= survived < len(records) - 1
    assert state(store) == state(written(tmp_path / "prefix", records[: survived + 1]))
    with store.restoring() as restoring:
        restoring.write(records[survived + 1 :], len(records) - 1)
    assert state(store) == state(written(tmp_path / "logged", records))
