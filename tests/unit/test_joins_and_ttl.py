"""Joins (semantics F) and state time-to-live (H.5)."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from service.eventtime import BoundedOutOfOrderness, Tumbling
from service.eventtime.harness import ProcessHarness, WindowHarness
from service.eventtime.joins import IntervalJoin, UnboundedJoin, tag, window_cogroup, window_join
from service.eventtime.ttl import Ttl

HOUR, MINUTE = 3_600_000, 60_000


def join_harness(fn: Any, bound_ms: int = 0) -> ProcessHarness:
    return ProcessHarness(
        fn,
        key=lambda e: e["k"],
        timestamp_ms=lambda e: e["t"],
        watermark=BoundedOutOfOrderness(bound_ms),
        inputs=("left", "right"),
    )


def test_the_002_walkthrough_inner_join() -> None:
    h = join_harness(UnboundedJoin())
    for n in (1, 2, 3):
        h.record({"k": "a", "t": n, "n": n}, "right")
    assert h.output() == []
    h.record({"k": "a", "t": 4, "n": 4}, "left")
    assert [(o["left"]["n"], o["right"]["n"]) for o in h.output()] == [(4, 1), (4, 2), (4, 3)]
    h.record({"k": "a", "t": 5, "n": 5}, "right")
    assert [(o["left"]["n"], o["right"]["n"]) for o in h.output()][-1] == (4, 5)
    assert len(h.output()) == 4


def test_a_left_join_pads_until_a_match_and_then_keeps_updating() -> None:
    h = join_harness(UnboundedJoin(left_outer=True))
    h.record({"k": "a", "t": 1, "n": 1}, "left")
    h.record({"k": "a", "t": 2, "n": 2}, "right")
    assert [(o["left"]["n"], o["right"] and o["right"]["n"]) for o in h.output()] == [
        (1, None),
        (1, 2),
    ]


def test_an_unbounded_join_with_a_ttl_forgets_old_rows() -> None:
    h = ProcessHarness(
        UnboundedJoin(ttl=Ttl(10_000)),
        key=lambda e: e["k"],
        inputs=("left", "right"),
        processing_time_ms=0,
    )
    h.record({"k": "a", "n": 1}, "right")
    h.processing_time(10_000)  # the right row expires and its cleanup timer deletes it
    assert h.backend.values == {}
    h.record({"k": "a", "n": 2}, "left")
    assert h.output() == []


def test_interval_join_with_minus_one_hour_plus_fifteen_minutes() -> None:
    h = join_harness(IntervalJoin(-HOUR, 15 * MINUTE))
    t0 = 10 * HOUR
    rights = [t0 - HOUR - 1, t0 - HOUR, t0, t0 + 15 * MINUTE, t0 + 15 * MINUTE + 1]
    for t in rights:
        h.record({"k": "s", "t": t, "side": "r"}, "right")
    h.record({"k": "s", "t": t0, "side": "l"}, "left")
    assert sorted(o["right"]["t"] - t0 for o in h.output()) == [-HOUR, 0, 15 * MINUTE]


def test_interval_join_state_is_gone_once_the_watermark_passes_the_bounds() -> None:
    h = join_harness(IntervalJoin(-HOUR, 15 * MINUTE))
    h.record({"k": "s", "t": 0}, "left")  # kept until 15 min: a right may still come
    h.record({"k": "s", "t": 0}, "right")  # kept until 1 h: a left may still come
    h.watermark(15 * MINUTE)
    assert [e for e in h.backend.values.values() if e] == [[[0, {"k": "s", "t": 0}]]]
    h.watermark(HOUR)
    assert h.backend.values == {}
    assert h.event_timers.timers == set()


Row = tuple[str, int]
rows = st.lists(st.tuples(st.sampled_from("ab"), st.integers(0, 5_000)), max_size=25)


@settings(max_examples=200)
@given(
    left=rows,
    right=rows,
    lower=st.integers(-1_000, 500),
    width=st.integers(0, 1_500),
    bound=st.integers(0, 800),
    seed=st.integers(0, 2**32),
)
def test_interval_join_equals_the_nested_loop_join_whatever_the_order_within_the_bound(
    left: list[Row], right: list[Row], lower: int, width: int, bound: int, seed: int
) -> None:
    upper = lower + width
    events = [("left", k, t, i) for i, (k, t) in enumerate(left)]
    events += [("right", k, t, i) for i, (k, t) in enumerate(right)]
    events.sort(key=lambda e: e[2])
    rng = random.Random(seed)
    # Disorder the watermark allows: each element is delayed by at most `bound`.
    shuffled = sorted(events, key=lambda e: e[2] + rng.randint(0, bound))
    h = join_harness(IntervalJoin(lower, upper, lambda lf, rt: (lf["i"], rt["i"])), bound)
    for side, k, t, i in shuffled:
        h.record({"k": k, "t": t, "i": i}, side)
    h.end_of_input()
    expected = sorted(
        (li, ri)
        for li, (lk, lt) in enumerate(left)
        for ri, (rk, rt) in enumerate(right)
        if lk == rk and lower <= rt - lt <= upper
    )
    assert sorted(h.output()) == expected
    assert h.backend.values == {}, "join state must be empty once the watermark passed it"


def test_window_join_pairs_both_sides_per_window_and_cogroup_lists_them() -> None:
    def run(spec: Any) -> list[Any]:
        h = WindowHarness(
            spec,
            key=lambda e: e["value"]["k"],
            timestamp_ms=lambda e: e["value"]["t"],
            watermark=BoundedOutOfOrderness(0),
        )
        for side, t, n in ((0, 1, "l1"), (1, 2, "r1"), (0, 3, "l2"), (1, 12, "r2")):
            h.record(tag(side, {"k": "a", "t": t, "n": n}))
        h.end_of_input()
        return [(e.window_start_ms, e.value) for e in h.main()]

    joined = run(window_join(Tumbling(10), lambda lf, rt: (lf["n"], rt["n"])))
    assert joined == [(0, ("l1", "r1")), (0, ("l2", "r1"))]
    grouped = run(
        window_cogroup(Tumbling(10), lambda ls, rs: ([x["n"] for x in ls], [x["n"] for x in rs]))
    )
    assert grouped == [(0, (["l1", "l2"], ["r1"])), (10, ([], ["r2"]))]


@given(writes=st.lists(st.integers(0, 20_000), min_size=1, max_size=20), ttl=st.integers(1, 5_000))
def test_ttl_state_reads_as_absent_after_expiry_and_is_then_deleted(
    writes: list[int], ttl: int
) -> None:
    class Writer:
        def process_element(self, value: Any, ctx: Any) -> None:
            state = ctx.state.value("v", Ttl(ttl))
            ctx.output(state.get())
            state.set(value["n"])

    h = ProcessHarness(Writer(), key=lambda v: "k", processing_time_ms=0)
    now = 0
    last_write: int | None = None
    for i, gap in enumerate(sorted(writes)):
        h.processing_time(gap)
        now = max(now, gap)
        h.record({"n": i})
        seen = h.output()[-1]
        alive = last_write is not None and now < last_write + ttl
        assert (seen is not None) == alive
        last_write = now
    assert last_write is not None
    h.processing_time(last_write + ttl)
    assert h.backend.values == {}, "expired state must be deleted, not just hidden"
