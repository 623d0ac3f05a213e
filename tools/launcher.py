"""``make run``: broker, topics, one worker, the simulator, and a live status line.

Children run in their own sessions so a Ctrl-C reaches only this launcher, which
then stops them in order (simulator first, so the worker drains and commits what
it received) and stops the broker, PostgreSQL and the schema registry if it
started them: if they were running before, someone else (``make kafka-start``, a
test session, another ``make run``) is using them. A second Ctrl-C or SIGTERM
kills the children at once but still stops those servers; a third is ignored.
Children die with the launcher even if it is killed (tools/children.py).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
from rich.console import Console

from eddy.errors import EddyError
from eddy.redact import redact, redact_url
from eddy.settings import ENV_PREFIX, Settings
from tools.children import STOP_TIMEOUT_S, Child, spawn

console = Console(highlight=False, soft_wrap=True)  # a URL is never cut in two
STATUS_EVERY_S = 5.0


async def _wait_ready(
    base: str, worker: Child, timeout_s: float = 120.0, path: str = "/readyz"
) -> None:
    deadline = time.monotonic() + timeout_s
    async with httpx.AsyncClient(timeout=2.0) as client:
        while time.monotonic() < deadline:
            if worker.process.poll() is not None:
                raise EddyError(f"the {worker.name} exited early; see {worker.log_path}")
            try:
                if (await client.get(f"{base}{path}")).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.5)
    raise EddyError(
        f"the {worker.name} was not ready after {timeout_s:.0f}s; see {worker.log_path}"
    )


def _status_line(elapsed_s: float, now: dict[str, Any], before: dict[str, Any], dt_s: float) -> str:
    """One line of totals over every stage (``eddy status`` has them per stage)."""
    stages: dict[str, Any] = now["stages"]
    previous: dict[str, Any] = before.get("stages", {}) if before else {}

    def rate(name: str) -> float:
        q = previous.get(name)
        if q is None or dt_s <= 0:
            return 0.0
        return float(stages[name]["records_in"] - q["records_in"]) / dt_s

    consumed = sum(rate(name) for name in stages)

    lags = [s["max_watermark_lag_ms"] for s in stages.values()]
    known = [lag for lag in lags if lag is not None]
    lag_text = f"{max(known) / 1000:.1f} s" if known else "n/a"
    total = sum(int(s["windows_emitted"]) for s in stages.values())
    late = sum(int(s["late_records"]) for s in stages.values())
    dead = sum(int(s["dead_letters"]) for s in stages.values())
    return (
        f"[{int(elapsed_s) // 60:02d}:{int(elapsed_s) % 60:02d}] "
        f"{len(stages)} stages consumed {consumed:,.0f} records/s | windows emitted {total} | "
        f"worst watermark lag {lag_text} | late {late} | dead-lettered {dead}"
    )


async def _monitor(base: str, children: list[Child], duration_s: float | None) -> None:
    started = time.monotonic()
    before: dict[str, Any] = {}
    before_at = started
    async with httpx.AsyncClient(timeout=3.0) as client:
        with contextlib.suppress(httpx.HTTPError):
            before = (await client.get(f"{base}/status")).json()
        while duration_s is None or time.monotonic() - started < duration_s:
            wait_s = STATUS_EVERY_S
            if duration_s is not None:
                wait_s = min(wait_s, max(0.0, duration_s - (time.monotonic() - started)))
            await asyncio.sleep(wait_s)
            for child in children:
                if child.process.poll() is not None:
                    raise EddyError(f"{child.name} exited unexpectedly; see {child.log_path}")
            try:
                now = (await client.get(f"{base}/status")).json()
            except httpx.HTTPError as exc:
                console.print(f"[yellow]status unavailable: {exc}")
                continue
            at = time.monotonic()
            console.print(_status_line(at - started, now, before, at - before_at), soft_wrap=True)
            before, before_at = now, at


# What `make run` suggests trying, per agent (docs/agents.md has the same lines).
CURL_EXAMPLES = {
    "sensor_averages": "/sensors/sensor_1/windows",
    "sensor_minmax": "/sensors/sensor_1/minmax",
    "sensor_counts": "/sensors/sensor_1/counts",
    "sensor_alerts": "/sensors/sensor_1/alerts",
    "vehicle_speed": "/vehicles/vehicle_1/agreement",
    "hashtag_counts": "/hashtags/top?order_by=count&limit=5",
    "team_powerups": "/teams/team_1/powerups",
}

# The simulator scenario that feeds each agent.
SCENARIO_OF = {
    "sensor_averages": "sensors",
    "sensor_minmax": "sensors",
    "sensor_counts": "sensors",
    "sensor_alerts": "sensors",
    "vehicle_speed": "vehicles",
    "hashtag_counts": "tweets",
    "team_powerups": "game",
    "sensor_rooms": "sensors",
    "postgres_sink": "sensors",
}


def simulator_scenarios(agents: Sequence[str]) -> list[str]:
    """Scenarios to simulate for the agents that run, in a stable order."""
    wanted = {SCENARIO_OF[p] for p in agents if p in SCENARIO_OF}
    return [s for s in ("sensors", "vehicles", "tweets", "game") if s in wanted]


@dataclass(frozen=True)
class Run:
    """What ``make run`` runs: the reference app's agents and their services."""

    settings: Settings
    agents: tuple[str, ...]
    env: dict[str, str]  # for the worker: EDDY_AGENTS, EDDY_POSTGRES_DSN

    @property
    def room_service_url(self) -> str:
        from eddy.examples.settings import RoomSettings

        default = str(RoomSettings.model_fields["room_service_url"].default)
        return os.environ.get(f"{ENV_PREFIX}ROOM_SERVICE_URL", default)

    @property
    def postgres_dsn(self) -> str:
        return self.env.get(f"{ENV_PREFIX}POSTGRES_DSN") or os.environ[f"{ENV_PREFIX}POSTGRES_DSN"]

    @property
    def postgres_schema(self) -> str:
        return os.environ.get(f"{ENV_PREFIX}POSTGRES_SCHEMA", "eddy")


