"""Watermarks (docs/semantics.md, "Watermarks"): strategies, and the tracker that makes one
operator clock out of several inputs: minimum, idleness, periodic emission, the
quiet-stream advance, snapshots, and never going backwards."""

from __future__ import annotations

from typing import Any, NamedTuple

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eddy.eventtime import (
    MIN_WATERMARK,
    Ascending,
    BoundedOutOfOrderness,
    Count,
    FakeClock,
    Punctuated,
    Tumbling,
    WatermarkTracker,
    WindowSpec,
)
from eddy.eventtime.harness import WindowHarness
from eddy.eventtime.keyed import KeyedWindows


class Reading(NamedTuple):
    id: str
    timestamp_ms: int


# -- strategies ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bound_ms", "timestamps", "watermark_ms"),
    [
        pytest.param(1_000, [], MIN_WATERMARK, id="nothing-seen"),
        pytest.param(1_000, [7_000], 5_999, id="max-minus-bound-minus-1"),
        pytest.param(1_000, [7_000, 6_000], 5_999, id="older-reading-changes-nothing"),
        pytest.param(1_000, [7_000, 8_500], 7_499, id="newer-reading-advances"),
        pytest.param(2_000, [1_000, 4_000, 6_000, 3_000, 7_000], 4_999, id="2s-delay-example"),
        pytest.param(0, [5, 3, 9], 8, id="bound-0"),
    ],
)
def test_bounded_out_of_orderness(bound_ms: int, timestamps: list[int], watermark_ms: int) -> None:
    generator = BoundedOutOfOrderness(bound_ms).create()
    for ts in timestamps:
        generator.on_event(ts)
    assert generator.watermark_ms == watermark_ms


def test_ascending_is_max_minus_1() -> None:
    generator = Ascending().create()
    for ts in (10, 20, 15):
        generator.on_event(ts)
    assert generator.watermark_ms == 19


def test_punctuated_watermarks_come_from_marker_records() -> None:
    def marker(value: Any, timestamp_ms: int) -> int | None:
        return timestamp_ms if value == "flush" else None

    generator = Punctuated(marker).create()
    generator.on_event(5_000, "reading")
    assert generator.watermark_ms == MIN_WATERMARK
    generator.on_event(3_000, "flush")
    assert generator.watermark_ms == 3_000
    generator.on_event(1_000, "flush")  # an older marker does not move it back
    assert generator.watermark_ms == 3_000


@pytest.mark.parametrize(
    "kwargs",
    [
        pytest.param({"bound_ms": -1}, id="negative-bound"),
        pytest.param({"bound_ms": 0, "emit_every_ms": 0}, id="emit-every-0"),
        pytest.param({"bound_ms": 0, "idle_timeout_ms": -5}, id="idle-timeout-negative"),
        pytest.param({"bound_ms": 0, "quiet_advance_ms": 0}, id="quiet-advance-0"),
    ],
)
def test_strategy_rejects_nonsense(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="must be"):
        BoundedOutOfOrderness(**kwargs)


# -- the tracker ------------------------------------------------------------------


def test_operator_clock_is_the_minimum_over_inputs() -> None:
    """A partition behind holds the clock back (docs/semantics.md, "Several inputs: the
    minimum")."""
    clock = FakeClock()
    tracker = WatermarkTracker(BoundedOutOfOrderness(0), ["p0", "p1"])
    assert tracker.on_event("p0", 10_000, None, clock.now_ms()) is False
    assert tracker.watermark_ms == MIN_WATERMARK, "p1 has said nothing yet"
    assert tracker.on_event("p1", 3_000, None, clock.now_ms()) is True
    assert tracker.watermark_ms == 2_999
    tracker.on_event("p1", 12_000, None, clock.now_ms())
    assert tracker.watermark_ms == 9_999
    assert tracker.input_watermarks() == {"p0": 9_999, "p1": 11_999}


def test_an_idle_input_leaves_the_minimum_until_it_speaks() -> None:
    """Idleness (docs/semantics.md, "Idle inputs and quiet streams"), with the clock
    moved by hand."""
    clock = FakeClock(start_ms=0)
    tracker = WatermarkTracker(BoundedOutOfOrderness(0, idle_timeout_ms=10_000), ["p0", "p1"])
    tracker.on_tick(clock.now_ms())
    tracker.on_event("p0", 5_000, None, clock.now_ms())
    tracker.on_event("p1", 1_000, None, clock.now_ms())
    assert tracker.watermark_ms == 999
    clock.advance(6_000)
    tracker.on_event("p0", 20_000, None, clock.now_ms())
    assert tracker.on_tick(clock.advance(3_999)) is False  # p1 quiet for 9999 ms
    assert tracker.idle == set()
    assert tracker.on_tick(clock.advance(1)) is True  # 10000 ms: p1 is idle
    assert tracker.idle == {"p1"}
    assert tracker.watermark_ms == 19_999
    tracker.on_event("p1", 2_000, None, clock.now_ms())  # back, and behind
    assert tracker.idle == set()
    assert tracker.watermark_ms == 19_999, "never backwards"
    tracker.on_event("p1", 30_000, None, clock.now_ms())
    assert tracker.watermark_ms == 19_999, "p0 is the minimum again"


