"""Triggers (docs/semantics.md, "Triggers"): when a window emits, what CONTINUE, FIRE,
PURGE and FIRE_AND_PURGE do, early firing, and the custom-trigger interface, shown
with a classic early-firing trigger, ``OneSecondIntervalTrigger`` (an early result
every second of watermark progress, a final one at the window's end)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

import pytest

from eddy.eventtime import (
    GLOBAL_WINDOW,
    BoundedOutOfOrderness,
    ContinuousEventTimeTrigger,
    Count,
    CountTrigger,
    Global,
    ProcessingTimeTrigger,
    PurgingTrigger,
    Session,
    Sliding,
    TimeWindow,
    TriggerBase,
    TriggerResult,
    Tumbling,
    WindowSpec,
)
from eddy.eventtime.harness import WindowHarness
from eddy.eventtime.memory import MemoryTimerStore
from eddy.eventtime.spec import count_window
from eddy.eventtime.timers import Timer, TimerQueue
from eddy.eventtime.triggers import CONTINUE, FIRE, FIRE_AND_PURGE, PURGE, TriggerContext


class Reading(NamedTuple):
    id: str
    timestamp_ms: int


def harness(spec: WindowSpec, bound_ms: int | None = 0) -> WindowHarness:
    return WindowHarness(
        spec,
        key=lambda r: r.id,
        timestamp_ms=lambda r: r.timestamp_ms,
        watermark=None if bound_ms is None else BoundedOutOfOrderness(bound_ms),
        late_output="late",
    )


def emitted(h: WindowHarness, since: int = 0) -> list[tuple[int | None, Any, str | None]]:
    return [(e.window_start_ms, e.value, e.kind) for e in h.main()[since:]]


def feed(h: WindowHarness, timestamps: list[int]) -> list[tuple[int, list[Any]]]:
    """Per reading, what it made the operator emit (through the watermark it moved)."""
    log = []
    for ts in timestamps:
        before = len(h.main())
        h.record(Reading("s1", ts))
        log.append((ts, emitted(h, before)))
    return log


# -- the default event-time trigger ------------------------------------------------


@pytest.mark.parametrize(
    ("watermark_ms", "fires"),
    [
        pytest.param(4_998, False, id="wm-end-minus-2-waits"),
        pytest.param(4_999, True, id="wm-end-minus-1-fires"),
        pytest.param(60_000, True, id="wm-far-past-fires"),
    ],
)
def test_event_time_window_fires_when_the_watermark_reaches_end_minus_1(
    watermark_ms: int, fires: bool
) -> None:
    h = harness(WindowSpec(Tumbling(5_000), Count()), bound_ms=None)
    h.record(Reading("s1", 4_999))
    h.watermark(watermark_ms)
    assert emitted(h) == ([(0, 1, "first")] if fires else [])


def test_event_time_window_fires_once_even_with_many_watermarks() -> None:
    h = harness(WindowSpec(Tumbling(5_000), Count()), bound_ms=None)
    h.record(Reading("s1", 10))
    for wm in (4_999, 5_000, 9_999, 20_000):
        h.watermark(wm)
    h.end_of_input()
    assert emitted(h) == [(0, 1, "first")]


# -- a custom early-firing trigger --------------------------------------------------


class OneSecondIntervalTrigger(TriggerBase):
    """A classic custom trigger written for Flink, ported as is: on the first
    element, a timer at the next whole second of watermark and one at the window's
    end; each early timer fires and registers the next; the end timer fires and
    purges."""

    def on_element(
        self, timestamp_ms: int, window: TimeWindow, ctx: TriggerContext
    ) -> TriggerResult:
        if not ctx.state.get("firstSeen"):
            wm = ctx.watermark_ms
            ctx.register_event_time_timer(wm + (1_000 - wm % 1_000))
            ctx.register_event_time_timer(window.end_ms)
            ctx.state["firstSeen"] = True
        return CONTINUE

    def on_event_time(self, time_ms: int, window: TimeWindow, ctx: TriggerContext) -> TriggerResult:
        if time_ms == window.end_ms:
            return FIRE_AND_PURGE
        wm = ctx.watermark_ms
        t = wm + (1_000 - wm % 1_000)
        if t < window.end_ms:
            ctx.register_event_time_timer(t)
        return FIRE

    def clear(self, window: TimeWindow, ctx: TriggerContext) -> None:
        ctx.state.pop("firstSeen", None)


def test_one_second_interval_trigger_fires_early_every_second_and_at_the_end() -> None:
    h = harness(WindowSpec(Tumbling(5_000), Count(), trigger=OneSecondIntervalTrigger()))
    h.watermark(0)
    log = feed(h, [100, 1_200, 2_300, 3_400, 4_500, 4_800, 5_600])
    assert log == [
        (100, []),
        (1_200, [(0, 2, "first")]),  # watermark 1199 passed 1000
        (2_300, [(0, 3, "update")]),
        (3_400, [(0, 4, "update")]),
        (4_500, [(0, 5, "update")]),
        (4_800, []),
        # The window's last timer runs the trigger, as in Flink, so the reading at
        # 4800 makes it into a final result; then [5000, 10000) fires its first.
        (5_600, [(0, 6, "update"), (5_000, 1, "first")]),
    ]
    h.end_of_input()  # [5000, 10000): its early timer at 6000, then its last one
    assert emitted(h, 6) == [(5_000, 1, "update"), (5_000, 1, "update")]
    assert h.state.windows == {}
    assert h.event_timers.timers == set()


def test_continuous_event_time_trigger_fires_every_interval_then_at_the_end() -> None:
    spec = WindowSpec(Tumbling(5_000), Count(), trigger=ContinuousEventTimeTrigger(1_000))
    h = harness(spec)
    log = feed(h, [200, 700, 1_300, 1_800, 2_400, 4_100, 4_700, 5_200])
    assert log == [
        (200, []),
        (700, []),
        (1_300, [(0, 3, "first")]),  # the reading is counted before its watermark
        (1_800, []),
        (2_400, [(0, 5, "update")]),
        (4_100, [(0, 6, "update"), (0, 6, "update")]),  # 3000 and 4000 both passed
        (4_700, []),
        (5_200, [(0, 7, "update")]),  # end - 1: the final firing
    ]


def test_continuous_trigger_stops_at_the_window_end_during_the_lateness() -> None:
    """As current Flink: the interval timers stop at end - 1, so waiting out the
    allowed lateness emits nothing new; a late reading fires at once."""
    spec = WindowSpec(
        Tumbling(5_000),
        Count(),
        trigger=ContinuousEventTimeTrigger(1_000),
        allowed_lateness_ms=2_000,
    )
    h = harness(spec, bound_ms=None)
    h.record(Reading("s1", 4_500))
    h.watermark(4_999)
    assert emitted(h) == [(0, 1, "first")]
    h.watermark(5_000)
    assert emitted(h, 1) == []
    h.record(Reading("s1", 4_000))  # late, within the lateness
    assert emitted(h, 1) == [(0, 2, "update")]
    h.watermark(6_999)
    assert emitted(h, 2) == []
    assert h.state.windows == {}


@dataclass(frozen=True)
class RecordingContinuous(ContinuousEventTimeTrigger):
    """The continuous trigger, noting (time, window start) of each timer it fires on."""

    fired: list[tuple[int, int]] = field(default_factory=list, compare=False)

    def on_event_time(self, time_ms: int, window: TimeWindow, ctx: TriggerContext) -> TriggerResult:
        result = super().on_event_time(time_ms, window, ctx)
        if result.fire:
            self.fired.append((time_ms, window.start_ms))
        return result


def test_continuous_trigger_at_the_end_of_input_fires_every_interval_then_the_end() -> None:
    """The watermark jumps to +infinity with four early firings still due: as in
    Flink, each firing registers the next, min(time + interval, end - 1), and the
    timers fire one after the other in that same advance."""
    trigger = RecordingContinuous(1_000)
    h = harness(WindowSpec(Tumbling(5_000), Count(), trigger=trigger), bound_ms=None)
    feed(h, [60_500, 62_700])
    h.end_of_input()
    assert [time for time, _ in trigger.fired] == [61_000, 62_000, 63_000, 64_000, 64_999]
    assert emitted(h) == [(60_000, 2, "first")] + [(60_000, 2, "update")] * 4
    assert h.state.windows == {}
    assert h.event_timers.timers == set()


@pytest.mark.parametrize("end_of_input", [False, True], ids=["watermark-70000", "end-of-input"])
def test_timers_registered_during_one_advance_fire_in_it_in_time_order(
    end_of_input: bool,
) -> None:
    """Three overlapping windows, each stepping through its intervals in one jump of
    the watermark: their firings interleave by time (then by window start), as the
    timers are registered one by one while the advance fires them."""
    trigger = RecordingContinuous(1_000)
    h = harness(WindowSpec(Sliding(5_000, 2_000), Count(), trigger=trigger), bound_ms=None)
    feed(h, [62_500])  # in [58000, 63000), [60000, 65000) and [62000, 67000)
    if end_of_input:
        h.end_of_input()
    else:
        h.watermark(70_000)
    assert trigger.fired == [
        (62_999, 58_000),
        (63_000, 60_000),
        (63_000, 62_000),
        (64_000, 60_000),
        (64_000, 62_000),
        (64_999, 60_000),
        (65_000, 62_000),
        (66_000, 62_000),
        (66_999, 62_000),
    ]
    assert [start for start, _, _ in emitted(h)] == [start for _, start in trigger.fired]


def test_the_timer_queue_yields_timers_registered_while_it_yields() -> None:
    """What the operator relies on: a timer registered during ``pop_due`` that is
    already due comes out in the same call, in time order; one that is not stays."""
    queue = TimerQueue(MemoryTimerStore())
    for t in (10, 30):
        queue.register(Timer(t, "n", "k"))
    popped = []
    for timer in queue.pop_due(100):
        popped.append(timer.time_ms)
        if timer.time_ms == 10:
            for t in (40, 20, 150):
                queue.register(Timer(t, "n", "k"))
    assert popped == [10, 20, 30, 40]
    assert queue.next_time_ms() == 150


def test_continuous_trigger_on_a_global_window_ends_at_the_end_of_input() -> None:
    """Early results of a never-ending window; the end of input fires it once more
    instead of stepping through every second up to the end of time."""
    spec = WindowSpec(Global(), Count(), trigger=ContinuousEventTimeTrigger(1_000))
    h = harness(spec)
    feed(h, [100, 1_500, 2_500])
    assert emitted(h) == [(None, 2, "first"), (None, 3, "update")]
    h.end_of_input()  # the pending firing at 3000, then the window's last one
    assert emitted(h, 2) == [(None, 3, "update"), (None, 3, "update")]


# -- what each trigger result does ----------------------------------------------------


class Answer(TriggerBase):
    """Answers every element with a fixed result; ignores timers."""

    def __init__(self, result: TriggerResult) -> None:
        self.result = result

    def on_element(
        self, timestamp_ms: int, window: TimeWindow, ctx: TriggerContext
    ) -> TriggerResult:
        return self.result


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        pytest.param(CONTINUE, [], id="CONTINUE-nothing"),
        pytest.param(FIRE, [(0, 1, "first"), (0, 2, "update"), (0, 3, "update")], id="FIRE-keeps"),
        pytest.param(PURGE, [], id="PURGE-forgets-silently"),
        pytest.param(
            FIRE_AND_PURGE,
            [(0, 1, "first"), (0, 1, "first"), (0, 1, "first")],
            id="FIRE_AND_PURGE-starts-over",
        ),
    ],
)
def test_trigger_results(result: TriggerResult, expected: list[Any]) -> None:
    h = harness(WindowSpec(Tumbling(10_000), Count(), trigger=Answer(result)))
    feed(h, [1_000, 2_000, 3_000])
    h.end_of_input()
    assert emitted(h) == expected
    assert h.state.windows == {}, "the window is cleaned up at its end whatever it answered"


def test_purge_then_fire_emits_only_what_came_after_the_purge() -> None:
    class PurgeOnSecond(TriggerBase):
        def on_element(self, ts: int, window: TimeWindow, ctx: TriggerContext) -> TriggerResult:
            return PURGE if ts == 2_000 else FIRE

    h = harness(WindowSpec(Tumbling(10_000), Count(), trigger=PurgeOnSecond()))
    feed(h, [1_000, 2_000, 3_000, 4_000])
    assert emitted(h) == [(0, 1, "first"), (0, 1, "first"), (0, 2, "update")]


class EveryOther(TriggerBase):
    """FIRE_AND_PURGE on every second element, counting in its state; a processing-time
    timer from the first element would FIRE, unless ``clear`` deletes it."""

    def on_element(
        self, timestamp_ms: int, window: TimeWindow, ctx: TriggerContext
    ) -> TriggerResult:
        seen = ctx.state.get("seen", 0) + 1
        ctx.state["seen"] = seen
        if seen == 1:
            ctx.state["timer"] = ctx.processing_time_ms + 1_000
            ctx.register_processing_time_timer(ctx.state["timer"])
        return FIRE_AND_PURGE if seen == 2 else CONTINUE

    def on_processing_time(
        self, time_ms: int, window: TimeWindow, ctx: TriggerContext
    ) -> TriggerResult:
        return FIRE

    def clear(self, window: TimeWindow, ctx: TriggerContext) -> None:
        if "timer" in ctx.state:
            ctx.delete_processing_time_timer(ctx.state["timer"])


def test_purge_keeps_trigger_state_and_timers_until_cleanup() -> None:
    """As in Flink, FIRE_AND_PURGE empties the window's contents only: the trigger's
    count goes on (so the 4th element does not fire again) and its pending timer still
    fires, over what came after the purge; both go when the window is cleaned up."""
    h = harness(WindowSpec(Tumbling(10_000), Count(), trigger=EveryOther()))
    feed(h, [1_000, 2_000])
    assert emitted(h) == [(0, 2, "first")]
    entry = h.state.windows[("s1", TimeWindow(0, 10_000))]
    assert entry.contents is None
    assert entry.trigger == {"seen": 2, "timer": 1_000}
    assert [t.time_ms for t in h.processing_timers.timers] == [1_000]
    feed(h, [3_000])
    h.processing_time(5_000)  # the first element's timer: FIRE, over the element since
    assert emitted(h, 1) == [(0, 1, "first")]
    feed(h, [4_000])
    assert emitted(h, 2) == []
    h.end_of_input()
    assert emitted(h, 2) == []
    assert h.state.windows == {}
    assert h.event_timers.timers == set()
    assert h.processing_timers.timers == set()


def purging_continuous(interval_ms: int, allowed_lateness_ms: int = 0) -> WindowSpec:
    return WindowSpec(
        Tumbling(10_000),
        Count(),
        trigger=PurgingTrigger(ContinuousEventTimeTrigger(interval_ms)),
        allowed_lateness_ms=allowed_lateness_ms,
    )


def test_a_purging_continuous_trigger_keeps_its_schedule_across_a_purge() -> None:
    """Flink fires every 2 s of watermark and at the end, each firing over what came
    since the last: the purge at 2000 leaves the next firing at 4000, even though the
    first element after it (4379) is in the interval [4000, 6000)."""
    h = harness(purging_continuous(2_000), bound_ms=None)
    feed(h, [100, 900, 1_500])
    h.watermark(2_000)
    assert emitted(h) == [(0, 3, "first")]
    feed(h, [4_379, 4_500])
    h.watermark(4_000)
    assert emitted(h, 1) == [(0, 2, "first")]
    feed(h, [5_000])
    h.watermark(6_000)
    assert emitted(h, 2) == [(0, 1, "first")]
    h.watermark(8_000)  # nothing came since 6000: an empty firing emits nothing
    feed(h, [9_500])
    h.end_of_input()  # the window's end, 9999
    assert emitted(h, 3) == [(0, 1, "first")]
    assert h.state.windows == {}
    assert h.event_timers.timers == set()


def test_a_purged_window_keeps_its_trigger_until_its_cleanup_time() -> None:
    """After the purge at the window's end the entry stays (no contents, the trigger's
    state, its cleanup timer) through the allowed lateness: a late element fires over
    itself; at end - 1 + lateness the trigger's ``clear`` runs and everything goes."""
    h = harness(purging_continuous(2_000, allowed_lateness_ms=1_000), bound_ms=None)
    feed(h, [7_500])
    h.watermark(8_000)
    feed(h, [9_500])
    h.watermark(9_999)
    assert emitted(h) == [(0, 1, "first"), (0, 1, "first")]
    window = TimeWindow(0, 10_000)
    entry = h.state.windows[("s1", window)]
    assert (entry.contents, entry.trigger) == (None, {"next": 9_999})
    assert [t.time_ms for t in h.event_timers.timers] == [10_999]
    feed(h, [9_000])  # late, within the lateness
    assert emitted(h, 2) == [(0, 1, "first")]
    h.watermark(10_998)
    assert ("s1", window) in h.state.windows
    h.watermark(10_999)
    assert emitted(h, 3) == []
    assert h.state.windows == {}
    assert h.event_timers.timers == set()


