"""Latency markers with a fake clock: one marker per interval and source partition,
observed at the commit that makes its batch visible, dropped with a failed task."""

from __future__ import annotations

from eddy.eventtime import FakeClock
from eddy.runtime.latency import LatencyMarkers
from eddy.runtime.progress import records_behind

READINGS_0 = ("readings", 0)
READINGS_1 = ("readings", 1)
SPEED_0 = ("speed", 0)


def test_a_marker_per_interval_observed_at_the_commit_that_follows() -> None:
    clock = FakeClock(start_ms=10_000)
    markers = LatencyMarkers(interval_ms=1_000)
    assert markers.note(READINGS_0, clock.now_ms())
    clock.advance(400)
    assert not markers.note(READINGS_0, clock.now_ms())  # within the interval
    clock.advance(600)
    assert markers.note(READINGS_0, clock.now_ms())  # 1 s after the first
    clock.advance(250)
    observed = markers.observe(0, clock.now_ms())
    assert observed == [(READINGS_0, 1.25), (READINGS_0, 0.25)]
    assert markers.latest_ms(0) == 250.0  # the newest marker's latency
    clock.advance(100)
    assert markers.observe(0, clock.now_ms()) == []  # each marker is observed once


def test_each_source_partition_has_its_own_markers() -> None:
    markers = LatencyMarkers(interval_ms=1_000)
    for source in (READINGS_0, SPEED_0, READINGS_1):
        assert markers.note(source, 5_000)
    # Partition 0's checkpoint covers both of its inputs (a join), not partition 1.
    observed = dict(markers.observe(0, 5_080))
    assert observed == {READINGS_0: 0.08, SPEED_0: 0.08}
    assert markers.latest_ms(1) is None
    assert markers.observe(1, 7_000) == [(READINGS_1, 2.0)]
    assert markers.latest_ms(1) == 2_000.0


def test_a_discarded_task_takes_its_markers_along() -> None:
    markers = LatencyMarkers(interval_ms=1_000)
    markers.note(READINGS_0, 1_000)
    markers.note(READINGS_1, 1_000)
    markers.drop(0)
    assert markers.observe(0, 9_000) == []  # the replayed batch is marked again...
    assert markers.note(READINGS_0, 1_100)  # ...at once, not after the interval
    assert markers.observe(0, 1_300) == [(READINGS_0, 0.2)]
    assert markers.observe(1, 1_500) == [(READINGS_1, 0.5)]  # other partitions untouched


def test_zero_interval_disables_markers_and_clock_steps_back_count_as_zero() -> None:
    off = LatencyMarkers(interval_ms=0)
    assert not off.note(READINGS_0, 1_000)
    assert off.observe(0, 2_000) == []
    on = LatencyMarkers(interval_ms=1_000)
    on.note(READINGS_0, 5_000)
    assert on.observe(0, 4_000) == [(READINGS_0, 0.0)]


def test_lag_counts_records_not_commit_markers_of_transactional_inputs() -> None:
    # Input written in transactions: offset 10 is the commit marker, end is 11.
    assert records_behind(11, 10, 10, position=11, in_hand=False) == 0
    # Records fetched but not processed yet: the position says nothing.
    assert records_behind(11, 10, 10, position=11, in_hand=True) == 1
    # Processed, not committed: still lag.
    assert records_behind(20, 10, 15, position=15, in_hand=False) == 10
    assert records_behind(None, 10, 10, position=10, in_hand=False) is None
    assert records_behind(8, 10, 10, position=None, in_hand=False) == 0
