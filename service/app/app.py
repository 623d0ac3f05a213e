"""The app: the agents a team writes, loaded by ``--app module:attribute``.

.. code-block:: python

    app = App("clickstream")

    (app.stream(clicks, name="clicks_per_minute", watermark=BoundedOutOfOrderness(2_000))
        .window(Tumbling(60_000)).late_to(late_clicks).aggregate(Count())
        .to(click_counts).queryable())

An app is a registry of definitions; nothing connects to Kafka or reads the
environment when the module is imported. ``eddy worker --app clicks:app``
imports it, loads the framework's and the agents' settings, builds the agents
this worker runs (``EDDY_AGENTS``) and runs them; the test driver and the
replay CLI build the same app in memory.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, overload

from eddy.app.agent import AgentDef, check_outputs
from eddy.app.plan import Builder, Compiled, PlanError, View, compile_agent, compile_stream
from eddy.app.settings import AgentSettings
from eddy.app.stream import KEYED_STEPS, TERMINALS, BroadcastStream, Stream
from eddy.app.topic import Topic
from eddy.errors import ConfigError
from eddy.eventtime.descriptors import StateDescriptor
from eddy.eventtime.watermarks import WatermarkStrategy
from eddy.pipeline.base import Pipeline
from eddy.schemas.binder import SchemaBinder
from eddy.settings import Settings, build, env_prefix, variables

if TYPE_CHECKING:
    from fastapi import APIRouter

F = TypeVar("F", bound=Callable[..., Any])
NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")
GROUP_ID = re.compile(r"^[A-Za-z0-9._-]{1,200}$")


@dataclass
class _Chain:
    """A fluent chain registered by its terminals (``to``, ``sink``, ``queryable``)."""

    head: Stream[Any]
    # (to/sink/queryable step, the stateless steps between the keyed step and it)
    terminals: list[tuple[Any, tuple[Any, ...]]] = field(default_factory=list)


@dataclass
class _Define:
    """``@app.define``: a function that writes chains from its settings."""

    name: str
    function: Callable[..., Any]
    settings: type[AgentSettings] | None
    default: bool


@dataclass
class BuiltApp:
    """An app as one worker runs it: its agents compiled, with their settings."""

    app: App
    settings: Settings
    agents: dict[str, Compiled]
    # Its schema-registry serdes; a worker registers its outputs' schemas at start.
    schemas: SchemaBinder = field(default_factory=SchemaBinder)

    @property
    def stages(self) -> list[Pipeline]:
        return [stage for agent in self.agents.values() for stage in agent.stages]

    @property
    def views(self) -> list[View]:
        return [view for agent in self.agents.values() for view in agent.views]

    def group_id_of(self, stage: str) -> str:
        """The consumer group ``stage`` reads in: its agent's ``group_id`` if it
        named one, else ``<app id>.<stage>``."""
        for agent in self.agents.values():
            if agent.group_id is not None and any(s.name == stage for s in agent.stages):
                return agent.group_id
        return default_group_id(self.settings, stage)

    def agent_of(self, stage: str) -> str:
        for name, agent in self.agents.items():
            if any(s.name == stage for s in agent.stages):
                return name
        raise KeyError(stage)


class App:
    """Owns the agents of one application (see the module docstring)."""

    def __init__(self, name: str) -> None:
        if not re.match(r"^[A-Za-z0-9._-]{1,100}$", name):
            raise ValueError(f"app name {name!r}: use 1-100 of A-Z a-z 0-9 . _ -")
        self.name = name
        self._router: APIRouter | None = None
        self.aliases: dict[str, str] = {}
        self._chains: dict[str, _Chain] = {}
        self._defines: dict[str, _Define] = {}
        self._agents: dict[str, AgentDef] = {}
        self._collecting: dict[str, _Chain] | None = None
        self._building: str | None = None

    def __repr__(self) -> str:
        return f"App({self.name!r})"

    @property
    def router(self) -> APIRouter:
        """Extra REST routes of this app (aliases, custom views), served by every
        worker next to the generic ones. A FastAPI ``APIRouter``."""
        if self._router is None:
            from fastapi import APIRouter

            self._router = APIRouter()
        return self._router

    # -- writing agents -----------------------------------------------------------------

    def alias(self, path: str, target: str) -> None:
        """Serve the generated route ``target`` at ``path`` too, e.g.
        ``app.alias("/users/{key}/clicks", "/agents/clicks_per_minute/windows/{key}")``
        (the same path parameters, the same response)."""
        if path in self.aliases:
            raise PlanError(f"alias {path} is declared twice")
        self.aliases[path] = target

    def stream(
        self,
        topic: Topic[Any],
        *,
        name: str | None = None,
        watermark: WatermarkStrategy | None = None,
        group_id: str | None = None,
    ) -> Stream[Any]:
        """The records of ``topic``, to transform step by step (see Stream).

        Args:
            name: the agent's name (its consumer group, state and REST paths);
                inside an ``@app.define`` function, the function's name.
            watermark: how event time advances, e.g. BoundedOutOfOrderness(1_000);
                needed by windows and event-time timers.
            group_id: the consumer group every stage of the agent reads in,
                instead of ``<app id>.<stage>`` (see :func:`check_group_id`).
        """
        if name is not None:
            _check_name(name)
        return Stream(self, topic, name, watermark, group_id=check_group_id(group_id))

    def broadcast(self, topic: Topic[Any]) -> BroadcastStream[Any]:
        """A topic every task reads in full, for ``stream.connect(...)``."""
        return BroadcastStream(topic)

    def register(self, stream: Stream[Any]) -> None:
        """Called by a stream's ``to``/``sink``/``queryable``: the chain becomes an agent."""
        name = stream.name or self._building
        if name is None:
            raise PlanError(
                f"a stream of {stream.topic.name} has no name: app.stream(topic, name=...)"
            )
        if self._collecting is None and (name in self._defines or name in self._agents):
            raise PlanError(f"two agents are named {name!r}")
        chains = self._chains if self._collecting is None else self._collecting
        steps = [s for s in stream.steps[:-1] if not isinstance(s, TERMINALS)]
        keyed_at = next((i for i, s in enumerate(steps) if isinstance(s, KEYED_STEPS)), None)
        core = tuple(steps if keyed_at is None else steps[: keyed_at + 1])
        post = tuple(steps[len(core) :])
        chain = chains.get(name)
        if chain is None:
            chain = chains[name] = _Chain(_with_steps(stream, core))
        elif chain.head.topic is not stream.topic or chain.head.steps != core:
            raise PlanError(f"agent {name} has two different chains: give each its own name")
        terminal = (stream.steps[-1], post)
        if terminal not in chain.terminals:
            chain.terminals.append(terminal)

    def agent(
        self,
        topic: Topic[Any],
        *,
        name: str | None = None,
        outputs: Sequence[Topic[Any]] = (),
        states: Sequence[StateDescriptor[Any]] = (),
        settings: type[AgentSettings] | None = None,
        watermark: WatermarkStrategy | None = None,
        default: bool = True,
        group_id: str | None = None,
    ) -> Callable[[Callable[..., Any]], AgentDef]:
        """Decorate ``(async) def f(value, ctx)``: record-at-a-time logic with keyed
        state, timers and awaitable I/O (see :mod:`eddy.app.agent`).

        Args:
            outputs: every topic the function sends to (``ctx.send(topic, v)``).
            states: its keyed states (for savepoints and queries).
            default: run it unless ``EDDY_AGENTS`` says otherwise.
            group_id: its consumer group instead of ``<app id>.<agent>`` (see
                :func:`check_group_id`).
        """
        check_group_id(group_id)

        def decorate(function: Callable[..., Any]) -> AgentDef:
            agent_name = name or function.__name__
            _check_name(agent_name)
            self._claim(agent_name)
            definition = AgentDef(
                agent_name,
                topic,
                function,
                check_outputs(agent_name, outputs),
                tuple(states),
                settings,
                watermark,
                default,
                group_id=group_id,
            )
            self._agents[agent_name] = definition
            return definition

        return decorate

    @overload
    def define(self, function: F) -> F: ...
    @overload
    def define(
        self,
        *,
        name: str | None = None,
        settings: type[AgentSettings] | None = None,
        default: bool = True,
    ) -> Callable[[F], F]: ...
    def define(
        self,
        function: F | None = None,
        *,
        name: str | None = None,
        settings: type[AgentSettings] | None = None,
        default: bool = True,
    ) -> F | Callable[[F], F]:
        """Decorate a function that writes one agent's chain, built when the app
        starts: ``def agent_name(settings)`` (or no argument without ``settings``).

        Args:
            name: the agent's name (default: the function's).
            default: run it unless ``EDDY_AGENTS`` says otherwise.
        """

        def decorate(fn: F) -> F:
            agent = name or fn.__name__
            _check_name(agent)
            self._claim(agent)
            self._defines[agent] = _Define(agent, fn, settings, default)
            return fn

        return decorate(function) if function is not None else decorate

    def _claim(self, name: str) -> None:
        if name in self._agents or name in self._defines or name in self._chains:
            raise PlanError(f"two agents are named {name!r}")

    # -- what the app holds ---------------------------------------------------------------

    @property
    def agent_names(self) -> list[str]:
        return [*self._chains, *self._defines, *self._agents]

    def _definitions(self) -> dict[str, _Define | AgentDef]:
        return {**self._defines, **self._agents}

    @property
    def default_agents(self) -> list[str]:
        optional = {n for n, d in self._definitions().items() if not d.default}
        return [name for name in self.agent_names if name not in optional]

    def settings_class_of(self, agent: str) -> type[AgentSettings] | None:
        """The settings class ``agent`` reads, if it has one."""
        definition = self._definitions().get(agent)
        return None if definition is None else definition.settings

    def settings_classes(self) -> list[type[AgentSettings]]:
        """Every agent settings class of the app, once each, in declaration order."""
        found: dict[type[AgentSettings], None] = {}
        for definition in self._definitions().values():
            if definition.settings is not None:
                found[definition.settings] = None
        return list(found)

    def check_settings_classes(self) -> None:
        """Two classes may not claim one variable, nor a framework one.

        Raises:
            ConfigError: naming the variable and both owners.
        """
        owners: dict[str, Any] = dict.fromkeys(variables(Settings), Settings)
        for cls in self.settings_classes():
            if not env_prefix(cls).startswith("EDDY_"):
                raise ConfigError(f"{cls.__name__}: settings variables must start with EDDY_")
            for variable, field_name in variables(cls).items():
                owner = _declaring(cls, field_name)
                if variable in owners and owners[variable] is not owner:
                    other = getattr(owners[variable], "__name__", "the framework")
                    other = "the framework" if owners[variable] is Settings else other
                    raise ConfigError(
                        f"{variable} is declared by {owner.__name__} and by {other}: rename "
                        "one of the fields, or inherit it from one settings class"
                    )
                owners[variable] = owner

    # -- building ---------------------------------------------------------------------------

    def build(
        self,
        settings: Settings,
        agents: Iterable[str] | None = None,
        overrides: Mapping[str, Mapping[str, Any]] | None = None,
        schemas: SchemaBinder | None = None,
    ) -> BuiltApp:
        """Compile the agents one worker runs.

        Args:
            agents: which (default: ``settings.agents``, else the default agents).
            overrides: per settings class name, field values that win over the
                environment (tests, the test driver).
            schemas: what binds schema-registry serdes (default: the registry
                ``EDDY_SCHEMA_REGISTRY_URL`` names; the test driver's is in memory).

        Raises:
            ConfigError: an unknown agent, bad agent settings, or a definition
                that cannot run (:class:`PlanError`).
        """
        self.check_settings_classes()
        names = self._selected(settings, agents)
        instances = self._settings_instances(names, overrides or {})
        builder = Builder(settings, schemas or SchemaBinder())
        compiled: dict[str, Compiled] = {}
        for name in names:
            compiled[name] = self._compile(builder, name, instances)
        return BuiltApp(self, settings, compiled, builder.schemas)

    def _selected(self, settings: Settings, agents: Iterable[str] | None) -> list[str]:
        wanted = list(agents) if agents is not None else list(settings.agents or ())
        if not wanted:
            wanted = self.default_agents
        known = self.agent_names
        unknown = [name for name in wanted if name not in known]
        if unknown:
            raise ConfigError(
                f"EDDY_AGENTS: {', '.join(unknown)} not in app {self.name} "
                f"(its agents: {', '.join(known) or 'none'})"
            )
        if not wanted:
            raise ConfigError(f"app {self.name} has no agents to run")
        return [name for name in known if name in wanted]

    def _settings_instances(
        self, names: list[str], overrides: Mapping[str, Mapping[str, Any]]
    ) -> dict[type[AgentSettings], AgentSettings]:
        classes = {
            d.settings
            for n, d in self._definitions().items()
            if n in names and d.settings is not None
        }
        instances: dict[type[AgentSettings], AgentSettings] = {}
        problems: list[str] = []
        for cls in self.settings_classes():  # declaration order: stable messages
            if cls not in classes:
                continue
            try:
                instances[cls] = build(cls, overrides.get(cls.__name__, {}))
            except ConfigError as exc:
                problems += str(exc).splitlines()[1:]
        if problems:
            raise ConfigError("invalid configuration:\n" + "\n".join(problems))
        return instances

    def _compile(
        self,
        builder: Builder,
        name: str,
        instances: dict[type[AgentSettings], AgentSettings],
    ) -> Compiled:
        if name in self._agents:
            agent = self._agents[name]
            settings = None if agent.settings is None else instances[agent.settings]
            return compile_agent(builder, agent, settings)
        if name in self._defines:
            return self._compile_define(builder, self._defines[name], instances)
        chain = self._chains[name]
        return compile_stream(builder, name, chain.head, chain.terminals)

    def _compile_define(
        self,
        builder: Builder,
        define: _Define,
        instances: dict[type[AgentSettings], AgentSettings],
    ) -> Compiled:
        settings = None if define.settings is None else instances[define.settings]
        self._collecting, self._building = {}, define.name
        try:
            define.function(*(() if settings is None else (settings,)))
            chains = self._collecting
        finally:
            self._collecting, self._building = None, None
        if set(chains) != {define.name}:
            found = ", ".join(chains) or "none"
            raise PlanError(
                f"agent {define.name}: its function must end one chain named after it with "
                f".to(...), .sink(...) or .queryable() (found: {found})"
            )
        chain = chains[define.name]
        compiled = compile_stream(builder, define.name, chain.head, chain.terminals)
        compiled.settings = settings
        return compiled


