"""Eddy: stateful stream processing on Kafka, with Apache Flink's event-time rules.

Everything a user needs to write, run and test an agent is importable from here:

.. code-block:: python

    from eddy import App, Topic, BoundedOutOfOrderness, Tumbling, Count

The tutorial (docs/tutorial.md) walks through it; the modules below this
package are Eddy's internals and may change. Names load on first use, so the
command line (``eddy --help``) does not pay for what it does not run.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from eddy.app.agent import (
        AgentDef,
    )
    from eddy.app.app import (
        App,
        BuiltApp,
    )
    from eddy.app.queries import (
        QueryError,
    )
    from eddy.app.settings import (
        AgentSettings,
    )
    from eddy.app.stream import (
        BroadcastStream,
        Stream,
        WindowedStream,
    )
    from eddy.app.topic import (
        Topic,
    )
    from eddy.app.web import (
        QUERY_ERRORS,
        Queries,
    )
    from eddy.errors import (
        ConfigError,
        EddyError,
    )
    from eddy.eventtime.clock import (
        FakeClock,
    )
    from eddy.eventtime.descriptors import (
        ListState,
        MapState,
        StateDescriptor,
        StateTypeError,
        ValueState,
    )
    from eddy.eventtime.functions import (
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
    from eddy.eventtime.process import (
        BroadcastContext,
        Context,
    )
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
    from eddy.eventtime.ttl import (
        Ttl,
    )
    from eddy.eventtime.watermarks import (
        Ascending,
        BoundedOutOfOrderness,
        NoWatermarks,
        Punctuated,
        WatermarkStrategy,
    )
    from eddy.eventtime.window_state import (
        WindowResult,
    )
    from eddy.eventtime.windows import (
        Global,
        Session,
        Sliding,
        TimeWindow,
        Tumbling,
        WindowAssigner,
    )
    from eddy.pipeline.pgmigrate import (
        Migration,
    )
    from eddy.pipeline.pgsink import (
        PostgresUpsert,
        Upsert,
    )
    from eddy.schemas.avro import (
        Avro,
    )
    from eddy.schemas.jsonschema import (
        JsonSchema,
    )
    from eddy.schemas.protobuf import (
        Protobuf,
    )
    from eddy.schemas.settings import (
        RegistrySettings,
    )
    from eddy.serde import (
        DecodeError,
        EncodeError,
        Json,
        JsonModel,
        Serde,
    )
    from eddy.testing import (
        TestDriver,
    )

__version__ = "0.2.0"

# Each public name and the module that defines it.
_EXPORTS = {
    "AgentDef": "eddy.app.agent",
    "AgentSettings": "eddy.app.settings",
    "AggregateFunction": "eddy.eventtime.functions",
    "App": "eddy.app.app",
    "Ascending": "eddy.eventtime.watermarks",
    "Avg": "eddy.eventtime.functions",
    "Avro": "eddy.schemas.avro",
    "BoundedOutOfOrderness": "eddy.eventtime.watermarks",
    "BroadcastContext": "eddy.eventtime.process",
    "BroadcastStream": "eddy.app.stream",
    "BuiltApp": "eddy.app.app",
    "ConfigError": "eddy.errors",
    "Context": "eddy.eventtime.process",
    "ContinuousEventTimeTrigger": "eddy.eventtime.triggers",
    "Count": "eddy.eventtime.functions",
    "CountEvictor": "eddy.eventtime.functions",
    "CountTrigger": "eddy.eventtime.triggers",
    "DecodeError": "eddy.serde",
    "EddyError": "eddy.errors",
    "EncodeError": "eddy.serde",
    "EventTimeTrigger": "eddy.eventtime.triggers",
    "Evictor": "eddy.eventtime.functions",
    "FakeClock": "eddy.eventtime.clock",
    "Global": "eddy.eventtime.windows",
    "Json": "eddy.serde",
    "JsonSchema": "eddy.schemas.jsonschema",
    "JsonModel": "eddy.serde",
    "ListState": "eddy.eventtime.descriptors",
    "MapState": "eddy.eventtime.descriptors",
    "Max": "eddy.eventtime.functions",
    "Migration": "eddy.pipeline.pgmigrate",
    "Min": "eddy.eventtime.functions",
    "MinMax": "eddy.eventtime.functions",
    "MinMaxResult": "eddy.eventtime.functions",
    "NeverTrigger": "eddy.eventtime.triggers",
    "PostgresUpsert": "eddy.pipeline.pgsink",
    "ProcessingTimeTrigger": "eddy.eventtime.triggers",
    "Protobuf": "eddy.schemas.protobuf",
    "ProcessWindowFunction": "eddy.eventtime.functions",
    "NoWatermarks": "eddy.eventtime.watermarks",
    "Punctuated": "eddy.eventtime.watermarks",
    "PurgingTrigger": "eddy.eventtime.triggers",
    "Queries": "eddy.app.web",
    "QUERY_ERRORS": "eddy.app.web",
    "QueryError": "eddy.app.queries",
    "Reduce": "eddy.eventtime.functions",
    "RegistrySettings": "eddy.schemas.settings",
    "Serde": "eddy.serde",
    "Session": "eddy.eventtime.windows",
    "Sliding": "eddy.eventtime.windows",
    "StateDescriptor": "eddy.eventtime.descriptors",
    "StateTypeError": "eddy.eventtime.descriptors",
    "Stats": "eddy.eventtime.functions",
    "StatsResult": "eddy.eventtime.functions",
    "Stream": "eddy.app.stream",
    "Sum": "eddy.eventtime.functions",
    "TestDriver": "eddy.testing",
    "TimeEvictor": "eddy.eventtime.functions",
    "TimeWindow": "eddy.eventtime.windows",
    "Topic": "eddy.app.topic",
    "Trigger": "eddy.eventtime.triggers",
    "TriggerBase": "eddy.eventtime.triggers",
    "TriggerResult": "eddy.eventtime.triggers",
    "Ttl": "eddy.eventtime.ttl",
    "Tumbling": "eddy.eventtime.windows",
    "Upsert": "eddy.pipeline.pgsink",
    "ValueState": "eddy.eventtime.descriptors",
    "WatermarkStrategy": "eddy.eventtime.watermarks",
    "WindowAssigner": "eddy.eventtime.windows",
    "WindowContext": "eddy.eventtime.functions",
    "WindowedStream": "eddy.app.stream",
    "WindowResult": "eddy.eventtime.window_state",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'eddy' has no attribute {name!r}")
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
