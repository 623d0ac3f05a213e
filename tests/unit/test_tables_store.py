"""RocksDB partition stores: ordering, transactions, changelog bookkeeping."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eddy.eventtime import Timer, TimeWindow, WindowEntry, timer_order
from eddy.tables.codecs import (
    decode_timer,
    decode_window_key,
    encode_time,
    encode_timer,
    encode_window_key,
    window_key_range,
)
from eddy.tables.store import PartitionStore
from eddy.tables.windows import results_table, timer_table, window_table

times = st.integers(-(2**62), 2**62)
names = st.text(min_size=0, max_size=20)


@given(a=times, b=times)
def test_time_encoding_sorts_like_integers(a: int, b: int) -> None:
    assert (encode_time(a) < encode_time(b)) == (a < b)


@given(key=names, start=times, end=times)
def test_window_keys_round_trip(key: str, start: int, end: int) -> None:
    window_key = (key, TimeWindow(start, end))
    assert decode_window_key(encode_window_key(window_key)) == window_key


@given(timer=st.builds(Timer, times, names, names, times, times))
def test_timers_round_trip(timer: Timer) -> None:
    assert decode_timer(encode_timer(timer)) == timer


@given(
    a=st.builds(Timer, times, names, names, times, times),
    b=st.builds(Timer, times, names, names, times, times),
)
def test_timer_keys_sort_by_time_first(a: Timer, b: Timer) -> None:
    if a.time_ms != b.time_ms:
        assert (encode_timer(a) < encode_timer(b)) == (a.time_ms < b.time_ms)


# Keys alike but for their strings: where a length prefix and text order disagree.
alike = st.builds(
    Timer, st.integers(-1, 1), st.sampled_from(["", "a", "ab", "b", "é"]), names, times, times
)


@given(a=alike, b=alike)
def test_timer_keys_sort_as_the_queue_fires_them(a: Timer, b: Timer) -> None:
    # A queue that pages its timers in from the store fires them in store order.
    assert (encode_timer(a) < encode_timer(b)) == (timer_order(a) < timer_order(b))


def test_a_sensors_windows_scan_in_start_order_without_neighbours(tmp_path: Path) -> None:
    results = results_table("results")
    store = PartitionStore(tmp_path / "p0")
    txn = store.begin()
    for sensor in ("sensor_1", "sensor_10", "sensor_2"):
        for start in (10_000, 0, 5_000, -5_000):
            txn.put(results, (sensor, TimeWindow(start, start + 5_000)), {"s": sensor, "t": start})
    txn.commit(txn.changelog_records(), changelog_offset=41)
    lower, upper = window_key_range("sensor_1", -5_000, 10_000)
    rows = list(store.scan(results, lower, upper))
    assert [(k, w.start_ms) for (k, w), _ in rows] == [
        ("sensor_1", -5_000),
        ("sensor_1", 0),
        ("sensor_1", 5_000),
    ]
    assert store.changelog_offset() == 41
    store.close()


def test_uncommitted_changes_are_visible_to_the_transaction_only(tmp_path: Path) -> None:
    windows = window_table("windows")
    store = PartitionStore(tmp_path / "p0")
    txn = store.begin()
    key = ("a", TimeWindow(0, 10))
    txn.put(windows, key, WindowEntry([1, 2.0, 2.0, 2.0]))
    assert txn.get(windows, key) == WindowEntry([1, 2.0, 2.0, 2.0])
    assert store.get(windows, key) is None
    txn.discard()
    assert txn.get(windows, key) is None
    assert not txn.dirty


def test_changelog_records_replay_into_an_identical_store(tmp_path: Path) -> None:
    windows, timers = window_table("windows"), timer_table("timers")
    source = PartitionStore(tmp_path / "a")
    txn = source.begin()
    txn.put(windows, ("a", TimeWindow(0, 10)), WindowEntry([1, 5.0, 5.0, 5.0]))
    txn.put(windows, ("b", TimeWindow(0, 10)), WindowEntry([2, 5.0, 1.0, 4.0], fired=True))
    txn.put(timers, Timer(9, "window.fire", "a", 0, 10), True)
    first = txn.changelog_records()
    txn.commit(first, 2)
    txn.delete(windows, ("b", TimeWindow(0, 10)))
    second = txn.changelog_records()
    txn.commit(second, 3)
    assert (b"\x07windows" + encode_window_key(("b", TimeWindow(0, 10))), None) in second

    replica = PartitionStore(tmp_path / "b")
    replica.write(first + second, 3)
    assert list(replica.scan(windows)) == list(source.scan(windows))
    assert list(replica.scan(timers)) == list(source.scan(timers))
    assert [k for k, _ in replica.scan(windows)] == [("a", TimeWindow(0, 10))]
    assert replica.changelog_offset() == 3


def test_tables_do_not_see_each_others_keys(tmp_path: Path) -> None:
    a, ab = results_table("a"), results_table("ab")
    store = PartitionStore(tmp_path / "p")
    txn = store.begin()
    txn.put(a, ("k", TimeWindow(0, 1)), {"in": "a"})
    txn.put(ab, ("k", TimeWindow(0, 1)), {"in": "ab"})
    txn.commit(txn.changelog_records(), None)
    assert [v for _, v in store.scan(a)] == [{"in": "a"}]
    assert [v for _, v in store.scan(ab)] == [{"in": "ab"}]
    assert store.changelog_offset() == -1


def test_state_in_an_older_format_is_a_clear_error_naming_the_way_out(tmp_path: Path) -> None:

    from eddy.tables.codecs import encode_json
    from eddy.tables.store import StateFormatError

    table = window_table("windows")
    store = PartitionStore(tmp_path / "p0")
    key = ("sensor_1", TimeWindow(0, 5000))
    # The walking skeleton stored [accumulator, fired]; windows now keep four fields.
    store.write([(table.full_key(key), encode_json([[1, 60.0], False]))], None)
    with pytest.raises(StateFormatError, match="EDDY_APP_ID") as caught:
        store.get(table, key)
    assert "'windows'" in str(caught.value)
    store.close()


def test_a_reverse_scan_stays_within_its_table_and_range(tmp_path: Path) -> None:
    from eddy.eventtime import TimeWindow
    from eddy.pipeline.windowed import META, RESULTS
    from eddy.tables.codecs import window_key_range

    store = PartitionStore(tmp_path / "p0")
    txn = store.begin()
    for key in ("a", "b", "bb"):
        for w in range(3):
            txn.put(RESULTS, (key, TimeWindow(w * 10, w * 10 + 10)), {"key": key, "w": w})
    txn.put(META, "watermark", {"emitted_ms": 1})  # another table, before and after
    txn.commit(txn.changelog_records(), None)
    lower, upper = window_key_range("b", 0, 25)
    found = [(k, v["w"]) for (k, _), v in store.scan(RESULTS, lower, upper, reverse=True)]
    assert found == [("b", 2), ("b", 1), ("b", 0)]
    assert store.last(RESULTS) == (("bb", TimeWindow(20, 30)), {"key": "bb", "w": 2})
    assert list(store.scan(RESULTS, *window_key_range("c", 0, 99), reverse=True)) == []
    store.close()


@settings(max_examples=40, deadline=None)
@given(
    committed=st.sets(alike, max_size=12),
    puts=st.sets(alike, max_size=6),
    deletes=st.sets(alike, max_size=6),
    after=st.none() | alike,
    limit=st.none() | st.integers(1, 5),
)
def test_a_transactions_first_keys_after_one_are_its_scan_from_there(
    tmp_path_factory: pytest.TempPathFactory,
    committed: set[Timer],
    puts: set[Timer],
    deletes: set[Timer],
    after: Timer | None,
    limit: int | None,
) -> None:
    store = PartitionStore(tmp_path_factory.mktemp("keys") / "db")
    table = timer_table("timers")
    try:
        txn = store.begin()
        for timer in committed:
            txn.put(table, timer, True)
        txn.commit(txn.changelog_records(), 1)
        for timer in puts:
            txn.put(table, timer, True)
        for timer in deletes - puts:
            txn.delete(table, timer)
        lower = b"" if after is None else encode_timer(after) + b"\x00"
        scanned = [timer for timer, _ in txn.scan(table, lower)]
        expected = scanned if limit is None else scanned[:limit]
        assert txn.keys_after(table, after, limit, timer_order) == expected
    finally:
        store.close()
