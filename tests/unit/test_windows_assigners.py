"""Window assigners (docs/semantics.md, "Windows": tumbling, sliding, session, the
global window and count windows): which windows an element joins, and what a user
sees come out of the harness for each kind of window."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import pytest

from eddy.eventtime import (
    GLOBAL_WINDOW,
    BoundedOutOfOrderness,
    Count,
    Session,
    Sliding,
    Sum,
    TimeWindow,
    Tumbling,
    WindowSpec,
)
from eddy.eventtime.harness import WindowHarness
from eddy.eventtime.spec import count_window
from eddy.eventtime.windows import WindowAssigner


class Reading(NamedTuple):
    id: str
    timestamp_ms: int
    temperature: float = 0.0


def harness(spec: WindowSpec, bound_ms: int | None = 0, **kwargs: Any) -> WindowHarness:
    return WindowHarness(
        spec,
        key=lambda r: r.id,
        timestamp_ms=lambda r: r.timestamp_ms,
        watermark=None if bound_ms is None else BoundedOutOfOrderness(bound_ms),
        late_output="late",
        **kwargs,
    )


def fired(h: WindowHarness) -> list[tuple[str, int | None, int | None, Any]]:
    return [(e.key or "", e.window_start_ms, e.window_end_ms, e.value) for e in h.main()]


# -- tumbling -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("size_ms", "offset_ms", "ts", "window"),
    [
        pytest.param(5_000, 0, 0, (0, 5_000), id="5s-start-is-inside"),
        pytest.param(5_000, 0, 4_999, (0, 5_000), id="5s-end-minus-1-is-inside"),
        pytest.param(5_000, 0, 5_000, (5_000, 10_000), id="5s-end-is-the-next-window"),
        pytest.param(1_000, 0, -1, (-1_000, 0), id="1s-negative-time"),
        pytest.param(15_000, 0, 31_234, (30_000, 45_000), id="15s-min-temp-example"),
        pytest.param(
            86_400_000, -28_800_000, 57_600_000, (57_600_000, 144_000_000), id="day-utc+8"
        ),
        pytest.param(
            86_400_000, -28_800_000, 57_599_999, (-28_800_000, 57_600_000), id="day-utc+8-eve"
        ),
        pytest.param(10, 3, 12, (3, 13), id="offset-3"),
        pytest.param(10, 3, 2, (-7, 3), id="offset-3-before-first-start"),
    ],
)
def test_tumbling_window_of_a_timestamp(
    size_ms: int, offset_ms: int, ts: int, window: tuple[int, int]
) -> None:
    assert Tumbling(size_ms, offset_ms).assign(ts) == (TimeWindow(*window),)


def test_tumbling_with_offset_groups_a_local_day() -> None:
    """Days in UTC+8 (offset -8 h): 23:59 and 00:01 local time land in different days."""
    day, offset = 86_400_000, -28_800_000
    h = harness(WindowSpec(Tumbling(day, offset), Count()))
    local_midnight = 16 * 3_600_000  # 16:00 UTC
    for ts in (local_midnight - 60_000, local_midnight + 60_000, local_midnight + 120_000):
        h.record(Reading("s1", ts))
    h.end_of_input()
    assert fired(h) == [
        ("s1", offset, offset + day, 1),
        ("s1", offset + day, offset + 2 * day, 2),
    ]


# -- sliding --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("size_ms", "slide_ms", "ts", "windows"),
    [
        pytest.param(10, 5, 7, [(5, 15), (0, 10)], id="overlap-2-windows"),
        pytest.param(10, 5, 5, [(5, 15), (0, 10)], id="on-a-start"),
        pytest.param(10, 5, 4, [(0, 10), (-5, 5)], id="before-the-second-start"),
        pytest.param(
            3_600_000,
            900_000,
            4_000_000,
            [
                (3_600_000, 7_200_000),
                (2_700_000, 6_300_000),
                (1_800_000, 5_400_000),
                (900_000, 4_500_000),
            ],
            id="1h-every-15min-in-4",
        ),
        pytest.param(2, 5, 1, [(0, 2)], id="gap-inside-a-window"),
        pytest.param(2, 5, 2, [], id="gap-first-instant"),
        pytest.param(2, 5, 4, [], id="gap-last-instant"),
        pytest.param(2, 5, 5, [(5, 7)], id="gap-then-next-window"),
        pytest.param(4, 4, 6, [(4, 8)], id="slide-equals-size-is-tumbling"),
    ],
)
def test_sliding_windows_of_a_timestamp(
    size_ms: int, slide_ms: int, ts: int, windows: list[tuple[int, int]]
) -> None:
    assert list(Sliding(size_ms, slide_ms).assign(ts)) == [TimeWindow(*w) for w in windows]


def test_sliding_windows_each_count_every_reading_they_cover() -> None:
    h = harness(WindowSpec(Sliding(10_000, 5_000), Count()))
    for ts in (1_000, 6_000, 12_000):
        h.record(Reading("s1", ts))
    h.end_of_input()
    assert fired(h) == [
        ("s1", -5_000, 5_000, 1),
        ("s1", 0, 10_000, 2),
        ("s1", 5_000, 15_000, 2),
        ("s1", 10_000, 20_000, 1),
    ]


def test_sliding_gap_readings_belong_to_no_window_and_are_not_late() -> None:
    """slide > size: a reading in a gap is dropped, not side-output, while on time."""
    h = harness(WindowSpec(Sliding(2_000, 5_000), Count()))
    for ts in (500, 3_000, 5_500, 9_000):
        h.record(Reading("s1", ts))
    h.end_of_input()
    assert fired(h) == [("s1", 0, 2_000, 1), ("s1", 5_000, 7_000, 1)]
    assert [e for e in h.outputs if e.output == "late"] == []
    assert h.dropped_late == 0


# -- session --------------------------------------------------------------------


def test_session_readings_closer_than_the_gap_form_one_session() -> None:
    h = harness(WindowSpec(Session(3_000), Count()), bound_ms=10_000)
    for ts in (1_000, 2_500, 5_000, 9_000, 20_000):
        h.record(Reading("s1", ts))
    h.end_of_input()
    assert fired(h) == [
        ("s1", 1_000, 8_000, 3),
        ("s1", 9_000, 12_000, 1),
        ("s1", 20_000, 23_000, 1),
    ]


@pytest.mark.parametrize(
    ("arrivals", "sessions"),
    [
        pytest.param([0, 6_000, 3_000], [(0, 9_000, 3)], id="a-reading-bridges-two-sessions"),
        pytest.param([0, 3_000], [(0, 6_000, 2)], id="touching-windows-merge"),
        pytest.param([0, 3_001], [(0, 3_000, 1), (3_001, 6_001, 1)], id="one-ms-apart-do-not"),
        pytest.param(
            [5_000, 1_000, 2_000], [(1_000, 8_000, 3)], id="out-of-order-extends-backwards"
        ),
        pytest.param([1_000, 1_500, 1_200], [(1_000, 4_500, 3)], id="inside-an-existing-session"),
    ],
)
def test_session_merging(arrivals: list[int], sessions: list[tuple[int, int, int]]) -> None:
    h = harness(WindowSpec(Session(3_000), Count()), bound_ms=10_000)
    for ts in arrivals:
        h.record(Reading("s1", ts))
    h.end_of_input()
    assert fired(h) == [("s1", *s) for s in sessions]


def test_session_merge_merges_the_aggregates_state() -> None:
    """Session merging: the merged window's accumulator is ``merge`` of the two, not a
    restart."""
    spec = WindowSpec(Session(3_000), Sum(lambda r: r.temperature))
    h = harness(spec, bound_ms=10_000)
    h.record(Reading("s1", 0, 1.0))
    h.record(Reading("s1", 0, 2.0))
    h.record(Reading("s1", 6_000, 10.0))
    h.record(Reading("s1", 3_000, 100.0))  # bridges [0, 3000) and [6000, 9000)
    h.end_of_input()
    assert fired(h) == [("s1", 0, 9_000, 113.0)]


def test_session_keys_are_independent() -> None:
    h = harness(WindowSpec(Session(3_000), Count()), bound_ms=10_000)
    h.record(Reading("a", 0))
    h.record(Reading("b", 2_000))
    h.record(Reading("a", 4_000))
    h.end_of_input()
    assert sorted(fired(h)) == [("a", 0, 3_000, 1), ("a", 4_000, 7_000, 1), ("b", 2_000, 5_000, 1)]


# -- count and global -----------------------------------------------------------


def count_harness(
    size: int, slide: int | None = None, timeout_ms: int | None = None
) -> WindowHarness:
    assigner, trigger, evictor = count_window(size, slide, timeout_ms)
    spec = WindowSpec(assigner, Sum(lambda r: r.temperature), trigger=trigger, evictor=evictor)
    return harness(spec, bound_ms=None)


def test_tumbling_count_window_fires_every_n_readings_of_a_key() -> None:
    h = count_harness(3)
    for i, key in enumerate("aabaabab"):
        h.record(Reading(key, i, float(i)))
    h.end_of_input()
    # a: 0+1+3=4, then 4+6=10 pending; b: 2+5+7=14. A key short of 3 never fires.
    assert fired(h) == [("a", None, None, 4.0), ("b", None, None, 14.0)]


def test_count_window_with_timeout_fires_a_key_that_never_reaches_n() -> None:
    """The timeout (processing time since the window's first reading) rescues it."""
    h = count_harness(3, timeout_ms=5_000)
    h.record(Reading("a", 0, 1.0))
    h.processing_time(4_999)
    assert fired(h) == []
    h.record(Reading("a", 1, 2.0))
    h.processing_time(5_000)
    assert fired(h) == [("a", None, None, 3.0)]
    h.record(Reading("a", 2, 4.0))  # a new window: its own timeout from now
    h.processing_time(9_999)
    assert len(fired(h)) == 1
    h.processing_time(10_000)
    assert fired(h)[-1] == ("a", None, None, 4.0)


def test_count_window_reaching_n_cancels_its_timeout() -> None:
    h = count_harness(2, timeout_ms=1_000)
    h.record(Reading("a", 0, 1.0))
    h.record(Reading("a", 1, 2.0))
    h.processing_time(5_000)
    assert fired(h) == [("a", None, None, 3.0)]
    assert len(h.processing_timers.timers) == 0


def test_sliding_count_window_fires_every_slide_over_the_last_size() -> None:
    """countWindow(3, 2): every 2 readings, the sum of the last 3."""
    h = count_harness(3, slide=2)
    for i in range(1, 8):
        h.record(Reading("a", i, float(i)))
    assert [value for *_, value in fired(h)] == [1.0 + 2, 2.0 + 3 + 4, 4.0 + 5 + 6]


def test_global_window_without_a_trigger_never_fires() -> None:
    h = harness(WindowSpec(count_window(1)[0], Count()))
    h.record(Reading("a", 1))
    h.end_of_input()
    assert fired(h) == []
    assert ("a", GLOBAL_WINDOW) in h.state.windows


# -- processing time and custom assigners ---------------------------------------


def test_processing_time_tumbling_windows_go_by_the_wall_clock() -> None:
    spec = WindowSpec(Tumbling(1_000, processing_time=True), Count())
    h = harness(spec, bound_ms=None, processing_time_ms=100)
    h.record(Reading("a", 999_999))  # the event time does not matter
    h.processing_time(900)
    h.record(Reading("a", 5))
    h.processing_time(1_200)
    h.record(Reading("a", 5))
    assert fired(h) == [("a", 0, 1_000, 2)]
    h.processing_time(2_000)
    assert fired(h)[-1] == ("a", 1_000, 2_000, 1)


class ThirtySecondsWindows:
    """A user's own assigner: 30 s tumbling windows written by hand."""

    size_ms = 30_000

    @property
    def is_event_time(self) -> bool:
        return True

    @property
    def is_merging(self) -> bool:
        return False

    def assign(self, timestamp_ms: int) -> Sequence[TimeWindow]:
        start = timestamp_ms - timestamp_ms % self.size_ms
        return (TimeWindow(start, start + self.size_ms),)


def test_a_custom_assigner_gets_the_default_event_time_trigger() -> None:
    assigner: WindowAssigner = ThirtySecondsWindows()
    h = harness(WindowSpec(assigner, Count()))
    for ts in (1_000, 29_999, 30_000):
        h.record(Reading("a", ts))
    assert fired(h) == [("a", 0, 30_000, 2)]
    h.end_of_input()
    assert fired(h)[-1] == ("a", 30_000, 60_000, 1)


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda: Tumbling(0), id="tumbling-size-0"),
        pytest.param(lambda: Tumbling(10, 10), id="tumbling-offset-too-big"),
        pytest.param(lambda: Sliding(10, 0), id="sliding-slide-0"),
        pytest.param(lambda: Sliding(10, 5, offset_ms=-5), id="sliding-offset-too-big"),
        pytest.param(lambda: Session(0), id="session-gap-0"),
    ],
)
def test_assigners_reject_nonsense(make: Any) -> None:
    with pytest.raises(ValueError, match="must be"):
        make()
