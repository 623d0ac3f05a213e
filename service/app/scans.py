"""Queries that scan many keys, in bounded work per request.

Listing an agent's keys by prefix, or every key's result of one window, may have
to examine every entry of a table; with hundreds of thousands of keys that took
seconds of the query loop, while it answered nothing else, probes included. So
a scan here has a budget (:class:`Budget`: entries examined and wall time, the
settings ``EDDY_API_SCAN_MAX_KEYS`` and ``EDDY_API_SCAN_MAX_MS``); when the
budget runs out before the page is full, the answer is what was found with a
continuation, ``next_after``: every entry up to that key has been examined, and
asking again with ``after=<next_after>`` goes on from there. A continuation is
a key (the last one examined, matching or not), so the answer of every worker
of a scatter can be cut at the lowest one and merged (:func:`merge_pages`).

A scan is a generator that yields after each entry it examines; :class:`Scans`
runs it on the event loop in slices, so a scan in progress holds the loop for at
most a slice, however long its budget (docs/architecture.md, "Queries that
scan").
"""

from __future__ import annotations

import asyncio
import dataclasses
import heapq
import time
from collections.abc import Awaitable, Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from eddy.app.plan import View
from eddy.app.queries import (
    PartitionUnavailableError,
    ServedPartition,
    ServedStage,
    each_served,
)
from eddy.eventtime import TimeWindow
from eddy.pipeline.windowed import RESULTS, RESULTS_BY_WINDOW
from eddy.tables.codecs import encode_str, encode_time, window_prefix
from eddy.tables.keyed import state_table
from eddy.tables.store import PartitionStore

T = TypeVar("T")
# A scan examines one entry per step and returns its page at the end.
Steps = Generator[None, None, T]
# What a scan examined: the key's position in its table's order, the key, and
# whether it matches (a key scan) or its row (a window's rows).
Examined = tuple[bytes, str, Any]

# The longest key a continuation may be: passed back in a URL's query, percent-
# encoded (up to 12 characters for one), it must fit in what HTTP servers accept
# (uvicorn: 64 KiB). A spent budget stops a scan at a key this short only.
MAX_CONTINUATION_CHARS = 4_096
# Past every window of a key: a window is 16 bytes after the key in a results table.
_PAST_WINDOWS = b"\xff" * 16
_MAX_KEY_BYTES = 0xFFFF  # eddy.tables.codecs.encode_str's limit


def _raw(value: bytes) -> bytes:
    return value


# Key scans read keys only: their values stay undecoded.
_RESULT_KEYS = dataclasses.replace(RESULTS, decode_value=_raw)


