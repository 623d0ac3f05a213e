"""Properties of the event-time core, checked by Hypothesis against oracles written
here from the rules (docs/semantics.md, "Watermarks", "Windows" and "Allowed lateness
and late data"), not from the implementation:

* results do not depend on arrival order when no record is later than the bound;
* the operator's watermark never decreases;
* every record is in exactly the windows its timestamp belongs to (less those
  already late), and late only when none is left;
* session windows equal a batch sessionization;
* stopping mid-stream and restoring from state gives the uninterrupted run's output.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from eddy.eventtime import (
    MIN_WATERMARK,
    BoundedOutOfOrderness,
    ContinuousEventTimeTrigger,
    Count,
    CountTrigger,
    Global,
    PurgingTrigger,
    Session,
    Sliding,
    Sum,
    Tumbling,
    WindowContext,
    WindowSpec,
)
from eddy.eventtime.definition import MAX_WINDOWS_PER_ELEMENT
from eddy.eventtime.harness import Emission, WindowHarness
from eddy.eventtime.keyed import KeyedWindows
from eddy.eventtime.spec import count_window


class Reading(NamedTuple):
    id: str
    timestamp_ms: int
    value: int = 1


class Timestamps:
    """A process-window function: the sorted timestamps of the window's readings."""

    def process(self, elements: Sequence[Any], ctx: WindowContext) -> list[Any]:
        return [sorted(r.timestamp_ms for r in elements)]


def harness(spec: WindowSpec, bound_ms: int | None, processing_time_ms: int = 0) -> WindowHarness:
    return WindowHarness(
        spec,
        key=lambda r: r.id,
        timestamp_ms=lambda r: r.timestamp_ms,
        watermark=None if bound_ms is None else BoundedOutOfOrderness(bound_ms),
        late_output="late",
        processing_time_ms=processing_time_ms,
    )


def feed_all(h: WindowHarness, readings: Sequence[Reading]) -> list[Emission]:
    for reading in readings:
        h.record(reading)
    h.end_of_input()
    return h.outputs


def within_bound(readings: list[Reading], bound_ms: int, seed: int) -> list[Reading]:
    """An arrival order where each reading is delayed by at most ``bound_ms``: the
    promise a bounded out-of-orderness watermark relies on."""
    rng = random.Random(seed)
    in_order = sorted(readings, key=lambda r: r.timestamp_ms)
    return sorted(in_order, key=lambda r: r.timestamp_ms + rng.randint(0, bound_ms))


def readings_strategy(max_ts: int = 30_000, max_size: int = 60) -> st.SearchStrategy[list[Reading]]:
    return st.lists(
        st.builds(
            Reading, st.sampled_from(["a", "b", "c"]), st.integers(0, max_ts), st.integers(-5, 5)
        ),
        max_size=max_size,
    )


def summary(outputs: list[Emission]) -> Counter[tuple[Any, ...]]:
    return Counter(
        (e.output, e.key, e.window_start_ms, e.window_end_ms, repr(e.value), e.kind, e.record)
        for e in outputs
    )


# -- arrival order ----------------------------------------------------------------

ORDER_SPECS: dict[str, Callable[[], WindowSpec]] = {
    "tumbling-sum": lambda: WindowSpec(Tumbling(1_000), Sum(lambda r: r.value)),
    "tumbling-offset-count": lambda: WindowSpec(Tumbling(5_000, offset_ms=1_234), Count()),
    "sliding-sum": lambda: WindowSpec(Sliding(3_000, 1_000), Sum(lambda r: r.value)),
    "sliding-gaps": lambda: WindowSpec(Sliding(1_000, 2_500), Count()),
    "tumbling-elements": lambda: WindowSpec(Tumbling(2_000), process=Timestamps()),
    "lateness-no-effect": lambda: WindowSpec(Tumbling(1_000), Count(), allowed_lateness_ms=700),
}


