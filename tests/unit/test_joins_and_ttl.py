"""Joins and state time-to-live (docs/semantics.md, "Joins" and "Keyed state")."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eddy.eventtime import BoundedOutOfOrderness, Tumbling
from eddy.eventtime.harness import ProcessHarness, WindowHarness
from eddy.eventtime.joins import IntervalJoin, UnboundedJoin, tag, window_cogroup, window_join
from eddy.eventtime.ttl import Ttl

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
    """The replay example ``join-002`` (docs/replay.md): each match is emitted
    whichever side arrives first."""
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


def explicit_join_harness(lower_ms: int, upper_ms: int) -> ProcessHarness:
    """An interval join whose watermark moves only by ``watermark()``, emitting
    ``(left t, right t)`` pairs, so a test can put the watermark exactly on a bound."""
    return ProcessHarness(
        IntervalJoin(lower_ms, upper_ms, lambda lf, rt: (lf["t"], rt["t"])),
        key=lambda e: e["k"],
        timestamp_ms=lambda e: e["t"],
        inputs=("left", "right"),
    )


def test_interval_join_with_negative_bounds_keeps_a_left_until_its_own_timestamp() -> None:
    """Bounds -3 s / -1 s: a left at 85000 matches rights in [82000, 84000]. With the
    watermark exactly at 84000 a right at 84000 is on time, so the left must still be
    buffered; as in Flink it stays until the watermark reaches 85000, its own time."""
    h = explicit_join_harness(-3_000, -1_000)
    h.record({"k": "e", "t": 85_000}, "left")
    h.watermark(84_000)
    h.record({"k": "e", "t": 84_000}, "right")
    assert h.output() == [(85_000, 84_000)]
    h.watermark(85_000)
    assert h.backend.values[("right", "e")] == [[84_000, {"k": "e", "t": 84_000}]]
    assert ("left", "e") not in h.backend.values
    h.end_of_input()
    assert h.backend.values == {}


def test_interval_join_with_positive_bounds_keeps_a_right_until_its_own_timestamp() -> None:
    """Bounds +500 ms / +2 s: a right at 85000 matches lefts in [83000, 84500]. With
    the watermark exactly at 84500 a left at 84500 is on time, so the right must still
    be buffered; as in Flink it stays until the watermark reaches 85000."""
    h = explicit_join_harness(500, 2_000)
    h.record({"k": "e", "t": 85_000}, "right")
    h.watermark(84_500)
    h.record({"k": "e", "t": 84_500}, "left")
    assert h.output() == [(84_500, 85_000)]
    h.watermark(85_000)
    assert h.backend.values[("left", "e")] == [[84_500, {"k": "e", "t": 84_500}]]
    assert ("right", "e") not in h.backend.values
    h.end_of_input()
    assert h.backend.values == {}


# Records and watermarks on a coarse grid (units of 100 ms), with bounds on the same
# grid, so that a watermark lands exactly on a record and on a bound often.
JoinOp = tuple[str, str, int]  # ("left" | "right", key, t) or ("wm", "", t)
join_ops = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(["left", "right"]), st.sampled_from("ab"), st.integers(0, 8)),
        st.tuples(st.just("wm"), st.just(""), st.integers(0, 8)),
    ),
    max_size=30,
)
BOUND_FAMILIES: dict[str, st.SearchStrategy[tuple[int, int]]] = {
    "both-negative": st.tuples(st.integers(-4, -1), st.integers(0, 3)).map(
        lambda ub: (ub[0] - ub[1], ub[0])
    ),
    "both-positive": st.tuples(st.integers(1, 4), st.integers(0, 3)).map(
        lambda lw: (lw[0], lw[0] + lw[1])
    ),
    "mixed": st.tuples(st.integers(-4, -1), st.integers(1, 4)),
    "zero": st.one_of(
        st.just((0, 0)),
        st.integers(-4, -1).map(lambda lo: (lo, 0)),
        st.integers(1, 4).map(lambda up: (0, up)),
    ),
}


def flink_interval_join(ops: list[JoinOp], lower: int, upper: int) -> list[tuple[int, int]]:
    """The oracle: every pair of on-time records (``t >=`` the watermark when it
    arrives) of one key with ``lower <= right t - left t <= upper``, in a nested loop,
    less the pairs Flink's interval join loses by design. Flink drops a buffered record
    when the watermark moves to the far end of its range on the other side (or to its
    own timestamp, if that is later); a record of the other side arriving then exactly
    on the watermark, exactly at that far end, is on time but finds it gone."""
    watermark: int | None = None
    on_time: list[tuple[str, str, int, int, int | None]] = []  # side, key, t, index, wm
    pairs = []
    for i, (side, key, t) in enumerate(ops):
        if side == "wm":
            watermark = t if watermark is None else max(watermark, t)
            continue
        if watermark is not None and t < watermark:
            continue  # late
        for other_side, other_key, other_t, j, other_watermark in on_time:
            if other_side == side or other_key != key:
                continue
            (lt, li), (rt, ri) = (
                ((t, i), (other_t, j)) if side == "left" else ((other_t, j), (t, i))
            )
            if not lower <= rt - lt <= upper:
                continue
            far_end = other_t + upper if other_side == "left" else other_t - lower
            dropped = far_end >= other_t and other_watermark != watermark == far_end
            if t == far_end and dropped:
                continue
            pairs.append((li, ri))
        on_time.append((side, key, t, i, watermark))
    return sorted(pairs)


def run_interval_join(ops: list[JoinOp], lower: int, upper: int) -> ProcessHarness:
    h = ProcessHarness(
        IntervalJoin(lower * 100, upper * 100, lambda lf, rt: (lf["i"], rt["i"])),
        key=lambda e: e["k"],
        timestamp_ms=lambda e: e["t"],
        inputs=("left", "right"),
    )
    for i, (side, key, t) in enumerate(ops):
        if side == "wm":
            h.watermark(t * 100)
        else:
            h.record({"k": key, "t": t * 100, "i": i}, side)
    h.end_of_input()
    return h


@pytest.mark.parametrize("family", sorted(BOUND_FAMILIES))
@settings(max_examples=300)
@given(data=st.data(), ops=join_ops)
def test_interval_join_with_explicit_watermarks_matches_flink(
    family: str, data: st.DataObject, ops: list[JoinOp]
) -> None:
    """Records of both sides and watermarks in any order, the watermark often exactly
    on a record: the join emits each pair the oracle gives, once, and leaves no state."""
    lower, upper = data.draw(BOUND_FAMILIES[family], label="bounds (x 100 ms)")
    h = run_interval_join(ops, lower, upper)
    assert sorted(h.output()) == flink_interval_join(ops, lower, upper)
    assert h.backend.values == {}, "join state must be empty once the watermark passed it"


@pytest.mark.parametrize("family", sorted(BOUND_FAMILIES))
@given(
    data=st.data(),
    first=st.sampled_from(["left", "right"]),
    at=st.sampled_from(["lower", "upper"]),
    t=st.integers(0, 8),
    ahead=st.booleans(),
)
def test_interval_join_when_the_watermark_lands_exactly_on_a_bound(
    family: str, data: st.DataObject, first: str, at: str, t: int, ahead: bool
) -> None:
    """One record, then the watermark moves exactly to where its partner is, at one
    of the bounds, and the partner arrives (on time); ``ahead``: the watermark was
    already at the first record's timestamp when it arrived."""
    lower, upper = data.draw(BOUND_FAMILIES[family], label="bounds (x 100 ms)")
    bound = lower if at == "lower" else upper
    partner = t + bound if first == "left" else t - bound
    second = "right" if first == "left" else "left"
    ops: list[JoinOp] = [("wm", "", t)] if ahead else []
    ops += [(first, "a", t), ("wm", "", partner), (second, "a", partner)]
    h = run_interval_join(ops, lower, upper)
    assert sorted(h.output()) == flink_interval_join(ops, lower, upper)
    assert h.backend.values == {}


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