def test_a_purging_count_window_with_a_timeout_restarts_its_count_itself() -> None:
    """Flink's ``countWindow``: the count trigger resets its own count (and here its
    timeout) when it fires; the purge only empties the window. The next batch counts
    from zero and its timeout runs from its own first element."""
    assigner, trigger, evictor = count_window(3, timeout_ms=1_000)
    h = harness(WindowSpec(assigner, Count(), trigger=trigger, evictor=evictor), bound_ms=None)
    feed(h, [1, 2, 3])
    assert emitted(h) == [(None, 3, "first")]
    entry = h.state.windows[("s1", GLOBAL_WINDOW)]
    assert (entry.contents, entry.trigger) == (None, {})
    assert h.processing_timers.timers == set()
    h.processing_time(500)
    feed(h, [4])
    h.processing_time(1_000)  # the first batch's timeout was deleted when it fired
    assert emitted(h, 1) == []
    h.processing_time(1_500)
    assert emitted(h, 1) == [(None, 1, "first")]
    feed(h, [5, 6, 7])
    assert emitted(h, 2) == [(None, 3, "first")]


def test_cleanup_removes_contents_trigger_state_and_timers() -> None:
    spec = WindowSpec(
        Tumbling(5_000),
        Count(),
        trigger=ContinuousEventTimeTrigger(1_000),
        allowed_lateness_ms=1_000,
    )
    h = harness(spec)
    feed(h, [100, 2_500])
    assert h.state.windows
    assert h.event_timers.timers
    h.watermark(5_999)  # end - 1 + lateness
    assert h.state.windows == {}
    assert h.event_timers.timers == set()


