"""Window functions and evictors (docs/semantics.md, "Window functions" and
"Evictors"), on the classic temperature examples (minimum, average, and min-max per
sensor per window) and on a count that says "first" or "update": reduce, aggregate,
process-window with per-window and global state, an incremental aggregate feeding
a process-window function, and evictors."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import pytest

from eddy.eventtime import (
    Avg,
    BoundedOutOfOrderness,
    ContinuousEventTimeTrigger,
    CountEvictor,
    CountTrigger,
    Max,
    Min,
    MinMax,
    Reduce,
    Session,
    Stats,
    Sum,
    TimeEvictor,
    TimeWindow,
    Tumbling,
    WindowContext,
    WindowSpec,
)
from eddy.eventtime.functions import Element
from eddy.eventtime.harness import WindowHarness


class Reading(NamedTuple):
    id: str
    timestamp_ms: int
    temperature: float


# Temperature readings for the min, average and min-max examples: two sensors over
# two 15 s windows.
READINGS = [
    Reading("sensor_1", 1_000, 66.0),
    Reading("sensor_2", 2_000, 55.5),
    Reading("sensor_1", 7_000, 64.0),
    Reading("sensor_2", 9_000, 57.0),
    Reading("sensor_1", 14_999, 65.0),
    Reading("sensor_1", 15_000, 70.0),
    Reading("sensor_2", 16_000, 54.0),
]


def run(spec: WindowSpec, readings: Sequence[Reading] = READINGS, **kwargs: Any) -> WindowHarness:
    h = WindowHarness(
        spec,
        key=lambda r: r.id,
        timestamp_ms=lambda r: r.timestamp_ms,
        watermark=BoundedOutOfOrderness(kwargs.pop("bound_ms", 0)),
        **kwargs,
    )
    for reading in readings:
        h.record(reading)
    h.end_of_input()
    return h


def values(h: WindowHarness) -> list[tuple[str | None, int | None, Any]]:
    return [(e.key, e.window_start_ms, e.value) for e in h.main()]


# -- min, average, min-max: reduce, aggregate, process-window ---------------------


class AvgTempFunction:
    """An average written as a user's aggregate function: accumulator (id, sum, count),
    result (id, avg)."""

    def create(self) -> tuple[str, float, int]:
        return ("", 0.0, 0)

    def add(self, r: Reading, acc: tuple[str, float, int]) -> tuple[str, float, int]:
        return (r.id, r.temperature + acc[1], 1 + acc[2])

    def result(self, acc: tuple[str, float, int]) -> tuple[str, float]:
        return (acc[0], acc[1] / acc[2])

    def merge(self, a: tuple[str, float, int], b: tuple[str, float, int]) -> tuple[str, float, int]:
        return (a[0] or b[0], a[1] + b[1], a[2] + b[2])


class HighAndLowTempProcessFunction:
    """A full-window process function: (id, min, max, window end) from all the
    window's readings at once."""

    def process(self, elements: Sequence[Any], ctx: WindowContext) -> list[Any]:
        temps = [r.temperature for r in elements]
        return [(ctx.key, min(temps), max(temps), ctx.window.end_ms)]


