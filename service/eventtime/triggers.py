"""Triggers decide when a window emits (docs/semantics.md, "Triggers"), as
Flink's do.

A trigger reacts to an element, an event-time timer, a processing-time timer
and a merge of windows, and answers CONTINUE, FIRE, PURGE or FIRE_AND_PURGE.
Its state (a count, the next early firing) lives in a small dict per window
that the operator keeps in RocksDB with the window, and it registers timers
through its context. A purge empties only the window's contents: the trigger's
state and timers stay until the window is cleaned up (or merged away), when
:meth:`Trigger.clear` runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol

from eddy.eventtime.windows import MAX_TIME_MS, TimeWindow


class TriggerResult(Enum):
    CONTINUE = (False, False)
    FIRE = (True, False)
    PURGE = (False, True)
    FIRE_AND_PURGE = (True, True)

    @property
    def fire(self) -> bool:
        return self.value[0]

    @property
    def purge(self) -> bool:
        return self.value[1]


CONTINUE = TriggerResult.CONTINUE
FIRE = TriggerResult.FIRE
PURGE = TriggerResult.PURGE
FIRE_AND_PURGE = TriggerResult.FIRE_AND_PURGE


class TriggerContext(Protocol):
    """What a trigger may see and do for the window it is asked about."""

    @property
    def watermark_ms(self) -> int: ...

    @property
    def processing_time_ms(self) -> int: ...

    @property
    def state(self) -> dict[str, Any]:
        """This trigger's state for the window; mutate it in place."""
        ...

    def register_event_time_timer(self, time_ms: int) -> None: ...

    def register_processing_time_timer(self, time_ms: int) -> None: ...

    def delete_event_time_timer(self, time_ms: int) -> None: ...

    def delete_processing_time_timer(self, time_ms: int) -> None: ...


class Trigger(Protocol):
    """A custom trigger implements this (subclass :class:`TriggerBase` for defaults).

    Every event-time timer of a window reaches :meth:`on_event_time`, including the
    operator's cleanup timer at ``end - 1 + allowed_lateness``, as in Flink; a timer
    a trigger registers at that same instant is that timer, so it is called once.
    """

    def on_element(
        self, timestamp_ms: int, window: TimeWindow, ctx: TriggerContext
    ) -> TriggerResult: ...

    def on_event_time(
        self, time_ms: int, window: TimeWindow, ctx: TriggerContext
    ) -> TriggerResult: ...

    def on_processing_time(
        self, time_ms: int, window: TimeWindow, ctx: TriggerContext
    ) -> TriggerResult: ...

    @property
    def can_merge(self) -> bool: ...

    def on_merge(self, window: TimeWindow, ctx: TriggerContext) -> None:
        """The windows merged into ``window``; ``ctx.state`` holds their merged state."""
        ...

    def merge_state(self, states: list[dict[str, Any]]) -> dict[str, Any]:
        """Combine the trigger states of windows that merge."""
        ...

    def clear(self, window: TimeWindow, ctx: TriggerContext) -> None:
        """Delete the timers this trigger registered for ``window``.

        Called when the window is cleaned up or merged away, not when it is purged;
        the operator deletes ``ctx.state`` with the window afterwards.
        """
        ...


class TriggerBase:
    """Defaults for custom triggers: ignore what a trigger does not react to, refuse
    merging windows, merge state by taking the first, clear nothing."""

    def on_element(
        self, timestamp_ms: int, window: TimeWindow, ctx: TriggerContext
    ) -> TriggerResult:
        return CONTINUE

    def on_event_time(self, time_ms: int, window: TimeWindow, ctx: TriggerContext) -> TriggerResult:
        return CONTINUE

    def on_processing_time(
        self, time_ms: int, window: TimeWindow, ctx: TriggerContext
    ) -> TriggerResult:
        return CONTINUE

    @property
    def can_merge(self) -> bool:
        return False

    def on_merge(self, window: TimeWindow, ctx: TriggerContext) -> None:
        raise TypeError(f"{type(self).__name__} cannot be used with merging windows")

    def merge_state(self, states: list[dict[str, Any]]) -> dict[str, Any]:
        return dict(states[0]) if states else {}

    def clear(self, window: TimeWindow, ctx: TriggerContext) -> None:
        return None


