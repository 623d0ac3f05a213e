"""The event-time core: watermarks, windows, aggregates, timers.

Pure Python by design: nothing here imports Faust, Kafka or RocksDB, and the wall
clock is injected (:class:`Clock`), so every rule is unit-tested with fake clocks
and in-memory state, and the same definitions run in workers and in replays.
"""

from service.eventtime.aggregates import AggregateFunction, Stats
from service.eventtime.clock import Clock, FakeClock, SystemClock
from service.eventtime.operator import (
    WindowEntry,
    WindowOperator,
    WindowResult,
    WindowSpec,
    WindowState,
)
from service.eventtime.timers import Timer, TimerQueue, TimerStore
from service.eventtime.watermarks import (
    MIN_WATERMARK,
    BoundedOutOfOrderness,
    WatermarkGenerator,
    WatermarkStrategy,
)
from service.eventtime.windows import TimeWindow, Tumbling, WindowAssigner

__all__ = [
    "MIN_WATERMARK",
    "AggregateFunction",
    "BoundedOutOfOrderness",
    "Clock",
    "FakeClock",
    "Stats",
    "SystemClock",
    "TimeWindow",
    "Timer",
    "TimerQueue",
    "TimerStore",
    "Tumbling",
    "WatermarkGenerator",
    "WatermarkStrategy",
    "WindowAssigner",
    "WindowEntry",
    "WindowOperator",
    "WindowResult",
    "WindowSpec",
    "WindowState",
]
