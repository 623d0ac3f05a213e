"""The window operator against an independent offline oracle (semantics D and G)."""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from service.eventtime import (
    BoundedOutOfOrderness,
    Stats,
    TimerQueue,
    TimeWindow,
    Tumbling,
    WindowOperator,
    WindowResult,
    WindowSpec,
)
from service.eventtime.memory import MemoryTimerStore, MemoryWindowState

Event = tuple[str, int, float]
SIZE_MS = 1_000


def make_operator(
    lateness_ms: int = 0,
    state: MemoryWindowState | None = None,
    store: MemoryTimerStore | None = None,
) -> tuple[WindowOperator, MemoryWindowState, MemoryTimerStore]:
    state = state or MemoryWindowState()
    store = store or MemoryTimerStore()
    timers = TimerQueue(store)
    timers.reload()
    spec = WindowSpec(Tumbling(size_ms=SIZE_MS), Stats(lambda e: e[2]), lateness_ms)
    return WindowOperator(spec, state, timers), state, store


def run(events: list[Event], bound_ms: int, lateness_ms: int = 0) -> tuple[list[Any], list[Event]]:
    """Feed events with a per-record watermark; flush with a final watermark."""
    operator, _, _ = make_operator(lateness_ms)
    generator = BoundedOutOfOrderness(bound_ms).create()
    results: list[WindowResult] = []
    late: list[Event] = []
    for event in events:
        accepted, updates = operator.process(event[0], event[1], event)
        results += updates
        if not accepted:
            late.append(event)
        generator.on_event(event[1])
        results += operator.advance(generator.watermark_ms)
    results += operator.advance(2**62)
    return results, late


def oracle(events: list[Event], bound_ms: int) -> tuple[dict[Any, dict[str, Any]], list[Event]]:
    """Straightforward recomputation: late = its window ended before the watermark."""
    groups: dict[tuple[str, int], list[float]] = defaultdict(list)
    late = []
    max_ts: int | None = None
    for sensor, ts, temp in events:
        start = ts - ts % SIZE_MS
        watermark = None if max_ts is None else max_ts - bound_ms - 1
        if watermark is not None and start + SIZE_MS - 1 <= watermark:
            late.append((sensor, ts, temp))
        else:
            groups[(sensor, start)].append(temp)
        max_ts = ts if max_ts is None else max(max_ts, ts)
    expected = {
        key: {"count": len(v), "avg": sum(v) / len(v), "min": min(v), "max": max(v)}
        for key, v in groups.items()
    }
    return expected, late


events_strategy = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "c"]),
        st.integers(0, 20_000),
        st.floats(-50, 150, allow_nan=False),
    ),
    max_size=150,
)


@settings(max_examples=300)
@given(events=events_strategy, bound_ms=st.integers(0, 3_000))
def test_every_window_fires_once_with_the_oracles_aggregate(
    events: list[Event], bound_ms: int
) -> None:
    results, late = run(events, bound_ms)
    expected, expected_late = oracle(events, bound_ms)
    got = {(r.key, r.window.start_ms): r.value for r in results}
    assert len(got) == len(results), "a window fired twice"
    assert got.keys() == expected.keys()
    for key, value in expected.items():
        assert got[key]["count"] == value["count"]
        assert got[key]["min"] == value["min"]
        assert got[key]["max"] == value["max"]
        assert abs(got[key]["avg"] - value["avg"]) <= 1e-9 * max(1.0, abs(value["avg"]))
    assert late == expected_late
    assert all(r.timing == "first" for r in results)


@given(events=events_strategy, bound_ms=st.integers(0, 3_000))
def test_windows_fire_in_end_order_only_after_the_watermark_passes_them(
    events: list[Event], bound_ms: int
) -> None:
    results, _ = run(events, bound_ms)
    ends = [r.window.end_ms for r in results]
    assert ends == sorted(ends)
    assert all(r.watermark_ms >= r.window.max_timestamp_ms for r in results)


@given(data=st.data(), bound_ms=st.integers(0, 2_000))
def test_a_stream_shuffled_within_the_bound_loses_nothing(
    data: st.DataObject, bound_ms: int
) -> None:
    in_order = sorted(data.draw(events_strategy), key=lambda e: e[1])
    seed = data.draw(st.integers(0, 2**32))
    # Each event is delayed by at most `bound_ms`: exactly the promise the bound makes.
    shuffled = sorted(
        in_order, key=lambda e: e[1] + random.Random(seed + e[1]).randint(0, bound_ms)
    )
    results, late = run(shuffled, bound_ms)
    assert late == []
    assert sum(r.value["count"] for r in results) == len(in_order)


def test_allowed_lateness_refires_with_updates_then_forgets() -> None:
    operator, state, _ = make_operator(lateness_ms=2_000)
    operator.process("a", 100, ("a", 100, 1.0))
    first = operator.advance(999)
    assert [(r.timing, r.value["count"]) for r in first] == [("first", 1)]
    accepted, updates = operator.process("a", 200, ("a", 200, 3.0))
    assert accepted
    assert [(r.timing, r.value["count"], r.value["avg"]) for r in updates] == [("update", 2, 2.0)]
    assert operator.advance(2_998) == []
    assert state.windows  # still kept within the lateness
    assert operator.advance(2_999) == []
    assert not state.windows  # cleaned up at end - 1 + lateness
    accepted, updates = operator.process("a", 300, ("a", 300, 5.0))
    assert (accepted, updates) == (False, [])


def test_state_and_timers_survive_a_restart_mid_stream() -> None:
    events = [("a", ts, float(ts % 7)) for ts in range(0, 5_000, 90)]
    baseline, _ = run(events, bound_ms=500)

    operator, state, store = make_operator()
    generator = BoundedOutOfOrderness(500).create()
    results: list[WindowResult] = []
    half = len(events) // 2
    for event in events[:half]:
        results += operator.process(event[0], event[1], event)[1]
        generator.on_event(event[1])
        results += operator.advance(generator.watermark_ms)
    # "Restart": a new operator over the same stored state and timers.
    snapshot = generator.snapshot()
    operator, _, _ = make_operator(state=state, store=store)
    generator = BoundedOutOfOrderness(500).create()
    generator.restore(snapshot)
    operator.advance(generator.watermark_ms)
    for event in events[half:]:
        results += operator.process(event[0], event[1], event)[1]
        generator.on_event(event[1])
        results += operator.advance(generator.watermark_ms)
    results += operator.advance(2**62)
    assert results == baseline


def test_stats_result_of_the_seeds_example() -> None:
    stats = Stats(lambda x: x)
    acc = stats.create()
    for x in (70.0, 72.0, 68.0):
        acc = stats.add(x, acc)
    assert stats.result(acc) == {"count": 3, "avg": 70.0, "min": 68.0, "max": 72.0}
    merged = stats.merge(acc, stats.add(80.0, stats.create()))
    assert stats.result(merged)["max"] == 80.0
    assert TimeWindow(0, 1).contains(0)