@given(
    readings=readings_strategy(),
    bound_ms=st.integers(0, 3_000),
    seed=st.integers(0, 2**32),
    name=st.sampled_from(sorted(ORDER_SPECS)),
)
def test_results_do_not_depend_on_arrival_order_within_the_bound(
    readings: list[Reading], bound_ms: int, seed: int, name: str
) -> None:
    make = ORDER_SPECS[name]
    in_order = feed_all(harness(make(), bound_ms), sorted(readings, key=lambda r: r.timestamp_ms))
    shuffled = feed_all(harness(make(), bound_ms), within_bound(readings, bound_ms, seed))
    assert summary(shuffled) == summary(in_order)
    assert all(e.output == "main" and e.kind == "first" for e in shuffled)


# -- the watermark ----------------------------------------------------------------

Op = tuple[str, int]  # ("r", ts) | ("wm", ms) | ("pt", advance_ms)

ops_strategy = st.lists(
    st.one_of(
        st.tuples(st.just("r"), st.integers(0, 20_000)),
        st.tuples(st.just("wm"), st.integers(-1_000, 25_000)),
        st.tuples(st.just("pt"), st.integers(0, 2_000)),
    ),
    max_size=60,
)


def apply(h: WindowHarness, op: Op, key: str = "a") -> None:
    kind, value = op
    if kind == "r":
        h.record(Reading(key, value))
    elif kind == "wm":
        h.watermark(value)
    else:
        h.processing_time(h.processing_time_ms + value)


@given(ops=ops_strategy, bound_ms=st.integers(0, 3_000))
def test_the_operator_watermark_never_decreases(ops: list[Op], bound_ms: int) -> None:
    h = harness(WindowSpec(Sliding(2_000, 500), Count(), allowed_lateness_ms=300), bound_ms)
    previous = h.watermark_ms
    for op in ops:
        apply(h, op)
        assert h.watermark_ms >= previous
        previous = h.watermark_ms


# -- membership ---------------------------------------------------------------------


def windows_of(ts: int, size: int, slide: int, offset: int) -> set[tuple[int, int]]:
    """Every [start, start + size) with start = offset + k * slide that holds ts."""
    k = (ts - offset) // slide
    found = set()
    while offset + k * slide + size > ts:
        start = offset + k * slide
        if start <= ts:
            found.add((start, start + size))
        k -= 1
    return found


