"""Flink's async I/O queue (docs/semantics.md, "Async enrichment"): results of
in-flight async calls, released in input order or as they complete, never across
a watermark.

An enrichment operator starts one call per record with :meth:`AsyncWaitQueue.put`
(which waits while ``capacity`` calls are unreleased) and inserts its watermark
with :meth:`put_watermark` whenever it advances. :meth:`take` returns what may be
emitted now:

* **ordered**: results in input order; a slow call holds back everything after it;
* **unordered**: results as soon as their call finishes, but a watermark is a
  barrier: results after it wait until every call before it has finished and the
  watermark itself is released. So a watermark never overtakes a pending result,
  and a downstream window never sees a record after the watermark that closed it.

No I/O, no Kafka: the operator supplies awaitables (with their own timeout and
fallback), and tests drive it with futures they resolve by hand.
"""

from __future__ import annotations

import asyncio
import functools
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Result(Generic[T]):
    value: T


@dataclass(frozen=True, slots=True)
class Watermark:
    watermark_ms: int


@dataclass
class _Segment(Generic[T]):
    """Calls between two watermarks, and the watermark that closes them (if any)."""

    calls: deque[asyncio.Future[T]] = field(default_factory=deque)
    done: deque[asyncio.Future[T]] = field(default_factory=deque)  # unordered: completion order
    closed_by: int | None = None


class AsyncWaitQueue(Generic[T]):
    def __init__(self, capacity: int, *, ordered: bool) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self.ordered = ordered
        self._segments: deque[_Segment[T]] = deque([_Segment()])
        self._ready: list[Result[T] | Watermark] = []
        self._unreleased = 0
        self._changed = asyncio.Event()

    @property
    def in_flight(self) -> int:
        """Calls started and not released yet (finished or not): at most ``capacity``."""
        return self._unreleased

    async def put(self, call: Awaitable[T] | Callable[[], Awaitable[T]]) -> None:
        """Start ``call`` once there is room for it; releases what finished meanwhile.

        ``call`` is an awaitable, or a function returning one, which is only invoked
        once there is room (so a call is never started beyond the capacity).
        """
        while self._unreleased >= self.capacity:
            self._changed.clear()
            self._release()
            if self._unreleased < self.capacity:
                break
            await self._changed.wait()
        awaitable = call() if callable(call) else call
        future = asyncio.ensure_future(awaitable)
        segment = self._segments[-1]
        segment.calls.append(future)
        self._unreleased += 1
        future.add_done_callback(functools.partial(self._finished, segment))

    def put_watermark(self, watermark_ms: int) -> None:
        """Insert a watermark after every call started so far."""
        self._segments[-1].closed_by = watermark_ms
        self._segments.append(_Segment())
        self._release()

    def take(self) -> list[Result[T] | Watermark]:
        """Everything releasable now, in emission order."""
        self._release()
        ready, self._ready = self._ready, []
        return ready

    async def drain(self) -> list[Result[T] | Watermark]:
        """Wait for every call, then release everything (before a checkpoint)."""
        pending = [f for s in self._segments for f in s.calls if not f.done()]
        if pending:
            await asyncio.wait(pending)
        return self.take()

    def cancel(self) -> None:
        """Drop every call (their records are processed again after recovery)."""
        for segment in self._segments:
            for future in segment.calls:
                future.cancel()
        self._segments = deque([_Segment()])
        self._ready = []
        self._unreleased = 0

    def _finished(self, segment: _Segment[T], future: asyncio.Future[T]) -> None:
        if not self.ordered and not future.cancelled():
            segment.done.append(future)
        self._changed.set()

    def _release(self) -> None:
        while self._segments:
            head = self._segments[0]
            if self.ordered:
                while head.calls and head.calls[0].done():
                    self._emit(head.calls.popleft())
            else:
                while head.done:
                    future = head.done.popleft()
                    head.calls.remove(future)
                    self._emit(future)
            if head.calls or head.closed_by is None:
                return  # calls still pending, or the open (last) segment
            self._segments.popleft()
            self._ready.append(Watermark(head.closed_by))

    def _emit(self, future: asyncio.Future[T]) -> None:
        self._unreleased -= 1
        self._ready.append(Result(future.result()))
