"""The event-time core: watermarks, windows, triggers, evictors, timers.

Pure Python by design: nothing here imports Faust, Kafka or RocksDB, and the wall
clock is injected (:class:`Clock`), so every rule is unit-tested with fake clocks
and in-memory state, and the same definitions run in workers, in the replay CLI
and in the operator harness.
"""

from eddy.eventtime.clock import Clock, FakeClock, SystemClock
from eddy.eventtime.functions import (
    AggregateFunction,
    Avg,
    Count,
    CountEvictor,
    Evictor,
    Max,
    Min,
    MinMax,
    ProcessWindowFunction,
    Reduce,
    Stats,
    Sum,
    TimeEvictor,
    WindowContext,
)
from eddy.eventtime.operator import WindowOperator, WindowSpec
from eddy.eventtime.timers import Timer, TimerQueue, TimerStore, timer_order
from eddy.eventtime.triggers import (
    ContinuousEventTimeTrigger,
    CountTrigger,
    EventTimeTrigger,
    NeverTrigger,
    ProcessingTimeTrigger,
    PurgingTrigger,
    Trigger,
    TriggerBase,
    TriggerResult,
)
from eddy.eventtime.watermarks import (
    MIN_WATERMARK,
    Ascending,
    BoundedOutOfOrderness,
    Punctuated,
    WatermarkGenerator,
    WatermarkStrategy,
    WatermarkTracker,
)
from eddy.eventtime.window_state import WindowEntry, WindowResult, WindowState
from eddy.eventtime.windows import (
    GLOBAL_WINDOW,
    Global,
    Session,
    Sliding,
    TimeWindow,
    Tumbling,
    WindowAssigner,
)

__all__ = [
    "GLOBAL_WINDOW",
    "MIN_WATERMARK",
    "AggregateFunction",
    "Ascending",
    "Avg",
    "BoundedOutOfOrderness",
    "Clock",
    "ContinuousEventTimeTrigger",
    "Count",
    "CountEvictor",
    "CountTrigger",
    "EventTimeTrigger",
    "Evictor",
    "FakeClock",
    "Global",
    "Max",
    "Min",
    "MinMax",
    "NeverTrigger",
    "ProcessWindowFunction",
    "ProcessingTimeTrigger",
    "Punctuated",
    "PurgingTrigger",
    "Reduce",
    "Session",
    "Sliding",
    "Stats",
    "Sum",
    "SystemClock",
    "TimeEvictor",
    "TimeWindow",
    "Timer",
    "TimerQueue",
    "TimerStore",
    "Trigger",
    "TriggerBase",
    "TriggerResult",
    "Tumbling",
    "WatermarkGenerator",
    "WatermarkStrategy",
    "WatermarkTracker",
    "WindowAssigner",
    "WindowContext",
    "WindowEntry",
    "WindowOperator",
    "WindowResult",
    "WindowSpec",
    "WindowState",
    "timer_order",
]