@dataclass(frozen=True)
class EventTimeTrigger(TriggerBase):
    """Fire when the watermark passes the window's end - 1 (the default for
    event-time windows); an element arriving after that, within the allowed
    lateness, fires the window again at once."""

    def on_element(
        self, timestamp_ms: int, window: TimeWindow, ctx: TriggerContext
    ) -> TriggerResult:
        if window.max_timestamp_ms <= ctx.watermark_ms:
            return FIRE
        ctx.register_event_time_timer(window.max_timestamp_ms)
        return CONTINUE

    def on_event_time(self, time_ms: int, window: TimeWindow, ctx: TriggerContext) -> TriggerResult:
        return FIRE if time_ms == window.max_timestamp_ms else CONTINUE

    @property
    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: TimeWindow, ctx: TriggerContext) -> None:
        if window.max_timestamp_ms > ctx.watermark_ms:
            ctx.register_event_time_timer(window.max_timestamp_ms)

    def clear(self, window: TimeWindow, ctx: TriggerContext) -> None:
        ctx.delete_event_time_timer(window.max_timestamp_ms)


@dataclass(frozen=True)
class ProcessingTimeTrigger(TriggerBase):
    """Fire when the wall clock passes the window's end - 1."""

    def on_element(
        self, timestamp_ms: int, window: TimeWindow, ctx: TriggerContext
    ) -> TriggerResult:
        ctx.register_processing_time_timer(window.max_timestamp_ms)
        return CONTINUE

    def on_processing_time(
        self, time_ms: int, window: TimeWindow, ctx: TriggerContext
    ) -> TriggerResult:
        return FIRE

    @property
    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: TimeWindow, ctx: TriggerContext) -> None:
        if window.max_timestamp_ms > ctx.processing_time_ms:
            ctx.register_processing_time_timer(window.max_timestamp_ms)

    def clear(self, window: TimeWindow, ctx: TriggerContext) -> None:
        ctx.delete_processing_time_timer(window.max_timestamp_ms)


@dataclass(frozen=True)
class CountTrigger(TriggerBase):
    """Fire every ``count`` elements; with ``timeout_ms``, also fire that long (in
    processing time) after a window's first element, so a key that never reaches
    ``count`` still emits (docs/semantics.md, "The global window and count
    windows")."""

    count: int
    timeout_ms: int | None = None

    def __post_init__(self) -> None:
        if self.count <= 0:
            raise ValueError("count must be positive")

    def on_element(
        self, timestamp_ms: int, window: TimeWindow, ctx: TriggerContext
    ) -> TriggerResult:
        seen = ctx.state.get("count", 0) + 1
        if seen == 1 and self.timeout_ms is not None:
            deadline = ctx.processing_time_ms + self.timeout_ms
            ctx.state["deadline"] = deadline
            ctx.register_processing_time_timer(deadline)
        if seen >= self.count:
            self._reset(ctx)
            return FIRE
        ctx.state["count"] = seen
        return CONTINUE

    def on_processing_time(
        self, time_ms: int, window: TimeWindow, ctx: TriggerContext
    ) -> TriggerResult:
        if ctx.state.get("deadline") == time_ms and ctx.state.get("count", 0) > 0:
            self._reset(ctx)
            return FIRE
        return CONTINUE

    @property
    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: TimeWindow, ctx: TriggerContext) -> None:
        # The merged windows' timeouts went with them: the earliest carries over.
        deadline = ctx.state.get("deadline")
        if deadline is not None:
            ctx.register_processing_time_timer(deadline)

    def merge_state(self, states: list[dict[str, Any]]) -> dict[str, Any]:
        merged: dict[str, Any] = {"count": sum(s.get("count", 0) for s in states)}
        deadlines = [s["deadline"] for s in states if "deadline" in s]
        if deadlines:
            merged["deadline"] = min(deadlines)
        return merged

    def clear(self, window: TimeWindow, ctx: TriggerContext) -> None:
        self._reset(ctx)

    def _reset(self, ctx: TriggerContext) -> None:
        deadline = ctx.state.pop("deadline", None)
        if deadline is not None:
            ctx.delete_processing_time_timer(deadline)
        ctx.state.pop("count", None)


