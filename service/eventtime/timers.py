"""Event-time timers: an in-memory queue ordered by time, mirrored to a store.

The queue is what fires timers fast; the store (RocksDB in workers, a dict in
tests) is what makes them survive a restart: a restored task reloads it.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from typing import NamedTuple, Protocol


class Timer(NamedTuple):
    """A timer for ``key`` at ``time_ms``; ``namespace`` tells its owner what it is for.

    Tuples order by time first, so the heap fires timers in timestamp order and
    ties break deterministically (same order after a restore).
    """

    time_ms: int
    namespace: str
    key: str
    window_start_ms: int = 0
    window_end_ms: int = 0


class TimerStore(Protocol):
    def put_timer(self, timer: Timer) -> None: ...

    def delete_timer(self, timer: Timer) -> None: ...

    def load_timers(self) -> Iterable[Timer]: ...


class TimerQueue:
    """Registered timers, deduplicated; registering one twice keeps one."""

    def __init__(self, store: TimerStore) -> None:
        self._store = store
        self._heap: list[Timer] = []
        self._live: set[Timer] = set()

    def reload(self) -> None:
        """Rebuild from the store (after a restore or an aborted transaction)."""
        self._live = set(self._store.load_timers())
        self._heap = list(self._live)
        heapq.heapify(self._heap)

    def register(self, timer: Timer) -> None:
        if timer in self._live:
            return
        self._live.add(timer)
        heapq.heappush(self._heap, timer)
        self._store.put_timer(timer)

    def delete(self, timer: Timer) -> None:
        """Deleting a timer that does not exist is a no-op, as in Flink."""
        if timer in self._live:
            # Lazy deletion: the heap entry is skipped when it surfaces.
            self._live.discard(timer)
            self._store.delete_timer(timer)

    def due(self, time_ms: int) -> bool:
        """Whether a timer may be due at ``time_ms``: the cheap test before
        :meth:`pop_due`, made on every watermark advance. A deleted timer still at
        the top answers True; ``pop_due`` then skips it."""
        heap = self._heap
        return bool(heap) and heap[0].time_ms <= time_ms

    def next_time_ms(self) -> int | None:
        self._drop_dead()
        return self._heap[0].time_ms if self._heap else None

    def pop_due(self, watermark_ms: int) -> Iterator[Timer]:
        """Yield and remove timers with ``time_ms <= watermark_ms`` in time order.

        Timers registered while iterating that are already due also fire, as
        Flink does when a timer callback registers an earlier timer.
        """
        while True:
            self._drop_dead()
            if not self._heap or self._heap[0].time_ms > watermark_ms:
                return
            timer = heapq.heappop(self._heap)
            self._live.discard(timer)
            self._store.delete_timer(timer)
            yield timer

    def __len__(self) -> int:
        return len(self._live)

    def _drop_dead(self) -> None:
        while self._heap and self._heap[0] not in self._live:
            heapq.heappop(self._heap)