@given(
    readings=readings_strategy(max_ts=10_000, max_size=50),
    bound_ms=st.integers(0, 2_000),
    size=st.integers(1, 3_000),
    slide=st.integers(1, 3_000),
    offset_frac=st.floats(0, 0.99),
)
def test_every_record_is_in_exactly_its_windows(
    readings: list[Reading], bound_ms: int, size: int, slide: int, offset_frac: float
) -> None:
    """Any arrival order: a record joins each of its windows that is not yet late
    (end - 1 > watermark at arrival) and is side-output only if it joined none and
    its own timestamp is behind the watermark (docs/semantics.md, "Sliding windows": a
    gap record on time is dropped)."""
    assume(-(-size // slide) <= MAX_WINDOWS_PER_ELEMENT)  # a definition refuses more
    offset = int(slide * offset_frac)
    spec = WindowSpec(Sliding(size, slide, offset_ms=offset), process=Timestamps())
    h = harness(spec, bound_ms)
    expected: dict[tuple[str, int, int], list[int]] = defaultdict(list)
    expected_late = []
    max_ts: int | None = None
    for r in readings:
        watermark = MIN_WATERMARK if max_ts is None else max_ts - bound_ms - 1
        open_windows = {
            w for w in windows_of(r.timestamp_ms, size, slide, offset) if w[1] - 1 > watermark
        }
        for start, end in open_windows:
            expected[(r.id, start, end)].append(r.timestamp_ms)
        if not open_windows and r.timestamp_ms <= watermark:
            expected_late.append(r)
        max_ts = r.timestamp_ms if max_ts is None else max(max_ts, r.timestamp_ms)
        h.record(r)
    h.end_of_input()
    got = {(e.key, e.window_start_ms, e.window_end_ms): e.value for e in h.main()}
    assert len(got) == len(h.main()), "a window fired twice"
    assert got == {k: sorted(v) for k, v in expected.items()}
    assert [e.record for e in h.outputs if e.output == "late"] == expected_late


# -- sessions -------------------------------------------------------------------------


def sessionize(timestamps: list[int], gap_ms: int) -> list[tuple[int, int, list[int]]]:
    """Batch sessionization: sort, split where the next reading is more than ``gap``
    after the previous; a session spans [first, last + gap)."""
    sessions: list[list[int]] = []
    for ts in sorted(timestamps):
        if sessions and ts - sessions[-1][-1] <= gap_ms:
            sessions[-1].append(ts)
        else:
            sessions.append([ts])
    return [(s[0], s[-1] + gap_ms, s) for s in sessions]


@given(
    halves=st.lists(st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 15_000)), max_size=50),
    half_gap=st.integers(0, 1_500),
    bound_ms=st.integers(0, 4_000),
    seed=st.integers(0, 2**32),
)
def test_session_windows_equal_a_batch_sessionization(
    halves: list[tuple[str, int]], half_gap: int, bound_ms: int, seed: int
) -> None:
    """Timestamps are even and the gap odd, so no two readings are exactly ``gap``
    apart: that tie is Flink's one order-dependent case (see the test below)."""
    gap_ms = 2 * half_gap + 1
    readings = [Reading(key, 2 * half) for key, half in halves]
    spec = WindowSpec(Session(gap_ms), process=Timestamps())
    outputs = feed_all(harness(spec, bound_ms), within_bound(readings, bound_ms, seed))
    by_key: dict[str, list[int]] = defaultdict(list)
    for r in readings:
        by_key[r.id].append(r.timestamp_ms)
    expected = sorted((k, *s) for k, ts in by_key.items() for s in sessionize(ts, gap_ms))
    got = sorted((e.key, e.window_start_ms, e.window_end_ms, e.value) for e in outputs)
    assert got == expected


def test_a_reading_exactly_gap_after_a_fired_session_starts_a_new_one() -> None:
    """Flink's behaviour at the tie: [0, 1000) fires at watermark 999; a reading at
    1000 still on time would have touched it, but it is gone, so a new session
    opens. In a batch, the two would be one session."""
    h = harness(WindowSpec(Session(1_000), process=Timestamps()), bound_ms=1_000)
    for ts in (0, 2_000, 1_000):
        h.record(Reading("a", ts))
    h.end_of_input()
    assert [(e.window_start_ms, e.window_end_ms, e.value) for e in h.main()] == [
        (0, 1_000, [0]),
        (1_000, 3_000, [1_000, 2_000]),
    ]
    assert sessionize([0, 1_000, 2_000], 1_000) == [(0, 3_000, [0, 1_000, 2_000])]


# -- purging --------------------------------------------------------------------------