# -- count, purging and processing-time triggers --------------------------------------------


def test_count_trigger_fires_every_n_and_keeps_contents() -> None:
    h = harness(WindowSpec(Tumbling(60_000), Count(), trigger=CountTrigger(2)))
    feed(h, [1, 2, 3, 4, 5])
    assert emitted(h) == [(0, 2, "first"), (0, 4, "update")]


def test_purging_count_trigger_emits_each_batch_once() -> None:
    h = harness(WindowSpec(Tumbling(60_000), Count(), trigger=PurgingTrigger(CountTrigger(2))))
    feed(h, [1, 2, 3, 4, 5])
    h.end_of_input()
    assert emitted(h) == [(0, 2, "first"), (0, 2, "first")]


def test_processing_time_trigger_on_event_time_windows_fires_by_the_wall_clock() -> None:
    spec = WindowSpec(Tumbling(5_000), Count(), trigger=ProcessingTimeTrigger())
    h = harness(spec, bound_ms=None)
    feed(h, [1_000, 2_000])
    h.processing_time(4_998)
    assert emitted(h) == []
    h.processing_time(4_999)  # the wall clock reaches the window's end - 1
    assert emitted(h) == [(0, 2, "first")]


def test_event_time_window_is_cleaned_up_by_the_watermark_whatever_its_trigger() -> None:
    """As in Flink: an event-time window goes at end - 1 + lateness of event time,
    even if its processing-time trigger has not fired yet."""
    spec = WindowSpec(Tumbling(5_000), Count(), trigger=ProcessingTimeTrigger())
    h = harness(spec, bound_ms=None)
    feed(h, [1_000])
    h.watermark(4_999)
    h.processing_time(10_000)
    assert emitted(h) == []
    assert h.state.windows == {}
    assert h.processing_timers.timers == set()