def test_an_input_that_never_spoke_goes_idle_after_the_timeout() -> None:
    clock = FakeClock()
    tracker = WatermarkTracker(BoundedOutOfOrderness(0, idle_timeout_ms=1_000), ["p0", "p1"])
    tracker.on_tick(clock.now_ms())
    tracker.on_event("p0", 5_000, None, clock.advance(500))
    assert tracker.watermark_ms == MIN_WATERMARK
    assert tracker.on_tick(clock.advance(499)) is False
    assert tracker.on_tick(clock.advance(1)) is True  # p1: silent 1000 ms since the start
    assert tracker.idle == {"p1"}
    assert tracker.watermark_ms == 4_999


def test_all_inputs_idle_holds_the_clock() -> None:
    clock = FakeClock()
    tracker = WatermarkTracker(BoundedOutOfOrderness(0, idle_timeout_ms=1_000), ["p0"])
    tracker.on_event("p0", 5_000, None, clock.now_ms())
    assert tracker.on_tick(clock.advance(60_000)) is False
    assert tracker.idle == {"p0"}
    assert tracker.watermark_ms == 4_999


def test_periodic_emission_every_200ms_and_only_when_it_grows() -> None:
    """Flink's default periodic interval, 200 ms (docs/semantics.md, "When the watermark
    moves"); records alone emit nothing."""
    clock = FakeClock()
    tracker = WatermarkTracker(BoundedOutOfOrderness(1_000, emit_every_ms=200), ["p0"])
    tracker.on_tick(clock.now_ms())
    assert tracker.on_event("p0", 5_000, None, clock.now_ms()) is False
    assert tracker.watermark_ms == MIN_WATERMARK
    assert tracker.on_tick(clock.advance(199)) is False
    assert tracker.on_tick(clock.advance(1)) is True
    assert tracker.watermark_ms == 3_999
    tracker.on_event("p0", 4_000, None, clock.now_ms())
    assert tracker.on_tick(clock.advance(200)) is False, "did not grow"
    tracker.on_event("p0", 6_000, None, clock.now_ms())
    assert tracker.on_tick(clock.advance(200)) is True
    assert tracker.watermark_ms == 4_999


def test_quiet_stream_advances_with_the_wall_clock_when_asked() -> None:
    clock = FakeClock(start_ms=100_000)
    strategy = BoundedOutOfOrderness(1_000, quiet_advance_ms=5_000)
    tracker = WatermarkTracker(strategy, ["p0"])
    tracker.on_event("p0", 100_000, None, clock.now_ms())
    assert tracker.watermark_ms == 98_999
    assert tracker.on_tick(clock.advance(4_999)) is False
    # Quiet for 5 s: from now on the watermark is now - 5 s - bound - 1, which at
    # this instant is where the last reading left it (event time = wall clock).
    assert tracker.on_tick(clock.advance(1)) is False
    assert tracker.on_tick(clock.advance(1)) is True
    assert tracker.watermark_ms == 99_000
    assert tracker.on_tick(clock.advance(10_000)) is True
    assert tracker.watermark_ms == 115_001 - 5_000 - 1_000 - 1


def test_quiet_advance_is_off_by_default() -> None:
    clock = FakeClock()
    tracker = WatermarkTracker(BoundedOutOfOrderness(1_000), ["p0"])
    tracker.on_event("p0", 1_000, None, clock.now_ms())
    tracker.on_tick(clock.advance(3_600_000))
    assert tracker.watermark_ms == -1


def test_tracker_snapshot_restores_each_input_and_the_clock() -> None:
    clock = FakeClock()
    strategy = BoundedOutOfOrderness(100)
    tracker = WatermarkTracker(strategy, ["p0", "p1"])
    tracker.on_event("p0", 5_000, None, clock.now_ms())
    tracker.on_event("p1", 2_000, None, clock.now_ms())
    restored = WatermarkTracker(strategy, ["p0", "p1"])
    restored.restore(tracker.snapshot())
    assert restored.watermark_ms == 1_899
    assert restored.input_watermarks() == {"p0": 4_899, "p1": 1_899}
    restored.on_event("p1", 3_000, None, clock.now_ms())
    assert restored.watermark_ms == 2_899, "p1 kept its max; p0 still counts"