@settings(max_examples=300)
@given(
    readings=readings_strategy(max_ts=20_000),
    bound_ms=st.integers(0, 3_000),
    seed=st.integers(0, 2**32),
    interval_ms=st.integers(100, 2_500),
    lateness_ms=st.sampled_from([0, 1_000]),
)
def test_a_purging_continuous_trigger_fires_when_it_would_without_purging(
    readings: list[Reading], bound_ms: int, seed: int, interval_ms: int, lateness_ms: int
) -> None:
    """A purge empties the window, not its trigger: wrapped in ``purging``, a continuous
    trigger fires at the same points as on its own (late readings included), each
    firing over the readings since the previous one. So per window, the purging
    results are the increments of the running counts, where there is one (a firing
    over nothing emits nothing), and each is a ``first``."""

    def spec(purging: bool) -> WindowSpec:
        trigger = ContinuousEventTimeTrigger(interval_ms)
        return WindowSpec(
            Tumbling(5_000),
            Count(),
            trigger=PurgingTrigger(trigger) if purging else trigger,
            allowed_lateness_ms=lateness_ms,
        )

    arrival = within_bound(readings, bound_ms + 1_000, seed)  # some late
    running = feed_all(harness(spec(False), bound_ms), arrival)
    purged = feed_all(harness(spec(True), bound_ms), arrival)

    def per_window(outputs: list[Emission]) -> dict[tuple[Any, ...], list[Any]]:
        found: dict[tuple[Any, ...], list[Any]] = defaultdict(list)
        for e in outputs:
            if e.output == "main":
                found[(e.key, e.window_start_ms)].append(e.value)
        return found

    increments = {}
    for window, counts in per_window(running).items():
        steps = [b - a for a, b in zip([0, *counts], counts, strict=False) if b > a]
        increments[window] = steps
    assert per_window(purged) == {w: steps for w, steps in increments.items() if steps}
    assert all(e.kind == "first" for e in purged if e.output == "main")
    assert [e for e in purged if e.output == "late"] == [e for e in running if e.output == "late"]


@given(
    readings=readings_strategy(max_ts=20_000),
    bound_ms=st.integers(0, 3_000),
    seed=st.integers(0, 2**32),
    interval_ms=st.integers(100, 2_500),
    purging=st.booleans(),
)
def test_the_end_of_input_fires_what_a_watermark_past_every_window_fires(
    readings: list[Reading], bound_ms: int, seed: int, interval_ms: int, purging: bool
) -> None:
    """For time windows the end of input (the watermark at +infinity) is no different
    from any watermark past every window: an early-firing trigger steps through each
    interval still due, then fires the window's end."""

    def run(last_watermark_ms: int | None) -> list[Emission]:
        trigger = ContinuousEventTimeTrigger(interval_ms)
        spec = WindowSpec(
            Sliding(4_000, 1_500),
            Count(),
            trigger=PurgingTrigger(trigger) if purging else trigger,
        )
        h = harness(spec, bound_ms)
        for reading in within_bound(readings, bound_ms, seed):
            h.record(reading)
        if last_watermark_ms is not None:
            h.watermark(last_watermark_ms)
        h.end_of_input()
        return h.outputs

    assert run(None) == run(30_000)


# -- stop and restore -------------------------------------------------------------------


def count_window_spec(size: int, slide: int | None, timeout_ms: int) -> WindowSpec:
    assigner, trigger, evictor = count_window(size, slide, timeout_ms)
    return WindowSpec(assigner, Sum(lambda r: r.value), trigger=trigger, evictor=evictor)


RESTORE_SPECS: dict[str, tuple[Callable[[], WindowSpec], int | None]] = {
    "tumbling-lateness": (
        lambda: WindowSpec(Tumbling(1_000), Sum(lambda r: r.value), allowed_lateness_ms=1_500),
        500,
    ),
    "sliding-elements": (lambda: WindowSpec(Sliding(2_000, 700), process=Timestamps()), 300),
    "session-lateness": (
        lambda: WindowSpec(Session(800), Sum(lambda r: r.value), allowed_lateness_ms=1_000),
        1_000,
    ),
    "early-firing": (
        lambda: WindowSpec(
            Tumbling(3_000),
            Count(),
            trigger=ContinuousEventTimeTrigger(500),
            allowed_lateness_ms=500,
        ),
        200,
    ),
    "count-timeout": (
        lambda: WindowSpec(Tumbling(4_000), Count(), trigger=CountTrigger(3, timeout_ms=1_500)),
        None,
    ),
    "sliding-count-window": (lambda: count_window_spec(3, 2, 1_000), None),
    "purging-count-window": (lambda: count_window_spec(3, None, 1_000), None),
    "purging-early-firing": (
        lambda: WindowSpec(
            Tumbling(3_000),
            Count(),
            trigger=PurgingTrigger(ContinuousEventTimeTrigger(500)),
            allowed_lateness_ms=500,
        ),
        200,
    ),
    "global-early-firing": (
        lambda: WindowSpec(Global(), Count(), trigger=ContinuousEventTimeTrigger(700)),
        0,
    ),
}


