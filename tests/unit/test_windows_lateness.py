"""Late data (docs/semantics.md, "Allowed lateness and late data"; the classic
late-readings example: 10 s counts with 5 s of allowed lateness): windows keep their
state for the allowed lateness, late readings within it re-fire the window as an
``update``, later ones are dropped and counted or go to a side output."""

from __future__ import annotations

from typing import Any, NamedTuple

import pytest

from eddy.eventtime import (
    BoundedOutOfOrderness,
    Count,
    Session,
    Sliding,
    TimeWindow,
    Tumbling,
    WindowSpec,
)
from eddy.eventtime.harness import WindowHarness


class Reading(NamedTuple):
    id: str
    timestamp_ms: int


Step = tuple[str, int]  # ("r", timestamp) reads s1 at that time; ("wm", ms) is a watermark


def run(
    spec: WindowSpec, steps: list[Step], *, late_output: str | None = "late-readings"
) -> WindowHarness:
    h = WindowHarness(
        spec, key=lambda r: r.id, timestamp_ms=lambda r: r.timestamp_ms, late_output=late_output
    )
    for kind, value in steps:
        if kind == "r":
            h.record(Reading("s1", value))
        else:
            h.watermark(value)
    return h


def seen(h: WindowHarness) -> list[tuple[Any, ...]]:
    """Main emissions as (start, end, count, kind); side output as ("late", ts)."""
    out: list[tuple[Any, ...]] = []
    for e in h.outputs:
        if e.output == "main":
            out.append((e.window_start_ms, e.window_end_ms, e.value, e.kind))
        else:
            out.append((e.output, e.record.timestamp_ms))
    return out


COUNTS_WITH_LATENESS = WindowSpec(Tumbling(10_000), Count(), allowed_lateness_ms=5_000)


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        pytest.param(
            [("r", 1_000), ("r", 5_000), ("wm", 9_999)],
            [(0, 10_000, 2, "first")],
            id="on-time-readings-fire-first",
        ),
        pytest.param(
            [("r", 1_000), ("wm", 9_999), ("r", 8_000)],
            [(0, 10_000, 1, "first"), (0, 10_000, 2, "update")],
            id="late-within-lateness-updates-at-once",
        ),
        pytest.param(
            [("r", 1_000), ("wm", 12_000), ("r", 8_000), ("r", 9_000)],
            [(0, 10_000, 1, "first"), (0, 10_000, 2, "update"), (0, 10_000, 3, "update")],
            id="each-late-reading-is-one-more-update",
        ),
        pytest.param(
            [("r", 1_000), ("wm", 14_998), ("r", 3_000)],
            [(0, 10_000, 1, "first"), (0, 10_000, 2, "update")],
            id="wm-one-before-end-1+lateness-still-updates",
        ),
        pytest.param(
            [("r", 1_000), ("wm", 14_999), ("r", 3_000)],
            [(0, 10_000, 1, "first"), ("late-readings", 3_000)],
            id="wm-at-end-1+lateness-is-late",
        ),
        pytest.param(
            [("wm", 12_000), ("r", 3_000)],
            [(0, 10_000, 1, "first")],
            id="first-reading-of-a-window-within-lateness-fires-first",
        ),
        pytest.param(
            [("wm", 20_000), ("r", 3_000), ("r", 25_000)],
            [("late-readings", 3_000)],
            id="too-late-goes-to-the-side-output",
        ),
    ],
)
def test_counts_with_lateness_5s(steps: list[Step], expected: list[tuple[Any, ...]]) -> None:
    h = run(COUNTS_WITH_LATENESS, steps)
    assert seen(h) == expected


def test_late_readings_stream_end_to_end() -> None:
    """10 s counts with 5 s of lateness and a watermark 1 s behind: first, two
    updates, then the window is gone and a straggler is side-output."""
    h = WindowHarness(
        COUNTS_WITH_LATENESS,
        key=lambda r: r.id,
        timestamp_ms=lambda r: r.timestamp_ms,
        watermark=BoundedOutOfOrderness(1_000),
        late_output="late-readings",
    )
    for ts in (1_000, 5_000, 9_000, 12_000, 8_000, 14_500, 9_500, 16_500, 7_000):
        h.record(Reading("s1", ts))
    h.end_of_input()
    assert seen(h) == [
        (0, 10_000, 3, "first"),  # watermark 10999 after the reading at 12000
        (0, 10_000, 4, "update"),  # 8000: late, within 5 s
        (0, 10_000, 5, "update"),  # 9500: watermark 13499 < 14999
        ("late-readings", 7_000),  # watermark 15499: the window is gone
        (10_000, 20_000, 3, "first"),
    ]