def test_restoring_an_older_snapshot_never_moves_the_clock_back() -> None:
    tracker = WatermarkTracker(BoundedOutOfOrderness(0), ["p0"])
    tracker.on_event("p0", 1_000, None, 0)
    old = tracker.snapshot()
    tracker.on_event("p0", 9_000, None, 0)
    tracker.restore(old)
    assert tracker.watermark_ms == 8_999


Op = tuple[str, int, int]  # ("event", input, ts) or ("tick", advance_ms, 0)

ops_strategy = st.lists(
    st.one_of(
        st.tuples(st.just("event"), st.integers(0, 2), st.integers(-5_000, 50_000)),
        st.tuples(st.just("tick"), st.integers(0, 3_000), st.just(0)),
    ),
    max_size=80,
)


@given(
    ops=ops_strategy,
    bound_ms=st.integers(0, 2_000),
    every=st.one_of(st.none(), st.integers(1, 500)),
    idle=st.one_of(st.none(), st.integers(1, 5_000)),
    quiet=st.one_of(st.none(), st.integers(1, 5_000)),
)
def test_the_tracker_watermark_never_decreases(
    ops: list[Op], bound_ms: int, every: int | None, idle: int | None, quiet: int | None
) -> None:
    strategy = BoundedOutOfOrderness(bound_ms, every, idle, quiet)
    tracker = WatermarkTracker(strategy, ["p0", "p1", "p2"])
    clock = FakeClock()
    previous = tracker.watermark_ms
    for kind, a, b in ops:
        if kind == "event":
            tracker.on_event(f"p{a}", b, None, clock.now_ms())
        else:
            tracker.on_tick(clock.advance(a))
        assert tracker.watermark_ms >= previous
        previous = tracker.watermark_ms
        if quiet is None:  # without the wall clock, never ahead of an input's own clock
            assert tracker.watermark_ms <= max(tracker.input_watermarks().values())


@given(ops=ops_strategy, bound_ms=st.integers(0, 2_000))
def test_per_record_watermark_is_the_minimum_of_the_inputs(ops: list[Op], bound_ms: int) -> None:
    tracker = WatermarkTracker(BoundedOutOfOrderness(bound_ms), ["p0", "p1", "p2"])
    highest: dict[str, int] = {}
    for kind, a, b in ops:
        if kind == "event":
            tracker.on_event(f"p{a}", b, None, 0)
            highest[f"p{a}"] = max(b, highest.get(f"p{a}", b))
    expected = MIN_WATERMARK
    if len(highest) == 3:
        expected = min(highest.values()) - bound_ms - 1
    assert tracker.watermark_ms == expected


# -- the operator's clock through a restart -------------------------------------------


def test_an_explicit_watermark_survives_a_snapshot() -> None:
    """A ``{"watermark": ...}`` line moves the operator past its tracker; a restore
    must keep that clock, or a reading the first run judged late would re-open
    and re-fire a window that already fired."""
    h = WindowHarness(
        WindowSpec(Tumbling(1_000), Count()),
        key=lambda r: r.id,
        timestamp_ms=lambda r: r.timestamp_ms,
        watermark=BoundedOutOfOrderness(0),
        late_output="late",
    )
    h.record(Reading("a", 100))
    h.watermark(5_000)
    assert [e.value for e in h.main()] == [1]
    restarted = KeyedWindows(
        h.windows.operator.spec,
        watermark=BoundedOutOfOrderness(0),
        state=h.state,
        event_timers=h.event_timers,
        processing_timers=h.processing_timers,
    )
    restarted.reload(h.windows.snapshot())
    assert restarted.watermark_ms == 5_000
    results, late = restarted.on_record("a", 200, Reading("a", 200), 0)
    assert (results, late) == ([], True)


def test_when_every_upstream_goes_idle_the_clock_goes_to_their_largest_watermark() -> None:
    from eddy.eventtime.watermarks import FromUpstream, WatermarkTracker

    tracker = WatermarkTracker(FromUpstream(idle_timeout_ms=10_000), ["upstream-0"])
    # Upstream 0 spoke; upstream 1 never will (no records in its partition).
    tracker.on_marker(0, 2, 59_999, now_ms=1_000)
    assert tracker.watermark_ms < 59_999  # waits for upstream 1
    # Both fall silent within the same tick: neither may hold the clock any more.
    assert tracker.on_tick(11_500)
    assert tracker.watermark_ms == 59_999