def restart(before: WindowHarness, spec: WindowSpec, bound_ms: int | None) -> WindowHarness:
    """A new harness over the stores the first one left and its saved clock: what a
    worker has after a crash, as nothing else survives it."""
    after = harness(spec, bound_ms, processing_time_ms=before.processing_time_ms)
    after.state = before.state
    after.event_timers = before.event_timers
    after.processing_timers = before.processing_timers
    after.windows = KeyedWindows(
        spec,
        watermark=None if bound_ms is None else BoundedOutOfOrderness(bound_ms),
        state=before.state,
        event_timers=before.event_timers,
        processing_timers=before.processing_timers,
    )
    after.windows.reload(before.windows.snapshot())
    after.windows.on_tick(before.processing_time_ms)  # the wall clock, read on start
    return after


@given(
    ops=ops_strategy,
    keys=st.lists(st.sampled_from("ab"), min_size=60, max_size=60),
    cut=st.integers(0, 60),
    name=st.sampled_from(sorted(RESTORE_SPECS)),
)
def test_stopping_and_restoring_mid_stream_changes_nothing(
    ops: list[Op], keys: list[str], cut: int, name: str
) -> None:
    make, bound_ms = RESTORE_SPECS[name]
    cut = min(cut, len(ops))
    baseline = harness(make(), bound_ms)
    for op, key in zip(ops, keys, strict=False):
        apply(baseline, op, key)
    baseline.end_of_input()

    first = harness(make(), bound_ms)
    for op, key in zip(ops[:cut], keys, strict=False):
        apply(first, op, key)
    second = restart(first, make(), bound_ms)
    for op, key in zip(ops[cut:], keys[cut:], strict=False):
        apply(second, op, key)
    second.end_of_input()
    assert first.outputs + second.outputs == baseline.outputs
    assert first.dropped_late + second.dropped_late == baseline.dropped_late


def bounded(h: WindowHarness, limit: int) -> WindowHarness:
    h.windows.operator.firing_limit = limit
    return h


@given(
    ops=ops_strategy,
    keys=st.lists(st.sampled_from("abcd"), min_size=60, max_size=60),
    limit=st.integers(1, 4),
    crash=st.booleans(),
    name=st.sampled_from(sorted(RESTORE_SPECS)),
)
def test_firing_a_few_timers_at_a_time_with_checkpoints_between_changes_nothing(
    ops: list[Op], keys: list[str], limit: int, crash: bool, name: str
) -> None:
    """Aligned windows of every key close at one watermark; a worker fires them a
    checkpoint's worth at a time (and may crash between two parts, then restore
    the state and clock of the last). The results, in order, are those of firing
    all at once."""
    make, bound_ms = RESTORE_SPECS[name]
    baseline = harness(make(), bound_ms)
    for op, key in zip(ops, keys, strict=False):
        apply(baseline, op, key)
    baseline.end_of_input()

    outputs: list[Emission] = []
    dropped = 0
    h = bounded(harness(make(), bound_ms), limit)

    def fire_the_rest() -> None:
        nonlocal h, outputs, dropped
        while h.windows.operator.firing_due:
            if crash:
                outputs, dropped = outputs + h.outputs, dropped + h.dropped_late
                h = bounded(restart(h, make(), bound_ms), limit)
                assert h.windows.operator.firing_due, "the restore forgot what was due"
            h.fire_due()

    for op, key in zip(ops, keys, strict=False):
        apply(h, op, key)
        fire_the_rest()
    h.end_of_input()
    fire_the_rest()
    assert outputs + h.outputs == baseline.outputs
    assert dropped + h.dropped_late == baseline.dropped_late
