"""Event-time timers: a queue ordered by time, mirrored to a store.

The store (RocksDB in workers, a dict in tests) holds every timer and is what
makes them survive a restart. The queue keeps only the earliest in memory, its
*front*: a worker may hold a million cleanup timers, almost all far from due,
and a Python heap entry for each would cost hundreds of MB. The rest are read
back from the store, a page at a time, as the front runs out.

Paging has to cut *within* one instant (every key's tumbling window ends at the
same one), so the queue fires timers in the order the store keeps them:
:func:`timer_order`. Both stores keep that order, so a replay fires a watermark's
timers in the same order as a worker.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from typing import NamedTuple, Protocol


class Timer(NamedTuple):
    """A timer for ``key`` at ``time_ms``; ``namespace`` tells its owner what it is for."""

    time_ms: int
    namespace: str
    key: str
    window_start_ms: int = 0
    window_end_ms: int = 0


# A timer as the queue sorts it: time first, then each string by its UTF-8 length
# and then its text (the order of the store's length-prefixed keys), then the window.
Order = tuple[int, int, str, int, str, int, int]


def timer_order(timer: Timer) -> Order:
    """Where ``timer`` fires among timers due together: deterministic, and the same
    after a restore. The store's key encoding must sort the same way."""
    time_ms, namespace, key, start_ms, end_ms = timer
    return (time_ms, len(namespace.encode()), namespace, len(key.encode()), key, start_ms, end_ms)


def _timer_of(order: Order) -> Timer:
    return Timer(order[0], order[2], order[4], order[5], order[6])


class TimerStore(Protocol):
    """Where a :class:`TimerQueue` keeps its timers, as the open transaction sees them."""

    @property
    def page_size(self) -> int | None:
        """Timers a page holds (may change as the store fills); None keeps every
        timer in memory (stores that are memory)."""
        ...

    def put_timer(self, timer: Timer) -> None: ...

    def delete_timer(self, timer: Timer) -> None: ...

    def has_timer(self, timer: Timer) -> bool: ...

    def timers_after(self, after: Timer | None, limit: int | None) -> list[Timer]:
        """The first ``limit`` timers (all with None) after ``after`` (from the
        first with None), in :func:`timer_order`."""
        ...


class TimerQueue:
    """Registered timers, deduplicated; registering one twice keeps one.

    In memory: every stored timer up to ``_loaded_to`` (all of them once
    ``_complete``), in a heap with lazy deletion. A timer registered later than
    that goes to the store only; the front never holds more than two pages.
    """

    def __init__(self, store: TimerStore) -> None:
        self._store = store
        self._heap: list[Order] = []
        self._live: set[Order] = set()
        self._loaded_to: Order | None = None  # None: nothing loaded yet
        self._complete = False

    def reload(self) -> None:
        """Start again from the store (after a restore or an aborted transaction)."""
        self._heap, self._live = [], set()
        self._loaded_to, self._complete = None, False
        self._load()

    def register(self, timer: Timer, *, fresh: bool = False) -> None:
        """Add ``timer`` unless it is there. ``fresh``: the caller knows it is most
        likely not (a new window's cleanup), so a timer past the front is written
        without looking it up first; writing one that exists changes nothing."""
        order = timer_order(timer)
        if order in self._live:
            return
        if self._holds(order):
            self._live.add(order)
            heapq.heappush(self._heap, order)
            self._store.put_timer(timer)
            page = self._store.page_size
            if page is not None and len(self._live) > 2 * page:
                self._shrink(page)
        elif fresh or not self._store.has_timer(timer):
            self._store.put_timer(timer)

    def delete(self, timer: Timer) -> None:
        """Deleting a timer that does not exist is a no-op, as in Flink."""
        order = timer_order(timer)
        if order in self._live:
            # Lazy deletion: the heap entry is skipped when it surfaces.
            self._live.discard(order)
            self._store.delete_timer(timer)
        elif not self._holds(order) and self._store.has_timer(timer):
            self._store.delete_timer(timer)

    def due(self, time_ms: int) -> bool:
        """Whether a timer may be due at ``time_ms``: the cheap test before
        :meth:`pop_due`, made on every watermark advance. A deleted timer still at
        the top answers True; ``pop_due`` then skips it."""
        heap = self._heap
        if heap:
            return heap[0][0] <= time_ms
        top = self._top()
        return top is not None and top[0] <= time_ms

    def next_time_ms(self) -> int | None:
        top = self._top()
        return None if top is None else top[0]

    def pop_due(self, watermark_ms: int) -> Iterator[Timer]:
        """Yield and remove timers with ``time_ms <= watermark_ms`` in order.

        Timers registered while iterating that are already due also fire, as
        Flink does when a timer callback registers an earlier timer.
        """
        while True:
            top = self._top()
            if top is None or top[0] > watermark_ms:
                return
            heapq.heappop(self._heap)
            self._live.discard(top)
            timer = _timer_of(top)
            self._store.delete_timer(timer)
            yield timer

    @property
    def held(self) -> int:
        """Timers in memory now (at most two pages when the store pages them)."""
        return len(self._live)

    def _holds(self, order: Order) -> bool:
        """Whether ``order`` falls in the front (or would, were it stored)."""
        return self._complete or (self._loaded_to is not None and order <= self._loaded_to)

    def _top(self) -> Order | None:
        """The earliest live timer, loading the next page when the front ran out."""
        while True:
            heap, live = self._heap, self._live
            while heap and heap[0] not in live:
                heapq.heappop(heap)
            if heap:
                return heap[0]
            if self._complete:
                return None
            self._load()

    def _load(self) -> None:
        """The next page, into a front that holds no live timer (every caller first
        emptied it, or has just started): the page, sorted, is the new heap."""
        after = None if self._loaded_to is None else _timer_of(self._loaded_to)
        size = self._store.page_size
        orders = [timer_order(timer) for timer in self._store.timers_after(after, size)]
        self._heap, self._live = orders, set(orders)
        if size is None or len(orders) < size:
            self._complete = True
        else:
            self._loaded_to = orders[-1]

    def _shrink(self, keep: int) -> None:
        """Forget all but the earliest ``keep`` timers; they stay in the store."""
        kept = sorted(self._live)[:keep]
        self._heap, self._live = kept, set(kept)
        self._loaded_to, self._complete = kept[-1], False