# -- merging windows ----------------------------------------------------------------


def test_count_trigger_on_sessions_counts_across_a_merge() -> None:
    """Two sessions of one reading each, bridged by a third: the merged session has
    three readings, so a count-3 trigger fires on the bridge."""
    h = harness(WindowSpec(Session(2_000), Count(), trigger=CountTrigger(3)), bound_ms=None)
    feed(h, [0, 3_000])
    assert emitted(h) == []
    feed(h, [1_500])
    assert emitted(h) == [(0, 3, "first")]


def test_count_trigger_timeout_survives_a_merge() -> None:
    spec = WindowSpec(Session(2_000), Count(), trigger=CountTrigger(10, timeout_ms=1_000))
    h = harness(spec, bound_ms=None)
    feed(h, [0])
    h.processing_time(500)
    feed(h, [3_000, 1_500])  # merged into [0, 5000): the first reading's deadline holds
    h.processing_time(999)
    assert emitted(h) == []
    h.processing_time(1_000)
    assert emitted(h) == [(0, 3, "first")]


def test_early_firing_on_sessions_continues_after_a_merge() -> None:
    spec = WindowSpec(Session(2_000), Count(), trigger=ContinuousEventTimeTrigger(1_000))
    h = harness(spec, bound_ms=5_000)
    feed(h, [0, 3_000, 1_500, 7_000])  # watermark 1999: the merged [0, 5000) fired at 1000
    assert emitted(h) == [(0, 3, "first")]


def test_a_trigger_that_cannot_merge_is_refused_for_sessions() -> None:
    with pytest.raises(ValueError, match="cannot merge"):
        WindowSpec(Session(1_000), Count(), trigger=Answer(FIRE))
