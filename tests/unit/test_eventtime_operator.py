"""The window operator against an independent offline oracle (docs/semantics.md,
"Windows" and "Allowed lateness and late data")."""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from eddy.eventtime import BoundedOutOfOrderness, Stats, TimeWindow, Tumbling, WindowSpec
from eddy.eventtime.harness import Emission, WindowHarness
from eddy.eventtime.keyed import KeyedWindows

Event = tuple[str, int, float]
SIZE_MS = 1_000


def harness(bound_ms: int, lateness_ms: int = 0) -> WindowHarness:
    spec = WindowSpec(
        Tumbling(size_ms=SIZE_MS), Stats(lambda e: e[2]), allowed_lateness_ms=lateness_ms
    )
    return WindowHarness(
        spec,
        key=lambda e: e[0],
        timestamp_ms=lambda e: e[1],
        watermark=BoundedOutOfOrderness(bound_ms),
        late_output="late",
    )


def run(events: list[Event], bound_ms: int) -> tuple[list[Emission], list[Any]]:
    h = harness(bound_ms)
    for event in events:
        h.record(event)
    h.end_of_input()
    return h.main(), [e.record for e in h.outputs if e.output == "late"]


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
    got = {(r.key, r.window_start_ms): r.value for r in results}
    assert len(got) == len(results), "a window fired twice"
    assert got.keys() == expected.keys()
    for key, value in expected.items():
        assert got[key]["count"] == value["count"]
        assert got[key]["min"] == value["min"]
        assert got[key]["max"] == value["max"]
        assert abs(got[key]["avg"] - value["avg"]) <= 1e-9 * max(1.0, abs(value["avg"]))
    assert late == expected_late
    assert all(r.kind == "first" for r in results)


@given(events=events_strategy, bound_ms=st.integers(0, 3_000))
def test_windows_fire_in_end_order(events: list[Event], bound_ms: int) -> None:
    results, _ = run(events, bound_ms)
    ends = [r.window_end_ms for r in results]
    assert ends == sorted(ends)


@given(data=st.data(), bound_ms=st.integers(0, 2_000))
def test_results_do_not_depend_on_arrival_order_within_the_bound(
    data: st.DataObject, bound_ms: int
) -> None:
    in_order = sorted(data.draw(events_strategy), key=lambda e: e[1])
    seed = data.draw(st.integers(0, 2**32))
    rng = random.Random(seed)
    # Each event is delayed by at most `bound_ms`: exactly the promise the bound makes.
    shuffled = sorted(in_order, key=lambda e: e[1] + rng.randint(0, bound_ms))
    results, late = run(shuffled, bound_ms)
    baseline, _ = run(in_order, bound_ms)
    assert late == []
    summary = {
        (r.key, r.window_start_ms): (r.value["count"], r.value["min"], r.value["max"])
        for r in results
    }
    assert summary == {
        (r.key, r.window_start_ms): (r.value["count"], r.value["min"], r.value["max"])
        for r in baseline
    }
    assert sum(r.value["count"] for r in results) == len(in_order)


@given(events=events_strategy, bound_ms=st.integers(0, 3_000), cut=st.integers(0, 150))
def test_stopping_and_restoring_from_state_changes_nothing(
    events: list[Event], bound_ms: int, cut: int
) -> None:
    baseline, _ = run(events, bound_ms)
    first = harness(bound_ms)
    for event in events[:cut]:
        first.record(event)
    # "Restart": a new operator over the same stored state, timers and clock.
    second = harness(bound_ms)
    second.state, second.event_timers = first.state, first.event_timers
    second.windows = KeyedWindows(
        first.windows.operator.spec,
        watermark=BoundedOutOfOrderness(bound_ms),
        state=first.state,
        event_timers=first.event_timers,
        processing_timers=first.processing_timers,
    )
    second.windows.reload(first.windows.snapshot())
    for event in events[cut:]:
        second.record(event)
    second.end_of_input()
    assert first.main() + second.main() == baseline


def test_allowed_lateness_refires_with_updates_then_forgets() -> None:
    h = harness(bound_ms=0, lateness_ms=2_000)
    h.record(("a", 100, 1.0))
    h.record(("a", 1_000, 9.0))  # watermark 999: [0, 1000) fires
    assert [(e.kind, e.value["count"]) for e in h.main()] == [("first", 1)]
    h.record(("a", 200, 3.0))  # late, but within the lateness: an update
    assert [(e.kind, e.value["count"], e.value["avg"]) for e in h.main()][-1] == ("update", 2, 2.0)
    h.record(("a", 3_000, 9.0))  # watermark 2999 = end - 1 + lateness: state goes
    assert ("a", TimeWindow(0, 1_000)) not in h.state.windows
    h.record(("a", 300, 5.0))
    assert [e.record for e in h.outputs if e.output == "late"] == [("a", 300, 5.0)]