class Budget:
    """What one scan may spend on a worker: entries examined, and wall time from the
    request's arrival to its answer. The scan stops examining ``reserve_ms`` before
    the time is up, to have its turn on the loop and answer in time."""

    def __init__(
        self,
        max_keys: int,
        max_ms: int,
        reserve_ms: float = 0.0,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._max_keys = max_keys
        self._clock = clock
        self._deadline_s = clock() + max(0.0, max_ms - reserve_ms) / 1_000
        self.examined = 0

    def spend(self) -> bool:
        """Count one entry examined; whether the budget is spent now."""
        self.examined += 1
        return self.examined >= self._max_keys or self._clock() >= self._deadline_s


@dataclass(frozen=True)
class KeyPage:
    keys: list[str]
    next_after: str | None  # the continuation; None: every key was examined
    partitions: list[int]
    budget_exhausted: bool


@dataclass(frozen=True)
class SlicePage:
    window: TimeWindow | None
    rows: list[dict[str, Any]]
    next_after: str | None
    partitions: list[int]
    budget_exhausted: bool


def position(view_kind: str, key: str) -> bytes:
    """``key``'s place in its table's order: window tables store keys length first
    (so ``b`` comes before ``aa``), state tables by their bytes."""
    return encode_str(key) if view_kind == "windows" else key.encode()


# -- one partition's entries, in order -------------------------------------------------


def _window_keys(store: PartitionStore, prefix: bytes, after: str | None) -> Iterator[Examined]:
    """The keys of a results table from ``after`` on that may start with ``prefix``.

    Keys are stored length first, so the keys starting with a prefix are not one
    range but one per length: each seek lands on the next key at or after where
    the next match could be, and a key past this length's matches jumps to the
    next length. A sparse prefix costs a seek or two per key length, not one per key.
    """
    lower = b"" if after is None else encode_str(after) + _PAST_WINDOWS
    while (target := _window_candidate(lower, prefix)) is not None:
        first = next(store.scan(_RESULT_KEYS, target), None)
        if first is None:
            return
        (key, _), _ = first
        at = encode_str(key)
        yield at, key, at[2:].startswith(prefix)
        lower = at + _PAST_WINDOWS


def _window_candidate(lower: bytes, prefix: bytes) -> bytes | None:
    """The least position at or after ``lower`` where a key starting with ``prefix``
    can be, in a table whose keys are 2 bytes of length then the key's bytes."""
    length = max(int.from_bytes(lower[:2].ljust(2, b"\x00"), "big"), len(prefix))
    while length <= _MAX_KEY_BYTES:
        start = length.to_bytes(2, "big") + prefix
        if lower <= start:
            return start
        if lower[2 : 2 + len(prefix)] == prefix:
            return lower  # among this length's matches
        length += 1  # past them
    return None


def _state_keys(
    store: PartitionStore, view: View, prefix: bytes, after: str | None
) -> Iterator[Examined]:
    """The keys of a state table starting with ``prefix``, after ``after``: one range."""
    assert view.descriptor is not None
    table = dataclasses.replace(state_table(view.descriptor.name), decode_value=_raw)
    lower = prefix
    if after is not None:
        lower = max(lower, after.encode() + b"\x00")
    for key, _ in store.scan(table, lower, _prefix_end(prefix)):
        yield key.encode(), key, True


def _prefix_end(prefix: bytes) -> bytes | None:
    stripped = prefix.rstrip(b"\xff")
    return stripped[:-1] + bytes([stripped[-1] + 1]) if stripped else None


def _window_rows(
    store: PartitionStore, window: TimeWindow, after: str | None
) -> Iterator[Examined]:
    """Every key's result of ``window``, in key order, after ``after``."""
    prefix = window_prefix(window)
    lower = prefix if after is None else prefix + encode_str(after) + b"\x00"
    for (_, key), row in store.scan(RESULTS_BY_WINDOW, lower, _prefix_end(prefix)):
        yield encode_str(key), key, row


# -- scans over the partitions a worker serves --------------------------------------------


def keys(
    stage: ServedStage, view: View, prefix: str, after: str | None, limit: int, budget: Budget
) -> Steps[KeyPage]:
    """Up to ``limit`` keys of ``view`` starting with ``prefix``, after ``after``,
    over the partitions served here, within ``budget``."""
    served = each_served(stage)
    raw = prefix.encode()
    streams = [
        _window_keys(s.store, raw, after)
        if view.kind == "windows"
        else _state_keys(s.store, view, raw, after)
        for s in served
    ]
    found: list[str] = []
    last: str | None = None
    ended = spent = False
    with _Reading(stage, served):
        merged = heapq.merge(*streams, key=_at)
        while True:
            examined = next(merged, None)
            if examined is None:
                ended = True
                break
            _, last, matched = examined
            if matched:
                found.append(last)
                if len(found) > limit:
                    break
            if budget.spend() and len(last) <= MAX_CONTINUATION_CHARS:
                spent = True
                break
            yield
    keys_, next_after = _cut(found, last, limit, ended)
    return KeyPage(keys_, next_after, [s.partition for s in served], spent)


def window_slice(
    stage: ServedStage,
    window_start_ms: int | None,
    after: str | None,
    order_by: str | None,
    descending: bool,
    limit: int,
    budget: Budget,
) -> Steps[SlicePage]:
    """Every key's result of one window (the one starting at ``window_start_ms``, or
    the newest with a result), after ``after``, over the partitions served here:
    the first ``limit`` in key order, or with ``order_by`` the best ``limit`` of
    what ``budget`` let it examine.

    Raises:
        ValueError: the results have no field ``order_by``.
    """
    served = each_served(stage)
    partitions = [s.partition for s in served]
    with _Reading(stage, served):
        window = _find_window([s.store for s in served], window_start_ms)
        if window is None:
            return SlicePage(None, [], None, partitions, False)
        streams = [_window_rows(s.store, window, after) for s in served]
        merged = heapq.merge(*streams, key=_at)
        kept: _Rows = _Ranked(order_by, descending, limit) if order_by else _First(limit)
        last: str | None = None
        ended = spent = False
        while True:
            examined = next(merged, None)
            if examined is None:
                ended = True
                break
            _, last, row = examined
            if kept.add(last, row):
                break  # a page full, and one more: there is a next page
            if budget.spend() and len(last) <= MAX_CONTINUATION_CHARS:
                spent = True
                break
            yield
    rows, next_after = kept.page(last, ended)
    return SlicePage(window, rows, next_after, partitions, spent)


def _cut(
    found: list[str], last: str | None, limit: int, ended: bool
) -> tuple[list[str], str | None]:
    """A page of ``found`` (in order) and its continuation: after its last key when
    more were found, after the last key examined when the budget ran out."""
    if len(found) > limit:
        return found[:limit], found[limit - 1]
    return found, None if ended else last


def _at(examined: Examined) -> bytes:
    return examined[0]


class _Reading:
    """Reading ``served`` over several slices: a partition that moved meanwhile (its
    store closed, or reopened by its process) answers 503, as a point query does,
    and so does one that moved by the end (``confirm``)."""

    def __init__(self, stage: ServedStage, served: Sequence[ServedPartition]) -> None:
        self._stage = stage
        self._served = served

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, error: object, _: object) -> None:
        if kind is GeneratorExit:
            return  # abandoned (the request was cancelled): nothing to answer
        for each in self._served:
            each.confirm()
            if kind is not None and self._stage.serve(each.partition) is None:
                raise PartitionUnavailableError(
                    f"partition {each.partition} moved while it was read", each.partition, 1
                ) from None


