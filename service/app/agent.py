"""The decorator way to write an agent, for teams coming from Faust.

.. code-block:: python

    @app.agent(clicks, outputs=[alerts], states=[LAST_SEEN])
    async def watch(click: Click, ctx: Context) -> None:
        last = ctx.state(LAST_SEEN)
        if last.get() is None:
            ctx.send(alerts, {"user": ctx.key, "first_click_ms": ctx.timestamp_ms})
        last.set(ctx.timestamp_ms)

The function gets each record as its topic's type, one at a time in offset
order per partition, with a context holding the record's key and event time,
typed keyed state, timers (``ctx.timer_service``, handled by the function given
to ``@watch.on_timer``), the agent's settings and ``ctx.send`` to any declared
output topic. It may ``await`` I/O: the worker waits for each record before
the next and before every checkpoint, so exactly-once holds. It compiles onto
the same process operator as ``Stream.process``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from eddy.app.settings import AgentSettings
from eddy.app.topic import Topic
from eddy.eventtime.descriptors import StateDescriptor
from eddy.eventtime.process import Context
from eddy.eventtime.watermarks import WatermarkStrategy

Handler = Callable[..., Any]
# A decorated handler keeps its own signature for the type checker.
H = TypeVar("H", bound=Handler)


@dataclass
class AgentDef:
    """What ``@app.agent`` records: compiled when the app is built."""

    name: str
    topic: Topic[Any]
    function: Handler
    outputs: tuple[Topic[Any], ...]
    states: tuple[StateDescriptor[Any], ...]
    settings: type[AgentSettings] | None
    watermark: WatermarkStrategy | None
    default: bool = True
    timer: Handler | None = field(default=None)
    group_id: str | None = None  # None: <app id>.<agent>

    def on_timer(self, function: H) -> H:
        """Decorate the handler of this agent's timers: ``(timestamp_ms, ctx)``;
        ``ctx.time_domain`` says ``event_time`` or ``processing_time``."""
        self.timer = function
        return function

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """The function itself stays callable (for unit tests with a fake context)."""
        return self.function(*args, **kwargs)


class SyncAgentFunction:
    """An agent whose handlers are plain functions: run synchronously."""

    def __init__(self, agent: AgentDef, settings: AgentSettings | None) -> None:
        self._fn = agent.function
        self._timer = agent.timer
        self._settings = settings

    def process_element(self, value: Any, ctx: Context) -> None:
        ctx.settings = self._settings
        self._fn(value, ctx)

    def on_timer(self, timestamp_ms: int, ctx: Context) -> None:
        if self._timer is not None:
            ctx.settings = self._settings
            self._timer(timestamp_ms, ctx)


class AsyncAgentFunction:
    """An agent with an ``async def`` handler: awaited, one record at a time."""

    def __init__(self, agent: AgentDef, settings: AgentSettings | None) -> None:
        self._fn = agent.function
        self._timer = agent.timer
        self._settings = settings

    async def process_element(self, value: Any, ctx: Context) -> None:
        ctx.settings = self._settings
        result = self._fn(value, ctx)
        if inspect.isawaitable(result):
            await result

    async def on_timer(self, timestamp_ms: int, ctx: Context) -> None:
        if self._timer is not None:
            ctx.settings = self._settings
            result = self._timer(timestamp_ms, ctx)
            if inspect.isawaitable(result):
                await result


def agent_function(agent: AgentDef, settings: AgentSettings | None) -> Any:
    handlers = [agent.function, agent.timer]
    if any(inspect.iscoroutinefunction(h) for h in handlers if h is not None):
        return AsyncAgentFunction(agent, settings)
    return SyncAgentFunction(agent, settings)


def check_outputs(name: str, outputs: Sequence[Topic[Any]]) -> tuple[Topic[Any], ...]:
    names = [t.name for t in outputs]
    if len(set(names)) != len(names):
        raise ValueError(f"agent {name}: an output topic is listed twice")
    return tuple(outputs)
