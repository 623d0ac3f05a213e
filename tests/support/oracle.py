"""An offline recomputation of windowed averages, written independently of Eddy's
operator: per input partition, in arrival order, with the seeds' watermark rule."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from service.queries import partition_for


@dataclass
class Expected:
    windows: dict[tuple[str, int], list[float]] = field(default_factory=dict)
    late: list[tuple[str, int, float]] = field(default_factory=list)

    def summary(self, key: tuple[str, int]) -> dict[str, float | int]:
        temps = self.windows[key]
        return {
            "count": len(temps),
            "min": min(temps),
            "max": max(temps),
            "avg": sum(temps) / len(temps),
        }


def expected_windows(
    readings: list[tuple[str, int, float]], *, size_ms: int, bound_ms: int, partitions: int
) -> Expected:
    """Windows that a correct run emits, given readings in the order they were produced."""
    by_partition: dict[int, list[tuple[str, int, float]]] = defaultdict(list)
    for reading in readings:
        by_partition[partition_for(reading[0], partitions)].append(reading)
    out = Expected()
    for part in by_partition.values():
        groups: dict[tuple[str, int], list[float]] = defaultdict(list)
        max_ts: int | None = None
        for sensor, ts, temp in part:
            start = ts - ts % size_ms
            if max_ts is not None and start + size_ms - 1 <= max_ts - bound_ms - 1:
                out.late.append((sensor, ts, temp))
            else:
                groups[(sensor, start)].append(temp)
            max_ts = ts if max_ts is None else max(max_ts, ts)
        assert max_ts is not None
        final_watermark = max_ts - bound_ms - 1
        for (sensor, start), temps in groups.items():
            if start + size_ms - 1 <= final_watermark:
                out.windows[(sensor, start)] = temps
    return out