def _find_window(stores: list[PartitionStore], start_ms: int | None) -> TimeWindow | None:
    """The window starting at ``start_ms`` (its end is in the keys), or the newest
    window with a result."""
    if start_ms is None:
        newest = [last[0][0] for s in stores if (last := s.last(RESULTS_BY_WINDOW)) is not None]
        return max(newest) if newest else None
    lower, upper = encode_time(start_ms), encode_time(start_ms + 1)
    for store in stores:
        first = next(store.scan(RESULTS_BY_WINDOW, lower, upper), None)
        if first is not None:
            window: TimeWindow = first[0][0]
            return window
    return None


class _Rows:
    """The rows a window's scan keeps for its page."""

    def add(self, key: str, row: dict[str, Any]) -> bool:
        """Keep ``key``'s row (rows come in key order); whether the page is full
        and one more was found (so there is a next page)."""
        raise NotImplementedError

    def page(self, last: str | None, ended: bool) -> tuple[list[dict[str, Any]], str | None]:
        """The page and its continuation, ``last`` being the last key examined."""
        raise NotImplementedError


class _First(_Rows):
    """The first ``limit`` rows in key order."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._rows: list[dict[str, Any]] = []
        self._keys: list[str] = []

    def add(self, key: str, row: dict[str, Any]) -> bool:
        self._rows.append(row)
        self._keys.append(key)
        return len(self._rows) > self._limit

    def page(self, last: str | None, ended: bool) -> tuple[list[dict[str, Any]], str | None]:
        page, after = _cut(self._keys, last, self._limit, ended)
        return self._rows[: len(page)], after


class _Ranked(_Rows):
    """The best ``limit`` rows by a field of all it was given, ties in key order;
    no more than about ``2 * limit`` rows in memory."""

    def __init__(self, field: str, descending: bool, limit: int) -> None:
        self._field = field
        self._descending = descending
        self._limit = limit
        self._rows: list[dict[str, Any]] = []
        self._checked = False

    def add(self, key: str, row: dict[str, Any]) -> bool:
        if not self._checked:
            if self._field not in row:
                raise ValueError(f"order_by: results have no field {self._field!r}")
            self._checked = True
        self._rows.append(row)
        if len(self._rows) >= 2 * self._limit + 1_024:
            self._rows = self._best(self._rows)
        return False  # any row may rank: the scan goes on to its end or its budget

    def page(self, last: str | None, ended: bool) -> tuple[list[dict[str, Any]], str | None]:
        return self._best(self._rows), None if ended else last

    def _best(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        # Stable: rows of equal value stay in key order, the order they came in.
        return sorted(rows, key=sort_key(self._field), reverse=self._descending)[: self._limit]


def sort_key(field: str) -> Callable[[dict[str, Any]], Any]:
    """Rows by ``field``, rows without it (or null) lowest."""
    return lambda row: (row.get(field) is not None, row.get(field))


# -- the answers of several workers, as one ------------------------------------------------


def merge_pages(
    parts: Sequence[tuple[Sequence[T], str | None]],
    key_of: Callable[[T], str],
    at: Callable[[str], bytes],
    limit: int,
    rank: Callable[[list[T]], list[T]] | None = None,
) -> tuple[list[T], str | None]:
    """One page from several workers' pages of one scan, each ``(items in key
    order, continuation)``: only what every worker has examined counts (up to the
    lowest continuation), then the first ``limit`` items in key order, or the
    best ``limit`` by ``rank``. ``at`` gives a key's position in the table's order."""
    ends = [after for _, after in parts if after is not None]
    frontier = min(ends, key=at) if ends else None
    limit_at = None if frontier is None else at(frontier)
    seen: dict[bytes, T] = {}
    for items, _ in parts:
        for item in items:
            where = at(key_of(item))
            if limit_at is None or where <= limit_at:
                seen.setdefault(where, item)
    ordered = [seen[where] for where in sorted(seen)]
    if rank is not None:
        return rank(ordered)[:limit], frontier
    if len(ordered) > limit:
        return ordered[:limit], key_of(ordered[limit - 1])
    return ordered, frontier


# -- running scans on the event loop ---------------------------------------------------------


class Scans:
    """Runs scans on the event loop in slices, round robin, and paced.

    Every scan in progress gets a slice in turn, and a whole round takes about
    ``round_ms``: nothing else waits longer than that for the loop (a probe, a
    point query), however many scans are in progress (each gets less of a round)
    and however long their budget. And scans together take at most ``share`` of
    the loop's time: after a round the loop is left idle for a while, so a request
    that comes then is answered at once, and the process, asleep in its poll, is
    woken at once by the kernel even on a busy host (one that never sleeps waits
    for its turn on a CPU; docs/architecture.md, "Queries that scan").
    """

    def __init__(
        self,
        round_ms: float = 10.0,
        share: float = 0.5,
        clock: Callable[[], float] = time.perf_counter,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        cpu_clock: Callable[[], float] = time.thread_time,
    ) -> None:
        """Args:
        clock: wall time (slices, idle time); ``cpu_clock``: the CPU time of the
            loop's thread, what a slice costs (a slice stretched by the kernel
            giving the CPU to another process cost the loop nothing).
        """
        self._round_s = round_ms / 1_000
        self._idle_per_busy = (1 - share) / share
        self._clock = clock
        self._sleep = sleep
        self._cpu_clock = cpu_clock
        self._owed_s = 0.0  # idle time the loop is owed for the slices run so far
        self._last_end_s = clock()
        self.active = 0
        # What answering takes once a scan stops: a turn on the loop (a round) and
        # the idle owed before it (as long again at most).
        self.reserve_ms = 2 * round_ms

    async def run(self, steps: Steps[T]) -> T:
        """Run ``steps`` to its end, its page."""
        self.active += 1
        try:
            while True:
                await self._idle_owed()
                cpu_s = self._cpu_clock()
                # At least one step per slice: a scan always makes progress.
                end_s = self._clock() + self._round_s / self.active
                try:
                    next(steps)
                    while self._clock() < end_s:
                        next(steps)
                except StopIteration as done:
                    result: T = done.value
                    return result
                finally:
                    self._ran(cpu_s)
                await asyncio.sleep(0)  # the next scan's turn, and the loop's
        finally:
            self.active -= 1
            steps.close()

    async def _idle_owed(self) -> None:
        while True:
            # Whatever time passed since the last slice, the loop had for itself.
            now_s = self._clock()
            self._owed_s = max(0.0, self._owed_s - (now_s - self._last_end_s))
            self._last_end_s = now_s
            if self._owed_s <= 0:
                return
            await self._sleep(self._owed_s)

    def _ran(self, cpu_s: float) -> None:
        self._last_end_s = self._clock()
        owed_s = self._owed_s + (self._cpu_clock() - cpu_s) * self._idle_per_busy
        # A round's idle at most: a step that took long (a store reopened) must not
        # hold every scan back as long again.
        self._owed_s = min(owed_s, self._round_s)
