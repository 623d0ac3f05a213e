"""Eddy: stateful stream processing on Kafka, with Apache Flink's event-time rules.

Everything a user needs to write, run and test an agent is importable from here:

.. code-block:: python

    from service import App, Topic, BoundedOutOfOrderness, Tumbling, Count

The tutorial (docs/tutorial.md) walks through it; the modules below this
package are Eddy's internals and may change. Names load on first use, so the
command line (``eddy --help``) does not pay for what it does not run.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from service.app.agent import (
        AgentDef,
    )
    from service.app.app import (
        App,
        BuiltApp,
    )
    from service.app.queries import (
        QueryError,
    )
    from service.app.settings import (
        AgentSettings,
    )
    from service.app.stream import (
        BroadcastStream,
        Stream,
        WindowedStream,
    )
    from service.app.topic import (
        Topic,
    )
    from service.app.web import (
        QUERY_ERRORS,
        Queries,
    )
    from service.errors import (
        ConfigError,
        EddyError,
    )
    from service.eventtime.clock import (
        FakeClock,
    )
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
    from service.eventtime.process import (
        BroadcastContext,
        Context,
    )
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
    from service.eventtime.ttl import (
        Ttl,
    )
    from service.eventtime.watermarks import (
        Ascending,
        BoundedOutOfOrderness,
        NoWatermarks,
        Punctuated,
        WatermarkStrategy,
    )
    from service.eventtime.window_state import (
        WindowResult,
    )
    from service.eventtime.windows import (
        Global,
        Session,
        Sliding,
        TimeWindow,
        Tumbling,
        WindowAssigner,
    )
    from service.pipeline.pgmigrate import (
        Migration,
    )
    from service.pipeline.pgsink import (
        PostgresUpsert,
        Upsert,
    )
    from service.schemas.avro import (
        Avro,
    )
    from service.schemas.jsonschema import (
        JsonSchema,
    )
    from service.schemas.protobuf import (
        Protobuf,
    )
    from service.schemas.settings import (
        RegistrySettings,
    )
    from service.serde import (
        DecodeError,
        EncodeError,
        Json,
        JsonModel,
        Serde,
    )
    from service.testing import (
        TestDriver,
    )

__version__ = "0.2.0"

# Each public name and the module that defines it.
_EXPORTS = {
    "AgentDef": "service.app.agent",
    "AgentSettings": "service.app.settings",
    "AggregateFunction": "service.eventtime.functions",
    "App": "service.app.app",
    "Ascending": "service.eventtime.watermarks",
    "Avg": "service.eventtime.functions",
    "Avro": "service.schemas.avro",
    "BoundedOutOfOrderness": "service.eventtime.watermarks",
    "BroadcastContext": "service.eventtime.process",
    "BroadcastStream": "service.app.stream",
    "BuiltApp": "service.app.app",
    "ConfigError": "service.errors",
    "Context": "service.eventtime.process",
    "ContinuousEventTimeTrigger": "service.eventtime.triggers",
    "Count": "service.eventtime.functions",
    "CountEvictor": "service.eventtime.functions",
    "CountTrigger": "service.eventtime.triggers",
    "DecodeError": "service.serde",
    "EddyError": "service.errors",
    "EncodeError": "service.serde",
    "EventTimeTrigger": "service.eventtime.triggers",
    "Evictor": "service.eventtime.functions",
    "FakeClock": "service.eventtime.clock",
    "Global": "service.eventtime.windows",
    "Json": "service.serde",
    "JsonSchema": "service.schemas.jsonschema",
    "JsonModel": "service.serde",
    "ListState": "service.eventtime.descriptors",
    "MapState": "service.eventtime.descriptors",
    "Max": "service.eventtime.functions",
    "Migration": "service.pipeline.pgmigrate",
    "Min": "service.eventtime.functions",
    "MinMax": "service.eventtime.functions",
    "MinMaxResult": "service.eventtime.functions",
    "NeverTrigger": "service.eventtime.triggers",
    "PostgresUpsert": "service.pipeline.pgsink",
    "ProcessingTimeTrigger": "service.eventtime.triggers",
    "Protobuf": "service.schemas.protobuf",
    "ProcessWindowFunction": "service.eventtime.functions",
    "NoWatermarks": "service.eventtime.watermarks",
    "Punctuated": "service.eventtime.watermarks",
    "PurgingTrigger": "service.eventtime.triggers",
    "Queries": "service.app.web",
    "QUERY_ERRORS": "service.app.web",
    "QueryError": "service.app.queries",
    "Reduce": "service.eventtime.functions",
    "RegistrySettings": "service.schemas.settings",
    "Serde": "service.serde",
    "Session": "service.eventtime.windows",
    "Sliding": "service.eventtime.windows",
    "StateDescriptor": "service.eventtime.descriptors",
    "StateTypeError": "service.eventtime.descriptors",
    "Stats": "service.eventtime.functions",
    "StatsResult": "service.eventtime.functions",
    "Stream": "service.app.stream",
    "Sum": "service.eventtime.functions",
    "TestDriver": "service.testing",
    "TimeEvictor": "service.eventtime.functions",
    "TimeWindow": "service.eventtime.windows",
    "Topic": "service.app.topic",
    "Trigger": "service.eventtime.triggers",
    "TriggerBase": "service.eventtime.triggers",
    "TriggerResult": "service.eventtime.triggers",
    "Ttl": "service.eventtime.ttl",
    "Tumbling": "service.eventtime.windows",
    "Upsert": "service.pipeline.pgsink",
    "ValueState": "service.eventtime.descriptors",
    "WatermarkStrategy": "service.eventtime.watermarks",
    "WindowAssigner": "service.eventtime.windows",
    "WindowContext": "service.eventtime.functions",
    "WindowedStream": "service.app.stream",
    "WindowResult": "service.eventtime.window_state",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'service' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # once loaded, a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


__all__ = [
    "QUERY_ERRORS",
    "AgentDef",
    "AgentSettings",
    "AggregateFunction",
    "App",
    "Ascending",
    "Avg",
    "Avro",
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
    "JsonSchema",
    "ListState",
    "MapState",
    "Max",
    "Migration",
    "Min",
    "MinMax",
    "MinMaxResult",
    "NeverTrigger",
    "NoWatermarks",
    "PostgresUpsert",
    "ProcessWindowFunction",
    "ProcessingTimeTrigger",
    "Protobuf",
    "Punctuated",
    "PurgingTrigger",
    "Queries",
    "QueryError",
    "Reduce",
    "RegistrySettings",
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