def test_window_state_is_kept_exactly_until_end_1_plus_lateness() -> None:
    h = run(COUNTS_WITH_LATENESS, [("r", 1_000), ("wm", 14_998)])
    assert ("s1", TimeWindow(0, 10_000)) in h.state.windows
    h.watermark(14_999)
    assert h.state.windows == {}
    assert h.event_timers.timers == set()


def test_late_readings_are_dropped_and_counted_without_a_side_output() -> None:
    spec = WindowSpec(Tumbling(10_000), Count())
    h = run(spec, [("r", 1_000), ("wm", 9_999), ("r", 2_000), ("r", 3_000)], late_output=None)
    assert seen(h) == [(0, 10_000, 1, "first")]
    assert h.dropped_late == 2


@pytest.mark.parametrize(
    ("arrivals", "expected"),
    [
        pytest.param(
            [1_000, 4_000, 6_000, 3_000, 7_000],
            [(0, 5_000, 3, "first")],
            id="the-event-at-7s-fires-[0,5)",
        ),
        pytest.param(
            [1_000, 4_000, 6_000, 3_000, 6_999],
            [],
            id="6999-is-not-enough",
        ),
        pytest.param(
            [1_000, 4_000, 6_000, 3_000, 7_000, 2_000],
            [(0, 5_000, 3, "first"), ("late-readings", 2_000)],
            id="then-the-event-at-2s-is-late",
        ),
        pytest.param(
            [1_000, 6_000, 4_000],
            [],
            id="2s-behind-the-max-is-still-on-time",
        ),
    ],
)
def test_window_0_5_with_a_2s_delay(arrivals: list[int], expected: list[Any]) -> None:
    """5 s windows, a 2 s delay: watermark = max - 2 s - 1, so [0, 5000) fires when the
    reading at 7 s arrives (watermark 4999), not before."""
    h = WindowHarness(
        WindowSpec(Tumbling(5_000), Count()),
        key=lambda r: r.id,
        timestamp_ms=lambda r: r.timestamp_ms,
        watermark=BoundedOutOfOrderness(2_000),
        late_output="late-readings",
    )
    for ts in arrivals:
        h.record(Reading("s1", ts))
    assert seen(h) == expected


def test_a_reading_is_late_only_if_every_window_it_belongs_to_is_late() -> None:
    """What "late" means, with sliding windows: [0, 10000) is late, [5000, 15000) is not, so the
    reading joins the open one and is not side-output."""
    h = run(WindowSpec(Sliding(10_000, 5_000), Count()), [("wm", 9_999), ("r", 7_000)])
    h.end_of_input()
    assert seen(h) == [(5_000, 15_000, 1, "first")]


def test_a_sliding_gap_reading_behind_the_watermark_is_late() -> None:
    """As Flink: a reading in no window is side-output if its timestamp is late."""
    h = run(WindowSpec(Sliding(2_000, 5_000), Count()), [("wm", 5_000), ("r", 3_000), ("r", 5_500)])
    h.end_of_input()
    assert seen(h) == [("late-readings", 3_000), (5_000, 7_000, 1, "first")]


def test_session_late_reading_within_lateness_extends_and_updates() -> None:
    spec = WindowSpec(Session(3_000), Count(), allowed_lateness_ms=5_000)
    h = run(spec, [("r", 1_000), ("wm", 5_000), ("r", 2_000), ("wm", 20_000), ("r", 2_500)])
    assert seen(h) == [
        (1_000, 4_000, 1, "first"),
        (1_000, 5_000, 2, "update"),  # merged with the fired session: an update
        ("late-readings", 2_500),  # [1000, 5000) is gone; a new session would be late
    ]
