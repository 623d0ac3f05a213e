"""Eddy: stateful stream processing on Kafka, with Apache Flink's event-time rules.

Everything a user needs to write, run and test an agent is importable from here:

.. code-block:: python

    from service import App, Topic, BoundedOutOfOrderness, Tumbling, Count

The tutorial (docs/tutorial.md) walks through it; the modules below this
package are Eddy's internals and may change.
"""

from typing import TYPE_CHECKING, Any

from service.app.agent import AgentDef
from service.app.app import App, BuiltApp
from service.app.queries import QueryError
from service.app.settings import AgentSettings
from service.app.stream import BroadcastStream, Stream, WindowedStream
from service.app.topic import Topic
from service.errors import ConfigError, EddyError
from service.eventtime.clock import FakeClock
from service.eventtime.descriptors import (
    ListState,
    MapState,
    StateDescriptor,
    StateTypeError,
    ValueState,
)
from service.eventtime.functions import (
    AggregateFunction,
    Avg,
    Count,
    CountEvictor,
    Evictor,
    Max,
    Min,
    MinMax,
    MinMaxResult,
    ProcessWindowFunction,
    Reduce,
    Stats,
    StatsResult,
    Sum,
    TimeEvictor,
    WindowContext,
)
from service.eventtime.process import BroadcastContext, Context
from service.eventtime.triggers import (
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
from service.eventtime.ttl import Ttl
from service.eventtime.watermarks import (
    Ascending,
    BoundedOutOfOrderness,
    Punctuated,
    WatermarkStrategy,
)
from service.eventtime.window_state import WindowResult
from service.eventtime.windows import Global, Session, Sliding, TimeWindow, Tumbling, WindowAssigner
from service.pipeline.pgmigrate import Migration
from service.pipeline.pgsink import PostgresUpsert, Upsert
from service.serde import DecodeError, EncodeError, Json, JsonModel, Serde
from service.testing import TestDriver

if TYPE_CHECKING:
    from service.app.web import QUERY_ERRORS, Queries

__version__ = "0.2.0"


def __getattr__(name: str) -> Any:
    # FastAPI costs a third of a second to import; only apps with routes pay it.
    if name in ("Queries", "QUERY_ERRORS"):
        from service.app import web

        return getattr(web, name)
    raise AttributeError(f"module 'service' has no attribute {name!r}")


__all__ = [
    "QUERY_ERRORS",
    "AgentDef",
    "AgentSettings",
    "AggregateFunction",
    "App",
    "Ascending",
    "Avg",
    "BoundedOutOfOrderness",
    "BroadcastContext",
    "BroadcastStream",
    "BuiltApp",
    "ConfigError",
    "Context",
    "ContinuousEventTimeTrigger",
    "Count",
    "CountEvictor",
    "CountTrigger",
    "DecodeError",
    "EddyError",
    "EncodeError",
    "EventTimeTrigger",
    "Evictor",
    "FakeClock",
    "Global",
    "Json",
    "JsonModel",
    "ListState",
    "MapState",
    "Max",
    "Migration",
    "Min",
    "MinMax",
    "MinMaxResult",
    "NeverTrigger",
    "PostgresUpsert",
    "ProcessWindowFunction",
    "ProcessingTimeTrigger",
    "Punctuated",
    "PurgingTrigger",
    "Queries",
    "QueryError",
    "Reduce",
    "Serde",
    "Session",
    "Sliding",
    "StateDescriptor",
    "StateTypeError",
    "Stats",
    "StatsResult",
    "Stream",
    "Sum",
    "TestDriver",
    "TimeEvictor",
    "TimeWindow",
    "Topic",
    "Trigger",
    "TriggerBase",
    "TriggerResult",
    "Ttl",
    "Tumbling",
    "Upsert",
    "ValueState",
    "WatermarkStrategy",
    "WindowAssigner",
    "WindowContext",
    "WindowResult",
    "WindowedStream",
    "__version__",
]