def _declaring(cls: type[AgentSettings], field_name: str) -> type:
    """The class that declares ``field_name`` (a subclass shares its parent's)."""
    for klass in cls.__mro__:
        if field_name in getattr(klass, "__annotations__", {}):
            return klass
    return cls


def check_group_id(group_id: str | None) -> str | None:
    """An agent's own consumer group, for an app that must read in a group that
    others already know: a group whose offsets a tool or a migration from another
    framework reads (Kafka Streams' application id, say). Every stage of the
    agent joins it; several agents may share it, as the sub-topologies of one
    Kafka Streams application share one group (each stage is assigned only the
    topics it reads).

    Raises:
        PlanError: not 1-200 of A-Z a-z 0-9 . _ -.
    """
    if group_id is not None and not GROUP_ID.match(group_id):
        raise PlanError(f"group id {group_id!r}: use 1-200 of A-Z a-z 0-9 . _ -")
    return group_id


def default_group_id(settings: Settings, stage: str) -> str:
    """A stage's consumer group unless its agent names one."""
    return f"{settings.app_id}.{stage}"


def _check_name(name: str) -> None:
    if not NAME.match(name):
        raise PlanError(f"agent name {name!r}: a letter, then letters, digits or _ (max 64)")


def _with_steps(stream: Stream[Any], steps: tuple[Any, ...]) -> Stream[Any]:
    return Stream(stream.app, stream.topic, stream.name, stream.watermark, steps, stream.group_id)