def postgres_dsn_hint(dsn: str) -> str:
    """The DSN without its password, to print."""
    parts = urlsplit(dsn)
    host = parts.hostname or ""
    user = f"{parts.username}@" if parts.username else ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{user}{host}{port}{parts.path}"


def _print_banner(run: Run, base: str, logs: Path) -> None:
    settings = run.settings
    console.print(
        f"[bold green]Eddy is running[/] (worker {settings.worker_id}, "
        f"{settings.processing_guarantee.value})"
    )
    console.print(f"  REST API      {base}   (OpenAPI: {base}/docs)")
    for agent, path in CURL_EXAMPLES.items():
        if agent in run.agents:
            console.print(f"  {agent:<15} curl {base}{path}")
    if "sensor_rooms" in run.agents:
        console.print(
            f"  sensor_rooms    readings with their room on {settings.topic('sensor-rooms')}; "
            f"lookups from {redact_url(run.room_service_url)}/rooms/sensor_1"
        )
    if "postgres_sink" in run.agents:
        query = f"select * from {run.postgres_schema}.sensor_latest"
        console.print(f"  postgres_sink   psql {postgres_dsn_hint(run.postgres_dsn)} -c '{query}'")
    console.print(f"  metrics       {base}/metrics")
    console.print(f"  health        {base}/healthz   {base}/readyz")
    console.print(f"  Kafka         {settings.bootstrap_servers}")
    if registry := os.environ.get(f"{ENV_PREFIX}SCHEMA_REGISTRY_URL"):
        console.print(f"  readings      Avro, schemas in {redact_url(registry)}")
    console.print(f"  logs          {logs}/worker.log, {logs}/simulator.log")
    console.print("  Ctrl-C stops everything this started.")


# Agents that need a service of their own, which make run starts locally.
WITH_SERVICES = ("sensor_rooms", "postgres_sink")


def with_services(settings: Settings) -> Run:
    """Unless EDDY_AGENTS is set, the reference app's default agents plus those
    that need a service (``sensor_rooms``, ``postgres_sink``)."""
    from eddy.examples import app

    agents = tuple(settings.agents) if settings.agents else (*app.default_agents, *WITH_SERVICES)
    env = {f"{ENV_PREFIX}AGENTS": ",".join(agents)}
    if "postgres_sink" in agents and f"{ENV_PREFIX}POSTGRES_DSN" not in os.environ:
        from tools import postgres

        env[f"{ENV_PREFIX}POSTGRES_DSN"] = postgres.dsn()
    if needs_local_registry():
        from tools import schemaregistry

        env[f"{ENV_PREFIX}SCHEMA_REGISTRY_URL"] = schemaregistry.url()
    return Run(settings, agents, env)


