"""Tumbling event-time windows with allowed lateness, recomputed (pure).

Flink's rule (docs/semantics.md, "Allowed lateness and late data"), written out
from that description rather than taken from Eddy's operators, per input
partition in offset order, the watermark being ``max timestamp so far - bound - 1``
*before* each record:

* a record whose window is gone (``end - 1 + lateness <= watermark``) is late;
* otherwise it joins its window, and if the window's end has already passed
  (``end - 1 <= watermark``) the window fires at once: ``first`` if it never
  fired, else ``update`` (a late record within the allowed lateness);
* then the record moves the watermark, and every window whose end it passed and
  that has not fired fires ``first``.

Used for ``sensor_counts`` (10 s, 5 s lateness) and ``team_powerups`` (1 min,
2 min lateness); sensor_averages and sensor_minmax use
``recompute.windows_by_partition`` (no lateness).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

Event = tuple[str, int, Any]  # key, timestamp_ms, value


@dataclass(frozen=True)
class Firing:
    """One emission of a window: every value it holds so far, in arrival order."""

    key: str
    start_ms: int
    timing: str  # "first" or "update"
    values: tuple[Any, ...]


@dataclass
class Walk:
    firings: list[Firing] = field(default_factory=list)
    late: list[Event] = field(default_factory=list)


def walk_tumbling(
    by_partition: Mapping[int, Iterable[Event]],
    *,
    size_ms: int,
    bound_ms: int,
    lateness_ms: int,
) -> Walk:
    """Every firing and every late record of a correct run."""
    out = Walk()
    for events in by_partition.values():
        windows: dict[tuple[str, int], list[Any]] = {}
        fired: set[tuple[str, int]] = set()
        unfired: list[tuple[int, str, int]] = []  # heap of (end, key, start)
        watermark_ms: int | None = None  # None: no record yet, nothing is late
        for key, ts, value in events:
            start = ts - ts % size_ms
            end = start + size_ms
            if watermark_ms is not None and end - 1 + lateness_ms <= watermark_ms:
                out.late.append((key, ts, value))
            else:
                values = windows.setdefault((key, start), [])
                values.append(value)
                if watermark_ms is not None and end - 1 <= watermark_ms:
                    timing = "update" if (key, start) in fired else "first"
                    fired.add((key, start))
                    out.firings.append(Firing(key, start, timing, tuple(values)))
                elif len(values) == 1:
                    heapq.heappush(unfired, (end, key, start))
            candidate = ts - bound_ms - 1
            if watermark_ms is None or candidate > watermark_ms:
                watermark_ms = candidate
            while unfired and unfired[0][0] - 1 <= watermark_ms:
                _, k, s = heapq.heappop(unfired)
                fired.add((k, s))
                out.firings.append(Firing(k, s, "first", tuple(windows[(k, s)])))
    return out


# -- sensor_counts ---------------------------------------------------------------------

COUNTS_WINDOW_MS = 10_000
COUNTS_LATENESS_MS = 5_000

Reading = tuple[str, int, float]  # sensor, timestamp_ms, temperature
# (sensor, window start, timing, count): unique, since a window's count only grows.
CountId = tuple[str, int, str, int]


@dataclass
class CountsExpected:
    results: dict[CountId, dict[str, Any]] = field(default_factory=dict)
    late: list[Reading] = field(default_factory=list)


def expected_counts(by_partition: Mapping[int, Iterable[Reading]], bound_ms: int) -> CountsExpected:
    """sensor_counts: readings per sensor per 10 s window, first then an update per
    reading within the 5 s lateness; readings past it to the late topic."""
    events = {p: [(s, ts, temp) for s, ts, temp in rs] for p, rs in by_partition.items()}
    walk = walk_tumbling(
        events, size_ms=COUNTS_WINDOW_MS, bound_ms=bound_ms, lateness_ms=COUNTS_LATENESS_MS
    )
    out = CountsExpected(late=[(k, ts, v) for k, ts, v in walk.late])
    for f in walk.firings:
        out.results[(f.key, f.start_ms, f.timing, len(f.values))] = {
            "sensor_id": f.key,
            "window_start_ms": f.start_ms,
            "window_end_ms": f.start_ms + COUNTS_WINDOW_MS,
            "count": len(f.values),
            "timing": f.timing,
        }
    return out


# -- team_powerups ---------------------------------------------------------------------

POWERUP_WINDOW_MS = 60_000
POWERUP_LATENESS_MS = 120_000
POWERUP_BOUND_MS = 2_000
POWERUP_BUBBLES = 500

GameEvent = tuple[str, int, int]  # team, ts, bubbles


def expected_powerups(
    by_partition: Mapping[int, Iterable[GameEvent]],
) -> dict[tuple[str, int], dict[str, Any]]:
    """team_powerups: per (team, minute), the first firing whose bubble sum reaches
    500, at most one per window (late events within 2 min of lateness count)."""
    walk = walk_tumbling(
        by_partition,
        size_ms=POWERUP_WINDOW_MS,
        bound_ms=POWERUP_BOUND_MS,
        lateness_ms=POWERUP_LATENESS_MS,
    )
    out: dict[tuple[str, int], dict[str, Any]] = {}
    for f in walk.firings:
        bubbles = sum(f.values)
        if bubbles >= POWERUP_BUBBLES and (f.key, f.start_ms) not in out:
            out[(f.key, f.start_ms)] = {
                "team": f.key,
                "window_start_ms": f.start_ms,
                "window_end_ms": f.start_ms + POWERUP_WINDOW_MS,
                "bubbles": bubbles,
                "timing": f.timing,
            }
    return out
