"""``make run``: broker, topics, one worker, the simulator, and a live status line.

Children run in their own sessions so a Ctrl-C reaches only this launcher, which
then stops them in order (simulator first, so the worker drains and commits what
it received) and stops the broker if it started it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

import httpx
from rich.console import Console

from eddy.errors import EddyError
from eddy.redact import redact_url
from eddy.settings import ENV_PREFIX, Settings

console = Console(highlight=False, soft_wrap=True)  # a URL is never cut in two
STATUS_EVERY_S = 5.0


@dataclass
class Child:
    name: str
    process: subprocess.Popen[bytes]
    log: IO[bytes]
    log_path: Path

    def stop(self, timeout_s: float = 30.0) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                console.print(f"[yellow]{self.name} did not stop in {timeout_s:.0f}s; killing it")
                self.process.kill()
                self.process.wait()
        self.log.close()


def _spawn(name: str, args: list[str], log_dir: Path, env: dict[str, str] | None = None) -> Child:
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{name}.log"
    log = log_path.open("ab")
    process = subprocess.Popen(
        [sys.executable, "-m", *args],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env={**os.environ, **(env or {})},
    )
    return Child(name, process, log, log_path)


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


async def _start_services(run: Run, logs: Path, children: list[Child]) -> bool:
    """The room service (if sensor_rooms runs against a local URL) and PostgreSQL (if
    postgres_sink runs); True if this started PostgreSQL."""
    url = urlsplit(run.room_service_url)
    if "sensor_rooms" in run.agents and url.hostname in {"127.0.0.1", "localhost"}:
        port = str(url.port or 80)
        rooms = _spawn("rooms", ["tools", "rooms", "--port", port, "--latency-ms", "10"], logs)
        children.append(rooms)
        await _wait_ready(run.room_service_url, rooms, path="/healthz")
    if "postgres_sink" not in run.agents:
        return False
    from tools import postgres

    with console.status("starting PostgreSQL..."):
        return await asyncio.to_thread(postgres.ensure_running)


async def launch(settings: Settings, duration_s: float | None, rate: float) -> int:
    from eddy.topics import run_cli as create_topics
    from tools import localkafka, postgres

    run = with_services(settings)
    started_broker = await asyncio.to_thread(localkafka.ensure_running)
    started_postgres = started_registry = False
    children: list[Child] = []
    logs = settings.home / "logs"
    base = f"http://{settings.api_host}:{settings.api_port}"
    try:
        started_postgres = await _start_services(run, logs, children)
        if f"{ENV_PREFIX}SCHEMA_REGISTRY_URL" in run.env:
            from tools import schemaregistry

            with console.status("starting the schema registry (built on first use)..."):
                started_registry = await asyncio.to_thread(schemaregistry.ensure_running)
        os.environ.update(run.env)  # the topics of every agent that will run
        await asyncio.to_thread(create_topics, argparse.Namespace(action="create", app=None))
        worker = _spawn("worker", ["eddy", "worker"], logs, run.env)
        children.append(worker)
        with console.status("waiting for the worker to join and restore its state..."):
            await _wait_ready(base, worker)
        scenarios = simulator_scenarios(run.agents)
        if scenarios:
            simulate = ["tools", "simulate", "--scenario", ",".join(scenarios), "--rate", str(rate)]
            children.append(_spawn("simulator", simulate, logs))
        _print_banner(run, base, logs)
        await _monitor(base, children, duration_s)
        return 0
    finally:
        stopped = ", ".join(child.name for child in reversed(children))
        extra = "".join(
            name
            for name, started in (
                (", broker", started_broker),
                (", PostgreSQL", started_postgres),
                (", schema registry", started_registry),
            )
            if started
        )
        console.print(f"stopping: {stopped}{extra}")
        for child in reversed(children):
            if child.name == "worker" and child.process.poll() is None:
                await _snapshot_at_exit(base, settings)
            await asyncio.to_thread(child.stop)
        if started_broker:
            await asyncio.to_thread(localkafka.stop)
        if started_postgres:
            await asyncio.to_thread(postgres.stop)
        if started_registry:
            from tools import schemaregistry

            await asyncio.to_thread(schemaregistry.stop)
        console.print("stopped cleanly")


async def _snapshot_at_exit(base: str, settings: Settings) -> None:
    """The state as the run leaves it, for `make analytics` (docs/snapshots.md)."""
    from eddy.client import request_snapshot

    try:
        with console.status("taking a snapshot of the state..."):
            answer = await asyncio.to_thread(request_snapshot, base, settings)
    except EddyError as exc:
        console.print(f"[yellow]no snapshot at exit: {exc}")
        return
    if answer["complete"]:
        console.print(f"snapshot {answer['id']} ({answer['rows']} rows): {answer['location']}")
    else:
        console.print(f"[yellow]snapshot {answer['id']} incomplete: {answer['missing']}")


def run_cli(args: argparse.Namespace) -> int:
    from eddy.app.loader import load_app_and_settings

    _, settings = load_app_and_settings()
    logging.getLogger("httpx").setLevel(logging.WARNING)
    if args.rate <= 0:
        raise EddyError("--rate must be positive")
    loop = asyncio.new_event_loop()
    main = loop.create_task(launch(settings, args.duration, args.rate))
    # Ctrl-C cancels the monitor; `launch`'s finally-block then stops everything.
    loop.add_signal_handler(signal.SIGINT, main.cancel)
    loop.add_signal_handler(signal.SIGTERM, main.cancel)
    try:
        return loop.run_until_complete(main)
    except asyncio.CancelledError:
        return 0
    finally:
        loop.close()
