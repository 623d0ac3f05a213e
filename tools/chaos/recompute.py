"""Offline recomputation of what a correct run emits (pure, independent of Eddy).

Written from the agents' specifications, not from Eddy's operators: the
checker's running aggregate per key, and Flink's event-time rule for windowed
averages (per input partition, in arrival order: a reading is late when its
window's last millisecond is at or below the watermark ``max_ts - bound - 1``
that the readings before it produced). Both take the input as it was read back
from Kafka (per partition, in offset order), so the ground truth is what was
really in the topic, not what the producer meant to write.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from eddy.app.queries import partition_for

Reading = tuple[str, int, float]  # sensor, timestamp_ms, temperature


@dataclass
class Expected:
    """Windows (sensor, start) -> temperatures, and readings that must go late."""

    windows: dict[tuple[str, int], list[float]] = field(default_factory=dict)
    late: list[Reading] = field(default_factory=list)

    def summary(self, key: tuple[str, int]) -> dict[str, float | int]:
        temps = self.windows[key]
        return {
            "count": len(temps),
            "min": min(temps),
            "max": max(temps),
            "avg": sum(temps) / len(temps),
        }


def windows_by_partition(
    by_partition: Mapping[int, Iterable[Reading]], *, size_ms: int, bound_ms: int
) -> Expected:
    """Windows a correct run emits, given each input partition's readings in order."""
    out = Expected()
    for readings in by_partition.values():
        groups: dict[tuple[str, int], list[float]] = defaultdict(list)
        max_ts: int | None = None
        for sensor, ts, temp in readings:
            start = ts - ts % size_ms
            if max_ts is not None and start + size_ms - 1 <= max_ts - bound_ms - 1:
                out.late.append((sensor, ts, temp))
            else:
                groups[(sensor, start)].append(temp)
            max_ts = ts if max_ts is None else max(max_ts, ts)
        if max_ts is None:
            continue
        final_watermark = max_ts - bound_ms - 1
        for (sensor, start), temps in groups.items():
            if start + size_ms - 1 <= final_watermark:
                out.windows[(sensor, start)] = temps
    return out


def expected_windows(
    readings: list[Reading], *, size_ms: int, bound_ms: int, partitions: int
) -> Expected:
    """Windows a correct run emits, given readings in the order they were produced
    (partitioned as Kafka's default partitioner does)."""
    by_partition: dict[int, list[Reading]] = defaultdict(list)
    for reading in readings:
        by_partition[partition_for(reading[0], partitions)].append(reading)
    return windows_by_partition(by_partition, size_ms=size_ms, bound_ms=bound_ms)


@dataclass(frozen=True)
class CheckerRow:
    id: int
    key: str
    seq: int
    amount: int
    partition: int
    offset: int


@dataclass
class CheckerExpected:
    """Per (key, seq): the aggregate after that record; alerts the input itself causes."""

    aggs: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    final: dict[str, dict[str, Any]] = field(default_factory=dict)
    alerts: list[dict[str, Any]] = field(default_factory=list)


def checker_aggregates(rows: Iterable[CheckerRow]) -> CheckerExpected:
    """Running count/sum/min/last_seq per key, with rows in per-partition offset order
    (a key lives in one partition, so that is the key's processing order)."""
    out = CheckerExpected()
    for row in rows:
        agg = out.final.get(row.key) or {"count": 0, "sum": 0, "min": None, "last_seq": -1}
        if row.seq != agg["last_seq"] + 1:
            out.alerts.append({"key": row.key, "seq": row.seq, "last_seq": agg["last_seq"]})
        low = row.amount if agg["min"] is None else min(agg["min"], row.amount)
        agg = {
            "count": agg["count"] + 1,
            "sum": agg["sum"] + row.amount,
            "min": low,
            "last_seq": row.seq,
        }
        out.final[row.key] = agg
        out.aggs[(row.key, row.seq)] = {"key": row.key, "seq": row.seq, **agg}
    return out
