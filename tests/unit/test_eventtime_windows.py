"""Window assignment and watermark arithmetic (docs/semantics.md, "Bounded
out-of-orderness" and "Tumbling windows")."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eddy.eventtime import MIN_WATERMARK, BoundedOutOfOrderness, FakeClock, TimeWindow, Tumbling

timestamps = st.integers(min_value=-(10**12), max_value=10**13)


@given(ts=timestamps, size=st.integers(1, 10**7), data=st.data())
def test_tumbling_window_holds_its_timestamp_and_sits_on_the_grid(
    ts: int, size: int, data: st.DataObject
) -> None:
    offset = data.draw(st.integers(-(size - 1), size - 1))
    (window,) = Tumbling(size_ms=size, offset_ms=offset).assign(ts)
    assert window.start_ms <= ts < window.end_ms
    assert window.end_ms - window.start_ms == size
    assert (window.start_ms - offset) % size == 0


def test_tumbling_bounds_are_half_open() -> None:
    tumbling = Tumbling(size_ms=5_000)
    assert tumbling.assign(4_999) == (TimeWindow(0, 5_000),)
    assert tumbling.assign(5_000) == (TimeWindow(5_000, 10_000),)
    assert TimeWindow(0, 5_000).max_timestamp_ms == 4_999


def test_tumbling_rejects_nonsense_sizes() -> None:
    with pytest.raises(ValueError, match="size_ms"):
        Tumbling(size_ms=0)
    with pytest.raises(ValueError, match="offset_ms"):
        Tumbling(size_ms=10, offset_ms=10)


def test_bounded_out_of_orderness_is_max_minus_bound_minus_one() -> None:
    generator = BoundedOutOfOrderness(bound_ms=1_000).create()
    assert generator.watermark_ms == MIN_WATERMARK
    generator.on_event(7_000)
    assert generator.watermark_ms == 5_999
    generator.on_event(6_000)  # exactly `bound` behind the max: still on time
    assert generator.watermark_ms == 5_999
    assert TimeWindow(5_000, 6_000).max_timestamp_ms <= generator.watermark_ms


@given(st.lists(timestamps, min_size=1, max_size=200), st.integers(0, 10**6))
def test_watermark_never_goes_backwards_and_trails_the_maximum(
    stream: list[int], bound: int
) -> None:
    generator = BoundedOutOfOrderness(bound_ms=bound).create()
    previous = MIN_WATERMARK
    for i, ts in enumerate(stream):
        generator.on_event(ts)
        assert generator.watermark_ms >= previous
        assert generator.watermark_ms == max(stream[: i + 1]) - bound - 1
        previous = generator.watermark_ms


def test_watermark_snapshot_restores_the_same_clock() -> None:
    generator = BoundedOutOfOrderness(bound_ms=100).create()
    generator.on_event(1_000)
    restored = BoundedOutOfOrderness(bound_ms=100).create()
    restored.restore(generator.snapshot())
    assert restored.watermark_ms == generator.watermark_ms == 899
    restored.on_event(500)
    assert restored.watermark_ms == 899


def test_fake_clock_only_moves_forward() -> None:
    clock = FakeClock(start_ms=10)
    assert clock.advance(5) == 15
    with pytest.raises(ValueError, match="backwards"):
        clock.advance(-1)