def needs_local_registry() -> bool:
    """Avro readings (EDDY_READINGS_FORMAT=avro) and no registry named: the local one."""
    avro = os.environ.get(f"{ENV_PREFIX}READINGS_FORMAT", "").lower() == "avro"
    return avro and not os.environ.get(f"{ENV_PREFIX}SCHEMA_REGISTRY_URL")


@dataclass
class Started:
    """What this run started, so that stopping it stops exactly that: its children,
    and the shared servers only if they were not running before."""

    children: list[Child] = field(default_factory=list)
    broker: bool = False
    postgres: bool = False
    registry: bool = False

    def names(self) -> str:
        """What a stop stops, in its order: ``simulator, worker, rooms, broker``."""
        servers = [
            name
            for name, started in (
                ("broker", self.broker),
                ("PostgreSQL", self.postgres),
                ("schema registry", self.registry),
            )
            if started
        ]
        return ", ".join([*(child.name for child in reversed(self.children)), *servers])

    def start_broker(self) -> None:
        from tools import localkafka

        self.broker = localkafka.ensure_running()

    def start_postgres(self) -> None:
        from tools import postgres

        self.postgres = postgres.ensure_running()

    def start_registry(self) -> None:
        from tools import schemaregistry

        self.registry = schemaregistry.ensure_running()

    def stop_servers(self) -> None:
        """Through the tools that own them (each waits for a clean shutdown); one
        that fails is reported and the others are still stopped."""
        from tools import localkafka, postgres, schemaregistry

        for name, started, stop in (
            ("the broker", self.broker, localkafka.stop),
            ("PostgreSQL", self.postgres, postgres.stop),
            ("the schema registry", self.registry, schemaregistry.stop),
        ):
            if not started:
                continue
            try:
                stop()
            except (EddyError, OSError) as exc:
                console.print(
                    f"could not stop {name}: {redact(str(exc))}", style="red", markup=False
                )


async def _to_the_end(step: Callable[[], None]) -> None:
    """Run ``step`` in a thread to its end even if the run is cancelled meanwhile
    (a Ctrl-C while the broker starts): what it started is then recorded, and
    stopped. The cancel is passed on once it has ended."""
    running = asyncio.ensure_future(asyncio.to_thread(step))
    try:
        await asyncio.shield(running)
    except asyncio.CancelledError:
        await running
        raise


async def _start_services(run: Run, logs: Path, started: Started) -> None:
    """The room service (if sensor_rooms runs against a local URL) and PostgreSQL
    (if postgres_sink runs)."""
    url = urlsplit(run.room_service_url)
    if "sensor_rooms" in run.agents and url.hostname in {"127.0.0.1", "localhost"}:
        port = str(url.port or 80)
        rooms = spawn("rooms", ["tools", "rooms", "--port", port, "--latency-ms", "10"], logs)
        started.children.append(rooms)
        await _wait_ready(run.room_service_url, rooms, path="/healthz")
    if "postgres_sink" in run.agents:
        with console.status("starting PostgreSQL..."):
            await _to_the_end(started.start_postgres)


async def launch(
    settings: Settings, duration_s: float | None, rate: float, started: Started
) -> None:
    """Start everything, recording it in ``started``, and show the status until
    ``duration_s`` has passed or the run is cancelled; :func:`stop` stops it."""
    from eddy.topics import run_cli as create_topics

    run = with_services(settings)
    await _to_the_end(started.start_broker)
    logs = settings.home / "logs"
    base = worker_base(settings)
    await _start_services(run, logs, started)
    if f"{ENV_PREFIX}SCHEMA_REGISTRY_URL" in run.env:
        with console.status("starting the schema registry (built on first use)..."):
            await _to_the_end(started.start_registry)
    os.environ.update(run.env)  # the topics of every agent that will run
    await asyncio.to_thread(create_topics, argparse.Namespace(action="create", app=None))
    worker = spawn("worker", ["eddy", "worker"], logs, run.env)
    started.children.append(worker)
    with console.status("waiting for the worker to join and restore its state..."):
        await _wait_ready(base, worker)
    scenarios = simulator_scenarios(run.agents)
    if scenarios:
        simulate = ["tools", "simulate", "--scenario", ",".join(scenarios), "--rate", str(rate)]
        started.children.append(spawn("simulator", simulate, logs))
    _print_banner(run, base, logs)
    await _monitor(base, started.children, duration_s)


def worker_base(settings: Settings) -> str:
    return f"http://{settings.api_host}:{settings.api_port}"


