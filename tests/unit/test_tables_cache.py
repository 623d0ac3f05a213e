"""The write-back cache of open windows: what a checkpoint writes, what an abort
forgets, and that the changelog it produces rebuilds the same state."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from eddy.eventtime import TimeWindow, WindowEntry
from eddy.tables.cache import CachedTable
from eddy.tables.store import PartitionStore, PartitionTransaction
from eddy.tables.windows import StoredWindowState, window_table

WINDOW = TimeWindow(0, 5_000)


class Changelog:
    """The changelog partition as a list: what each checkpoint sent, in order."""

    def __init__(self) -> None:
        self.records: list[tuple[bytes, bytes | None]] = []

    def checkpoint(self, txn: PartitionTransaction) -> list[tuple[bytes, bytes | None]]:
        records = txn.changelog_records()
        self.records += records
        txn.commit(records, len(self.records) - 1)
        return records

    def restore_into(self, path: Path) -> PartitionStore:
        store = PartitionStore(path)
        store.write(self.records, len(self.records) - 1)
        return store


def test_a_window_changed_many_times_is_read_back_and_written_once(tmp_path: Path) -> None:
    store = PartitionStore(tmp_path / "p0")
    txn = store.begin()
    state = StoredWindowState(txn)
    changelog = Changelog()
    for count in range(1, 11):
        entry = state.get_window("sensor_1", WINDOW) or WindowEntry(0)
        entry.contents = count
        state.put_window("sensor_1", WINDOW, entry)
        assert state.get_window("sensor_1", WINDOW) == WindowEntry(count)
    records = changelog.checkpoint(txn)
    assert len(records) == 1
    assert store.get(window_table("windows"), ("sensor_1", WINDOW)) == WindowEntry(10)
    store.close()


def test_a_committed_window_is_read_from_memory_in_the_next_checkpoint(tmp_path: Path) -> None:
    store = PartitionStore(tmp_path / "p0")
    txn = store.begin()
    state = StoredWindowState(txn)
    changelog = Changelog()
    state.put_window("sensor_1", WINDOW, WindowEntry(1))
    changelog.checkpoint(txn)
    reads = store.reads
    for _ in range(5):
        entry = state.get_window("sensor_1", WINDOW)
        assert entry is not None
        entry.contents += 1
        state.put_window("sensor_1", WINDOW, entry)
        changelog.checkpoint(txn)
    assert store.reads == reads  # no RocksDB read after the first checkpoint
    assert store.get(window_table("windows"), ("sensor_1", WINDOW)) == WindowEntry(6)
    assert not txn.changelog_records()  # nothing changed since: nothing to write
    store.close()


def test_an_abort_forgets_changes_made_in_place(tmp_path: Path) -> None:
    store = PartitionStore(tmp_path / "p0")
    txn = store.begin()
    state = StoredWindowState(txn)
    state.put_window("sensor_1", WINDOW, WindowEntry(1))
    Changelog().checkpoint(txn)
    entry = state.get_window("sensor_1", WINDOW)
    assert entry is not None
    entry.contents = 99  # the operator changes live entries in place...
    state.put_window("sensor_1", WINDOW, entry)
    state.put_window("sensor_2", WINDOW, WindowEntry(7))
    state.delete_window("sensor_1", WINDOW)
    txn.discard()  # ...so an abort must not keep the cached object
    assert state.get_window("sensor_1", WINDOW) == WindowEntry(1)
    assert state.get_window("sensor_2", WINDOW) is None
    assert not txn.dirty
    store.close()


def test_a_deleted_window_leaves_memory_once_committed(tmp_path: Path) -> None:
    store = PartitionStore(tmp_path / "p0")
    txn = store.begin()
    state = StoredWindowState(txn)
    changelog = Changelog()
    for n in range(100):
        state.put_window(f"sensor_{n}", WINDOW, WindowEntry(n))
    changelog.checkpoint(txn)
    assert txn.cached_entries == 100
    for n in range(100):
        state.delete_window(f"sensor_{n}", WINDOW)
    changelog.checkpoint(txn)
    assert txn.cached_entries == 0
    assert list(store.scan(window_table("windows"))) == []
    store.close()


# One step of a task: ("put", sensor, value), ("delete", sensor), ("commit",), ("abort",).
steps = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.integers(0, 4), st.integers(0, 1_000)),
        st.tuples(st.just("delete"), st.integers(0, 4)),
        st.just(("commit",)),
        st.just(("abort",)),
    ),
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(steps=steps)
def test_reads_follow_the_transaction_and_the_changelog_restores_what_committed(
    tmp_path_factory: Any, steps: list[tuple[Any, ...]]
) -> None:
    """Against a model: reads see the checkpoint in progress, an abort goes back to
    the last commit, and a store rebuilt from the changelog after a crash (the
    checkpoint in progress lost) equals the committed state."""
    tmp = tmp_path_factory.mktemp("cache")
    store = PartitionStore(tmp / "live")
    txn = store.begin()
    state = StoredWindowState(txn)
    changelog = Changelog()
    committed: dict[str, int] = {}
    pending: dict[str, int | None] = {}
    for step in steps:
        if step[0] == "put":
            entry = state.get_window(f"s{step[1]}", WINDOW) or WindowEntry(0)
            entry.contents = step[2]
            state.put_window(f"s{step[1]}", WINDOW, entry)
            pending[f"s{step[1]}"] = step[2]
        elif step[0] == "delete":
            state.delete_window(f"s{step[1]}", WINDOW)
            pending[f"s{step[1]}"] = None
        elif step[0] == "commit":
            changelog.checkpoint(txn)
            committed = _applied(committed, pending)
            pending = {}
        else:
            txn.discard()
            pending = {}
        seen = {f"s{n}": state.get_window(f"s{n}", WINDOW) for n in range(5)}
        expected = _applied(committed, pending)
        assert {k: e.contents for k, e in seen.items() if e is not None} == expected
    restored = changelog.restore_into(tmp / "restored")
    table = window_table("windows")
    assert {k: e.contents for (k, _), e in restored.scan(table)} == committed
    assert list(restored.scan(table)) == list(store.scan(table))
    store.close()
    restored.close()


def _applied(committed: dict[str, int], pending: dict[str, int | None]) -> dict[str, int]:
    merged: dict[str, int | None] = {**committed, **pending}
    return {k: v for k, v in merged.items() if v is not None}


def test_past_its_bound_the_cache_forgets_the_oldest_clean_windows_not_their_state(
    tmp_path: Path,
) -> None:
    store = PartitionStore(tmp_path / "p0")
    txn = store.begin()
    windows = CachedTable(store, window_table("windows"), max_clean_entries=2)
    for n in range(1, 4):
        windows.put((f"sensor_{n}", WINDOW), WindowEntry(n))
    assert len(windows) == 3  # changed entries stay until their checkpoint is written
    records = windows.changelog_records()
    store.write(records, len(records) - 1)
    windows.committed()
    assert len(windows) == 2
    reads = store.reads
    assert windows.get(("sensor_1", WINDOW)) == WindowEntry(1)  # from RocksDB again
    assert store.reads == reads + 1
    assert windows.get(("sensor_3", WINDOW)) == WindowEntry(3)
    assert store.reads == reads + 1  # still cached
    txn.discard()
    store.close()