class AssignWindowEndProcessFunction:
    """The second half of an incremental min-max: gets the one reduced value and adds
    the window end."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def process(self, elements: Sequence[Any], ctx: WindowContext) -> list[Any]:
        self.calls.append(len(elements))
        _, low, high = elements[0]
        return [(ctx.key, low, high, ctx.window.end_ms)]


MIN_15S = [
    ("sensor_1", 0, 64.0),
    ("sensor_2", 0, 55.5),
    ("sensor_1", 15_000, 70.0),
    ("sensor_2", 15_000, 54.0),
]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param(
            WindowSpec(
                Tumbling(15_000),
                Reduce(
                    lambda r1, r2: (r1[0], min(r1[1], r2[1])), of=lambda r: (r.id, r.temperature)
                ),
            ),
            [(k, s, (k, v)) for k, s, v in MIN_15S],
            id="min-temp-user-reduce",
        ),
        pytest.param(
            WindowSpec(Tumbling(15_000), Min(lambda r: r.temperature)), MIN_15S, id="min-builtin"
        ),
        pytest.param(
            WindowSpec(Tumbling(15_000), Max(lambda r: r.temperature)),
            [
                ("sensor_1", 0, 66.0),
                ("sensor_2", 0, 57.0),
                ("sensor_1", 15_000, 70.0),
                ("sensor_2", 15_000, 54.0),
            ],
            id="max-builtin",
        ),
        pytest.param(
            WindowSpec(Tumbling(15_000), AvgTempFunction()),
            [
                ("sensor_1", 0, ("sensor_1", 65.0)),
                ("sensor_2", 0, ("sensor_2", 56.25)),
                ("sensor_1", 15_000, ("sensor_1", 70.0)),
                ("sensor_2", 15_000, ("sensor_2", 54.0)),
            ],
            id="avg-temp-user-aggregate",
        ),
        pytest.param(
            WindowSpec(Tumbling(15_000), Avg(lambda r: r.temperature)),
            [
                ("sensor_1", 0, 65.0),
                ("sensor_2", 0, 56.25),
                ("sensor_1", 15_000, 70.0),
                ("sensor_2", 15_000, 54.0),
            ],
            id="avg-builtin",
        ),
        pytest.param(
            WindowSpec(Tumbling(5_000), process=HighAndLowTempProcessFunction()),
            [
                ("sensor_1", 0, ("sensor_1", 66.0, 66.0, 5_000)),
                ("sensor_2", 0, ("sensor_2", 55.5, 55.5, 5_000)),
                ("sensor_1", 5_000, ("sensor_1", 64.0, 64.0, 10_000)),
                ("sensor_2", 5_000, ("sensor_2", 57.0, 57.0, 10_000)),
                ("sensor_1", 10_000, ("sensor_1", 65.0, 65.0, 15_000)),
                ("sensor_1", 15_000, ("sensor_1", 70.0, 70.0, 20_000)),
                ("sensor_2", 15_000, ("sensor_2", 54.0, 54.0, 20_000)),
            ],
            id="min-max-5s-process-window",
        ),
        pytest.param(
            WindowSpec(Tumbling(15_000), MinMax(lambda r: r.temperature)),
            [
                ("sensor_1", 0, {"min": 64.0, "max": 66.0}),
                ("sensor_2", 0, {"min": 55.5, "max": 57.0}),
                ("sensor_1", 15_000, {"min": 70.0, "max": 70.0}),
                ("sensor_2", 15_000, {"min": 54.0, "max": 54.0}),
            ],
            id="min-max-builtin",
        ),
    ],
)
def test_temperature_window_functions(spec: WindowSpec, expected: list[Any]) -> None:
    assert values(run(spec)) == expected


def test_incremental_reduce_feeds_one_value_to_the_process_function() -> None:
    """Min-max, incremental version: reduce (id, min, max) as readings come, then the process
    function adds the window end; it sees exactly one element per firing."""
    assign_end = AssignWindowEndProcessFunction()
    spec = WindowSpec(
        Tumbling(15_000),
        Reduce(
            lambda a, b: (a[0], min(a[1], b[1]), max(a[2], b[2])),
            of=lambda r: (r.id, r.temperature, r.temperature),
        ),
        process=assign_end,
    )
    assert values(run(spec)) == [
        ("sensor_1", 0, ("sensor_1", 64.0, 66.0, 15_000)),
        ("sensor_2", 0, ("sensor_2", 55.5, 57.0, 15_000)),
        ("sensor_1", 15_000, ("sensor_1", 70.0, 70.0, 30_000)),
        ("sensor_2", 15_000, ("sensor_2", 54.0, 54.0, 30_000)),
    ]
    assert assign_end.calls == [1, 1, 1, 1]


def test_stats_is_count_avg_min_max() -> None:
    h = run(WindowSpec(Tumbling(15_000), Stats(lambda r: r.temperature)), READINGS[:5])
    assert values(h)[0] == ("sensor_1", 0, {"count": 3, "avg": 65.0, "min": 64.0, "max": 66.0})


def test_session_merge_uses_the_aggregates_merge() -> None:
    spec = WindowSpec(Session(3_000), AvgTempFunction())
    readings = [Reading("s", 0, 10.0), Reading("s", 6_000, 20.0), Reading("s", 3_000, 60.0)]
    assert values(run(spec, readings, bound_ms=10_000)) == [("s", 0, ("s", 30.0))]


# -- process-window state -----------------------------------------------------------


class UpdatingWindowCountFunction:
    """Counts a window's readings (10 s windows, 5 s of allowed lateness below), and
    says "first" or "update" from its own per-window state."""

    def process(self, elements: Sequence[Any], ctx: WindowContext) -> list[Any]:
        kind = "update" if ctx.window_state.get("isUpdate") else "first"
        ctx.window_state["isUpdate"] = True
        return [(ctx.key, ctx.window.end_ms, len(elements), kind)]


def test_per_window_state_tells_first_from_update() -> None:
    spec = WindowSpec(
        Tumbling(10_000), process=UpdatingWindowCountFunction(), allowed_lateness_ms=5_000
    )
    readings = [Reading("s1", ts, 0.0) for ts in (1_000, 5_000, 12_000, 8_000, 9_000, 21_000)]
    h = run(spec, readings, bound_ms=1_000)
    assert [e.value for e in h.main()] == [
        ("s1", 10_000, 2, "first"),
        ("s1", 10_000, 3, "update"),
        ("s1", 10_000, 4, "update"),
        ("s1", 20_000, 1, "first"),  # a new window: a new, empty state
        ("s1", 30_000, 1, "first"),
    ]
    assert [e.kind for e in h.main()] == [v[3] for v in [e.value for e in h.main()]]


class WindowsSoFar:
    """Global (per-key) state: how many windows this key has emitted, across windows."""

    def process(self, elements: Sequence[Any], ctx: WindowContext) -> list[Any]:
        ctx.global_state["windows"] = ctx.global_state.get("windows", 0) + 1
        return [(len(elements), ctx.global_state["windows"], ctx.watermark_ms)]


def test_global_state_outlives_windows_and_is_per_key() -> None:
    readings = [
        Reading(k, ts, 0.0)
        for k, ts in [("a", 0), ("b", 10), ("a", 1_000), ("a", 2_500), ("b", 3_100)]
    ]
    h = run(WindowSpec(Tumbling(1_000), process=WindowsSoFar()), readings)
    by_key: dict[str, list[tuple[int, int]]] = {}
    for e in h.main():
        by_key.setdefault(e.key or "", []).append(e.value[:2])
    assert by_key == {"a": [(1, 1), (1, 2), (1, 3)], "b": [(1, 1), (1, 2)]}
    assert h.main()[0].value[2] == 999, "the process function sees the firing watermark"


# -- evictors -------------------------------------------------------------------


class AsList:
    def process(self, elements: Sequence[Any], ctx: WindowContext) -> list[Any]:
        return [[r.temperature for r in elements]]


def fire_on_each(evictor: Any) -> WindowSpec:
    return WindowSpec(Tumbling(60_000), process=AsList(), trigger=CountTrigger(1), evictor=evictor)


@pytest.mark.parametrize(
    ("evictor", "expected"),
    [
        pytest.param(
            CountEvictor(2), [[1.0], [1.0, 2.0], [2.0, 3.0], [3.0, 4.0]], id="count-2-before"
        ),
        pytest.param(
            CountEvictor(2, after=True),
            [[1.0], [1.0, 2.0], [1.0, 2.0, 3.0], [2.0, 3.0, 4.0]],
            id="count-2-after",
        ),
        pytest.param(
            TimeEvictor(1_000), [[1.0], [1.0, 2.0], [2.0, 3.0], [4.0]], id="time-1s-before"
        ),
        pytest.param(
            TimeEvictor(1_000, after=True),
            [[1.0], [1.0, 2.0], [1.0, 2.0, 3.0], [2.0, 3.0, 4.0]],
            id="time-1s-after",
        ),
    ],
)
def test_evictors_before_and_after_the_function(evictor: Any, expected: list[list[float]]) -> None:
    readings = [Reading("s", ts, float(i)) for i, ts in enumerate([0, 600, 1_500, 2_600], start=1)]
    assert [v for *_, v in values(run(fire_on_each(evictor), readings))][:4] == expected


class DropImplausible:
    """A custom evictor: sensor glitches above 150 F never reach the function."""

    def evict_before(self, elements: list[Element], window: TimeWindow, ctx: Any) -> list[Element]:
        return [e for e in elements if e[1].temperature <= 150]

    def evict_after(self, elements: list[Element], window: TimeWindow, ctx: Any) -> list[Element]:
        return elements


def test_custom_evictor_with_an_aggregate_runs_the_aggregate_on_what_is_left() -> None:
    readings = [Reading("s", ts, t) for ts, t in [(0, 60.0), (1, 999.0), (2, 70.0)]]
    spec = WindowSpec(Tumbling(10_000), Avg(lambda r: r.temperature), evictor=DropImplausible())
    assert values(run(spec, readings)) == [("s", 0, 65.0)]


def test_an_evictor_that_leaves_nothing_emits_nothing() -> None:
    readings = [Reading("s", 0, 999.0)]
    spec = WindowSpec(Tumbling(10_000), Avg(lambda r: r.temperature), evictor=DropImplausible())
    assert values(run(spec, readings)) == []


def test_count_evictor_on_early_firings_keeps_a_rolling_window() -> None:
    spec = WindowSpec(
        Tumbling(10_000),
        Sum(lambda r: r.temperature),
        trigger=ContinuousEventTimeTrigger(1_000),
        evictor=CountEvictor(2),
    )
    readings = [Reading("s", ts, float(ts // 1_000)) for ts in (100, 1_100, 2_100, 3_100)]
    # Each second: the sum of the last two readings seen by then.
    assert [v for *_, v in values(run(spec, readings))][:3] == [1.0, 3.0, 5.0]