class Signals:
    """Ctrl-C and SIGTERM: the first stops everything cleanly; the second kills the
    children at once (the servers still stop through their tools); more are
    ignored until that is done. Someone who presses Ctrl-C twice wants out
    sooner, never a worker left behind."""

    # `kill -TERM -- -PGID` under make reaches the launcher twice: from the kill and
    # from make passing it on. Signals this close to the one that counted are that one.
    SAME_SIGNAL_S = 0.5

    def __init__(self, started: Started) -> None:
        self.started = started
        self.received = 0
        self.main: asyncio.Task[None] | None = None
        self._counted_at = -float("inf")

    @property
    def forced(self) -> bool:
        return self.received >= 2

    def __call__(self) -> None:
        now = time.monotonic()
        if now - self._counted_at < self.SAME_SIGNAL_S:
            return
        self._counted_at = now
        self.received += 1
        if self.received == 1:
            console.print("stopping (press Ctrl-C again to force)")
            if self.main is not None:
                self.main.cancel()  # the stop itself is never cancelled: run_cli runs it after
        elif self.received == 2:
            running = [c for c in reversed(self.started.children) if c.running]
            names = ", ".join(c.name for c in running) or "nothing"
            console.print(
                f"[yellow]forcing the stop: killing {names}; the servers this run started "
                "still stop"
            )
            for child in running:
                child.kill()
        else:
            console.print("[yellow]still stopping; wait for it to end")


async def stop(started: Started, settings: Settings, signals: Signals) -> None:
    """Stop what ``started`` holds, children last-started first (the simulator
    before the worker, so the worker commits what it received)."""
    console.print(f"stopping: {started.names()}")
    for child in reversed(started.children):
        if child.name == "worker" and child.running and not signals.forced:
            await _snapshot_at_exit(worker_base(settings), settings, signals)
        if await asyncio.to_thread(child.stop) and not signals.forced:
            console.print(f"[yellow]{child.name} did not stop in {STOP_TIMEOUT_S:.0f}s; killed it")
    await asyncio.to_thread(started.stop_servers)


async def _snapshot_at_exit(base: str, settings: Settings, signals: Signals) -> None:
    """The state as the run leaves it, for `make analytics` (docs/snapshots.md)."""
    from eddy.client import request_snapshot

    try:
        with console.status("taking a snapshot of the state..."):
            answer = await asyncio.to_thread(request_snapshot, base, settings)
    except EddyError as exc:
        why = "the stop was forced" if signals.forced else str(exc)
        console.print(f"[yellow]no snapshot at exit: {why}")
        return
    if answer["complete"]:
        console.print(f"snapshot {answer['id']} ({answer['rows']} rows): {answer['location']}")
    else:
        console.print(incomplete_snapshot(answer), style="yellow", markup=False)


def incomplete_snapshot(answer: dict[str, Any]) -> str:
    """Which partitions an unpublished snapshot lacks, why, and what to do."""
    missing: list[str] = answer["missing"]
    named = ", ".join(missing[:6]) + (f" and {len(missing) - 6} more" if len(missing) > 6 else "")
    errors = [redact(str(w["error"])) for w in answer.get("workers", []) if w.get("error")]
    why = "; ".join(errors) or (
        "no process of the worker had them open (restoring, or moving between its "
        "processes after a rebalance)"
    )
    return (
        f"snapshot {answer['id']} incomplete, not published: {len(missing)} partitions "
        f"missing ({named}): {why}. The state is kept; `eddy snapshot create` takes "
        "one the next time the app runs."
    )


def run_cli(args: argparse.Namespace) -> int:
    from eddy.app.loader import load_app_and_settings

    _, settings = load_app_and_settings()
    logging.getLogger("httpx").setLevel(logging.WARNING)
    if args.rate <= 0:
        raise EddyError("--rate must be positive")
    started = Started()
    signals = Signals(started)
    loop = asyncio.new_event_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, signals)
    signals.main = loop.create_task(launch(settings, args.duration, args.rate, started))
    failed = True  # until the run ends as asked: its error follows the stop
    try:
        with contextlib.suppress(asyncio.CancelledError):
            loop.run_until_complete(signals.main)
        failed = False
    finally:
        # Outside the task a signal cancels: a second signal kills children, it
        # never abandons the stop of the servers.
        loop.run_until_complete(stop(started, settings, signals))
        loop.close()
        if signals.forced:
            console.print("[yellow]stopped by force: the children were killed")
        elif not failed:
            console.print("stopped cleanly")
    return 130 if signals.forced else 0
