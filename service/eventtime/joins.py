"""Joins of two keyed, co-partitioned inputs (docs/semantics.md, "Joins").

* :class:`IntervalJoin`: inner; a left element at ``t`` joins right elements in
  ``[t + lower_ms, t + upper_ms]``. Each element is buffered until the watermark
  reaches the far end of its range on the other side, or its own timestamp if
  that is later (as Flink's ``IntervalJoinOperator``), then a timer removes it.
* :func:`window_join` / :func:`window_cogroup`: elements of both sides in the same
  window; on firing, every pair (join) or both lists once (coGroup).
* :class:`UnboundedJoin`: both sides kept in state (optionally with a TTL); an
  inner join emits each match whatever the arrival order, a left join also emits
  a left element padded with ``None`` until its first match (the replay
  example docs/examples/replay/join-002.spec.json).

Elements are stored as ``[timestamp_ms, value]``; values must be JSON-compatible.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from eddy.eventtime.functions import WindowContext
from eddy.eventtime.operator import WindowSpec
from eddy.eventtime.process import Context
from eddy.eventtime.ttl import Ttl
from eddy.eventtime.windows import WindowAssigner

LEFT, RIGHT = 0, 1


def pair(left: Any, right: Any) -> dict[str, Any]:
    return {"left": left, "right": right}


@dataclass(frozen=True)
class IntervalJoin:
    """``left.interval_join(right).between(lower_ms, upper_ms)``, inner, event time."""

    lower_ms: int
    upper_ms: int
    join: Callable[[Any, Any], Any] = pair
    # Buffered elements are stored as JSON; these turn one back into its type.
    revive_left: Callable[[Any], Any] | None = None
    revive_right: Callable[[Any], Any] | None = None

    def __post_init__(self) -> None:
        if self.lower_ms > self.upper_ms:
            raise ValueError("lower_ms must not exceed upper_ms")

    def process_element1(self, value: Any, ctx: Context) -> None:
        self._element(value, ctx, LEFT)

    def process_element2(self, value: Any, ctx: Context) -> None:
        self._element(value, ctx, RIGHT)

    def _element(self, value: Any, ctx: Context, side: int) -> None:
        ts = ctx.timestamp_ms
        if ts is None or ts < ctx.timer_service.current_watermark_ms:
            return  # late: its matches may already be cleaned up (Flink drops it too)
        mine, theirs = ("left", "right") if side == LEFT else ("right", "left")
        revive = self.revive_right if side == LEFT else self.revive_left
        for other_ts, stored in ctx.state.list(theirs).get():
            other = stored if revive is None else revive(stored)
            left_ts, right_ts = (ts, other_ts) if side == LEFT else (other_ts, ts)
            if self.lower_ms <= right_ts - left_ts <= self.upper_ms:
                left, right = (value, other) if side == LEFT else (other, value)
                # Flink stamps a joined pair with the later of its two times.
                ctx.output(self.join(left, right), timestamp_ms=max(ts, other_ts))
        ctx.state.list(mine).add([ts, value])
        # Kept until the watermark reaches its expiry; then this timer drops it.
        ctx.timer_service.register_event_time_timer(self._expiry(ts, side))

    def on_timer(self, timestamp_ms: int, ctx: Context) -> None:
        for name, side in (("left", LEFT), ("right", RIGHT)):
            buffered = ctx.state.list(name)
            kept = [e for e in buffered.get() if self._expiry(e[0], side) > timestamp_ms]
            buffered.update(kept)

    def _expiry(self, ts: int, side: int) -> int:
        """The watermark at which an element of ``side`` at ``ts`` is dropped.

        The far end of its range on the other side (``ts + upper`` for a left,
        ``ts - lower`` for a right), but never before ``ts`` itself: when that end
        is behind the element (``upper < 0`` for a left, ``lower > 0`` for a right)
        an element of the other side exactly at it, arriving when the watermark is
        exactly there, is still on time and must find this one. Flink keeps its
        buffers as long, and no longer: when the far end is at or after ``ts``, such
        an element arriving exactly on the watermark misses this one in Flink too.
        """
        if side == LEFT:
            return ts + max(self.upper_ms, 0)
        return ts + max(-self.lower_ms, 0)


@dataclass(frozen=True)
class UnboundedJoin:
    """Both sides in keyed state; ``left_outer`` pads unmatched lefts with None."""

    left_outer: bool = False
    ttl: Ttl | None = None
    join: Callable[[Any, Any], Any] = pair

    def process_element1(self, value: Any, ctx: Context) -> None:
        rights = ctx.state.list("right", self.ttl).get()
        for right in rights:
            ctx.output(self.join(value, right))
        if not rights and self.left_outer:
            ctx.output(self.join(value, None))
        ctx.state.list("left", self.ttl).add(value)

    def process_element2(self, value: Any, ctx: Context) -> None:
        for left in ctx.state.list("left", self.ttl).get():
            ctx.output(self.join(left, value))
        ctx.state.list("right", self.ttl).add(value)


def _takes_context(fn: Callable[..., Any]) -> bool:
    """Whether a join function also wants the window's context (key, window,
    per-key state): ``f(left, right, ctx)`` rather than ``f(left, right)``."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 3 or any(p.kind is p.VAR_POSITIONAL for p in parameters)


class _WindowJoin:
    def __init__(self, join: Callable[..., Any]) -> None:
        self._join = join
        self._with_ctx = _takes_context(join)

    def process(self, elements: Sequence[Any], ctx: WindowContext) -> list[Any]:
        lefts = [e["value"] for e in elements if e["side"] == LEFT]
        rights = [e["value"] for e in elements if e["side"] == RIGHT]
        extra = (ctx,) if self._with_ctx else ()
        pairs = [self._join(left, right, *extra) for left in lefts for right in rights]
        return [p for p in pairs if p is not None]


class _CoGroup:
    """Both sides' lists once per firing; a function that returns None emits
    nothing (an inner join that found one side empty)."""

    def __init__(self, cogroup: Callable[..., Any]) -> None:
        self._cogroup = cogroup
        self._with_ctx = _takes_context(cogroup)

    def process(self, elements: Sequence[Any], ctx: WindowContext) -> list[Any]:
        lefts = [e["value"] for e in elements if e["side"] == LEFT]
        rights = [e["value"] for e in elements if e["side"] == RIGHT]
        result = self._cogroup(lefts, rights, *((ctx,) if self._with_ctx else ()))
        return [] if result is None else [result]


def tag(side: int, value: Any) -> dict[str, Any]:
    """How each side's elements enter a joined window: tagged with their side."""
    return {"side": side, "value": value}


def window_join(
    assigner: WindowAssigner, join: Callable[[Any, Any], Any] = pair, allowed_lateness_ms: int = 0
) -> WindowSpec:
    """Every pair of the two sides in each window, when the window fires."""
    return WindowSpec(assigner, process=_WindowJoin(join), allowed_lateness_ms=allowed_lateness_ms)


def window_cogroup(
    assigner: WindowAssigner,
    cogroup: Callable[[list[Any], list[Any]], Any] = lambda lefts, rights: {
        "left": lefts,
        "right": rights,
    },
    allowed_lateness_ms: int = 0,
) -> WindowSpec:
    """Both sides' lists once per window firing."""
    return WindowSpec(assigner, process=_CoGroup(cogroup), allowed_lateness_ms=allowed_lateness_ms)