@dataclass(frozen=True)
class ContinuousEventTimeTrigger(TriggerBase):
    """Early firing: FIRE every ``interval_ms`` of watermark progress while the window
    is open, and at its end (docs/semantics.md, "Early results").

    As in current Flink, the interval timers stop at the window's last instant
    (``min(next, end - 1)``), so the trigger does not fire again past the end while
    the window waits out its allowed lateness. Each firing registers the next, so a
    watermark that jumps several intervals (to +infinity at the end of a bounded
    input, say) fires every one it passed, up to and including the window's end,
    in time order, in that one advance. Only the global window skips to its end
    once the watermark is at +infinity: stepping interval by interval to the end of
    time would never finish (in Flink it does not).
    """

    interval_ms: int

    def __post_init__(self) -> None:
        if self.interval_ms <= 0:
            raise ValueError("interval_ms must be positive")

    def on_element(
        self, timestamp_ms: int, window: TimeWindow, ctx: TriggerContext
    ) -> TriggerResult:
        if window.max_timestamp_ms <= ctx.watermark_ms:
            return FIRE
        ctx.register_event_time_timer(window.max_timestamp_ms)
        if "next" not in ctx.state:
            start = timestamp_ms - timestamp_ms % self.interval_ms
            self._schedule(start + self.interval_ms, window, ctx)
        return CONTINUE

    def on_event_time(self, time_ms: int, window: TimeWindow, ctx: TriggerContext) -> TriggerResult:
        if time_ms == window.max_timestamp_ms:
            return FIRE
        if ctx.state.get("next") == time_ms:
            upcoming = time_ms + self.interval_ms
            if ctx.watermark_ms >= MAX_TIME_MS and window.end_ms >= MAX_TIME_MS:
                upcoming = window.max_timestamp_ms  # the global window, at end of input
            self._schedule(upcoming, window, ctx)
            return FIRE
        return CONTINUE

    def _schedule(self, time_ms: int, window: TimeWindow, ctx: TriggerContext) -> None:
        ctx.state["next"] = min(time_ms, window.max_timestamp_ms)
        ctx.register_event_time_timer(ctx.state["next"])

    @property
    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: TimeWindow, ctx: TriggerContext) -> None:
        if window.max_timestamp_ms > ctx.watermark_ms:
            ctx.register_event_time_timer(window.max_timestamp_ms)
        if "next" in ctx.state:
            ctx.register_event_time_timer(ctx.state["next"])

    def merge_state(self, states: list[dict[str, Any]]) -> dict[str, Any]:
        upcoming = [s["next"] for s in states if "next" in s]
        return {"next": min(upcoming)} if upcoming else {}

    def clear(self, window: TimeWindow, ctx: TriggerContext) -> None:
        ctx.delete_event_time_timer(window.max_timestamp_ms)
        upcoming = ctx.state.pop("next", None)
        if upcoming is not None:
            ctx.delete_event_time_timer(upcoming)


@dataclass(frozen=True)
class PurgingTrigger(TriggerBase):
    """Wraps a trigger and turns each FIRE into FIRE_AND_PURGE: emit, then empty the
    window. The inner trigger's state and timers are not touched: it goes on as it
    would without the purge until the window is cleaned up."""

    inner: Trigger

    def on_element(
        self, timestamp_ms: int, window: TimeWindow, ctx: TriggerContext
    ) -> TriggerResult:
        return _purging(self.inner.on_element(timestamp_ms, window, ctx))

    def on_event_time(self, time_ms: int, window: TimeWindow, ctx: TriggerContext) -> TriggerResult:
        return _purging(self.inner.on_event_time(time_ms, window, ctx))

    def on_processing_time(
        self, time_ms: int, window: TimeWindow, ctx: TriggerContext
    ) -> TriggerResult:
        return _purging(self.inner.on_processing_time(time_ms, window, ctx))

    @property
    def can_merge(self) -> bool:
        return self.inner.can_merge

    def on_merge(self, window: TimeWindow, ctx: TriggerContext) -> None:
        self.inner.on_merge(window, ctx)

    def merge_state(self, states: list[dict[str, Any]]) -> dict[str, Any]:
        return self.inner.merge_state(states)

    def clear(self, window: TimeWindow, ctx: TriggerContext) -> None:
        self.inner.clear(window, ctx)


@dataclass(frozen=True)
class NeverTrigger(TriggerBase):
    """The global window's default: nothing fires unless another trigger is set."""

    @property
    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: TimeWindow, ctx: TriggerContext) -> None:
        return None


def _purging(result: TriggerResult) -> TriggerResult:
    return FIRE_AND_PURGE if result.fire else result
