"""A worker: every stage's runtime plus the REST API, in one event loop.

``eddy worker`` runs workers as the ingest processes behind a query plane
(``service/plane``): there a worker's API is private, for the query plane's
control calls, and queries are answered from another process. A worker started
on its own (tests, embedded use) serves queries itself, from its tasks' stores.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import functools
import logging
import os
import signal
import socket
from collections.abc import Callable, Generator, Sequence
from typing import Any

import uvicorn
from fastapi import FastAPI
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from eddy.api.app import create_app
from eddy.app import queries, scans
from eddy.app.app import App, BuiltApp
from eddy.app.loader import load_app
from eddy.app.plan import View
from eddy.app.queries import ServedStage, StateValue, UnknownKeyError, WindowPage
from eddy.app.scans import Budget, KeyPage, Scans, SlicePage
from eddy.errors import ConfigError, EddyError
from eddy.eventtime import MIN_WATERMARK, Clock, SystemClock
from eddy.jobs import JobsView, Scope
from eddy.metrics import Metrics
from eddy.operations import Operation, Operations
from eddy.pipeline.base import Pipeline
from eddy.pipeline.copartition import co_partition
from eddy.runtime.engine import PipelineRuntime
from eddy.runtime.served import RuntimeStage
from eddy.savepoint.stop import AppStopper, LocalStop, Phase
from eddy.settings import Settings
from eddy.snapshot.catalog import Kind
from eddy.snapshot.take import Snapshotter
from eddy.tables.store import StateFormatError
from eddy.topics import TopicSpec, app_topics, ensure_topics

log = logging.getLogger(__name__)


class ApiServer(uvicorn.Server):
    """uvicorn, leaving SIGINT and SIGTERM to the worker."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        # The worker owns SIGINT/SIGTERM: it must commit and leave the group first.
        yield


class AgentReads:
    """The read routes of an app's agents, whatever serves their stages: a worker's
    own tasks, or the query process's secondary instances of its ingest processes'
    stores. Subclasses say how a stage is served."""

    built: BuiltApp | None
    settings: Settings

    def _served(self, stage: str) -> ServedStage:
        raise NotImplementedError

    def view(self, agent: str, name: str) -> View:
        """An agent's ``windows`` view or one of its queryable states.

        Raises:
            UnknownKeyError: the agent or view does not exist (or not on this worker).
        """
        return find_view(self.built, agent, name)

    def windows(
        self,
        agent: str,
        key: str,
        from_ms: int,
        to_ms: int,
        limit: int,
        *,
        newest_first: bool = False,
    ) -> WindowPage:
        view = self.view(agent, "windows")
        stage = self._served(view.stage)
        return queries.windows(stage, key, from_ms, to_ms, limit, newest_first=newest_first)

    def state(self, agent: str, state: str, key: str) -> StateValue:
        view = self.view(agent, state)
        return queries.state(self._served(view.stage), view, key)

    def owner(self, agent: str, key: str) -> queries.Owner:
        return queries.owner_of(self._served(stage_of(self.built, agent)), key)

    async def keys(
        self, agent: str, name: str, prefix: str, after: str | None, limit: int
    ) -> KeyPage:
        view = self.view(agent, name)
        steps = scans.keys(self._served(view.stage), view, prefix, after, limit, self._budget())
        return await self.running_scans.run(steps)

    async def window_slice(
        self,
        agent: str,
        window_start_ms: int | None,
        after: str | None,
        order_by: str | None,
        descending: bool,
        limit: int,
    ) -> SlicePage:
        view = self.view(agent, "windows")
        stage = self._served(view.stage)
        steps = scans.window_slice(
            stage, window_start_ms, after, order_by, descending, limit, self._budget()
        )
        return await self.running_scans.run(steps)

    @functools.cached_property
    def running_scans(self) -> Scans:
        """The scans in progress on this worker's API (they share its event loop)."""
        return Scans()

    def _budget(self) -> Budget:
        settings = self.settings
        reserve_ms = self.running_scans.reserve_ms
        return Budget(settings.api_scan_max_keys, settings.api_scan_max_ms, reserve_ms)


class ComponentEndedError(RuntimeError):
    """A part of the worker (a stage's loop, its API) returned while nobody asked
    it to stop."""


class Worker(AgentReads):
    """Runs an app's stages and serves their state. Implements :class:`eddy.api.backend.Backend`."""

    def __init__(
        self,
        settings: Settings,
        app: App | BuiltApp | Sequence[Pipeline] | None = None,
        clock: Clock | None = None,
        *,
        on_stage_change: Callable[[PipelineRuntime, bool], None] | None = None,
        observe_requests: bool = True,
    ) -> None:
        """Args:
        app: what to run: an app (built here with ``settings``), an app built
            already, or bare stages (low-level tests). None: ``settings.app``.
        on_stage_change: told of every change of a stage's served partitions
            (urgent: before a store is touched) and every checkpoint
            (:meth:`PipelineRuntime.observe`).
        observe_requests: time REST requests in the metrics; an ingest process
            does not (its API is the query plane's, which times the requests).
        """
        self.built = _built(settings, app)
        self._on_stage_change = on_stage_change
        self._observe_requests = observe_requests
        self.settings = settings
        self.clock = clock or SystemClock()
        self.metrics = Metrics()
        self._pipelines = list(self.built.stages) if self.built else list(app or ())  # type: ignore[arg-type]
        # Built in start(): co-partitioning a join's inputs needs to ask Kafka first.
        self.runtimes: dict[str, PipelineRuntime] = {}
        self._started = False
        self.api_port: int | None = None
        self._server: ApiServer | None = None
        self._app: FastAPI | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._stopped = asyncio.Event()
        self.snapshots = Snapshotter(settings, lambda: self.runtimes, self.clock)
        self.savepoints = Snapshotter(settings, lambda: self.runtimes, self.clock, kind="savepoint")
        self._local_stop = LocalStop(settings, lambda: self.runtimes, self.request_stop)
        self._stopper = AppStopper(
            settings, self.savepoints.peers, self.savepoints.take_everywhere, self._local_stop
        )
        self._periodic: asyncio.Task[None] | None = None
        self._jobs = JobsView(
            settings, lambda: self.runtimes, self.clock, lambda: self.endpoint, self.agent_of
        )
        self.operations = Operations(self.clock)

    # -- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        sock = bind(self.settings.api_host, self.settings.api_port)
        self.api_port = sock.getsockname()[1]
        token = self.settings.api_token
        self._app = create_app(
            self,
            token.get_secret_value() if token else None,
            self._observe_request if self._observe_requests else None,
            app=None if self.built is None else self.built.app,
        )
        config = uvicorn.Config(self._app, log_level="warning", access_log=False, lifespan="off")
        self._server = ApiServer(config)
        self._tasks.append(asyncio.create_task(self._server.serve([sock]), name="api"))
        if self.built is not None:
            # Declared partitions and configs win over the runtime's defaults.
            await ensure_topics(self.settings, app_topics(self.built))
            # Register (or find) each output's schema before the first result needs it:
            # a refused or missing schema stops the worker here, saying why.
            await asyncio.to_thread(self.built.schemas.prepare_outputs)
        await self.snapshots.discard_leftovers()
        await self.savepoints.discard_leftovers()
        pipelines = await self._co_partitioned(self._pipelines)
        self.runtimes = {
            p.name: PipelineRuntime(
                p, self.settings, self.metrics, self.clock, group_id=self._group_id(p.name)
            )
            for p in pipelines
        }
        for runtime in self.runtimes.values():
            runtime.endpoint = self.endpoint
            if self._on_stage_change is not None:
                # Before it joins its group: an assignment may come at once.
                runtime.observe(functools.partial(self._on_stage_change, runtime))
            await runtime.start()
            self._tasks.append(asyncio.create_task(runtime.run(), name=runtime.name))
        self._started = True
        if self.settings.snapshot_interval_ms > 0:
            self._periodic = asyncio.create_task(self.snapshots.run_periodic(), name="snapshots")
        log.info(
            "worker %s started; API on http://%s:%d",
            self.worker_id,
            self.settings.api_host,
            self.api_port,
        )

    def _group_id(self, stage: str) -> str | None:
        return None if self.built is None else self.built.group_id_of(stage)

    async def _co_partitioned(self, pipelines: list[Pipeline]) -> list[Pipeline]:
        joined = [t for p in pipelines if len(p.sources) > 1 for t in p.sources]
        if not joined:
            return pipelines
        n = self.settings.partitions
        counts = await ensure_topics(
            self.settings, [TopicSpec(t, n, exact_partitions=False) for t in joined]
        )
        result, repartition = co_partition(pipelines, counts, self.settings.app_id)
        if repartition:
            await ensure_topics(self.settings, [TopicSpec(t, c) for t, c in repartition.items()])
        return result

    async def wait(self) -> None:
        """Return when :meth:`request_stop` is called; raise if a component died."""
        stop = asyncio.create_task(self._stopped.wait())
        done, _ = await asyncio.wait([stop, *self._tasks], return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
        for task in done:
            if task is stop or task.cancelled():
                continue
            if task.exception() is not None:
                raise task.exception()  # type: ignore[misc]
            # A part that returns by itself, unasked, is as dead as one that raised:
            # stopping quietly with exit code 0 would hide it.
            raise ComponentEndedError(f"{task.get_name()} ended without being asked to stop")

    def request_stop(self) -> None:
        self._stopped.set()

    async def stop(self) -> None:
        if self._periodic is not None:
            self._periodic.cancel()
        for runtime in self.runtimes.values():
            await runtime.stop()
        if self._server is not None:
            self._server.should_exit = True
        client = getattr(self._app.state, "forward_client", None) if self._app else None
        if client is not None:
            await client.aclose()
        for task in self._tasks:
            if task.done():
                continue  # a failed task's error was raised by wait(), and reported
            with contextlib.suppress(asyncio.CancelledError, asyncio.TimeoutError):
                await asyncio.wait_for(task, timeout=10)

    def _observe_request(self, route: str, method: str, status: int, seconds: float) -> None:
        self.metrics.http_seconds.labels(route, method, str(status)).observe(seconds)

    @property
    def endpoint(self) -> str:
        """This worker's API as other workers reach it."""
        return endpoint_of(self.settings, self.api_port or 0)

    @property
    def started(self) -> bool:
        """Every stage's runtime is running (not necessarily restored)."""
        return self._started

    # -- Backend (the API's view) ------------------------------------------------------

    @property
    def worker_id(self) -> str:
        return self.settings.worker_id

    @property
    def max_results(self) -> int:
        return self.settings.api_max_results

    def is_live(self) -> bool:
        return all(not t.done() for t in self._tasks if t.get_name() != "api")

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        detail = {
            name: {
                "agent": self.agent_of(name),
                "ready": rt.ready,
                "partitions": sorted(rt.tasks),
                "restoring": sorted(rt.restoring),
            }
            for name, rt in self.runtimes.items()
        }
        ready = self._started and all(rt.ready for rt in self.runtimes.values())
        return ready and self.is_live(), detail

    # -- an app's views: what its agents serve ----------------------------------------

    def views(self) -> list[View]:
        """Every view of the agents this worker runs."""
        return [] if self.built is None else self.built.views

    def agents(self) -> dict[str, list[str]]:
        """Each agent on this worker and the stages it runs as."""
        if self.built is None:
            return {name: [name] for name in self.runtimes}
        return {a: [s.name for s in c.stages] for a, c in self.built.agents.items()}

    def stages(self) -> dict[str, list[str]]:
        return {name: queries.table_names(RuntimeStage(rt)) for name, rt in self.runtimes.items()}

    def agent_of(self, stage: str) -> str:
        return agent_of(self.built, stage)

    def table_entries(
        self, stage: str, table: str, key: str, from_ms: int, to_ms: int, limit: int
    ) -> queries.TablePage:
        return queries.table_entries(self._served(stage), table, key, from_ms, to_ms, limit)

    def remote_owners(self, agent: str) -> dict[str, list[int]]:
        """Other workers' endpoints and the partitions of ``agent`` they own; a
        partition without a known owner is listed under ''."""
        return queries.remote_owners(self._served(stage_of(self.built, agent)))

    def watermarks(self) -> dict[str, dict[int, int]]:
        return {name: rt.watermarks() for name, rt in self.runtimes.items()}

    def now_ms(self) -> int:
        return self.clock.now_ms()

    def _served(self, stage: str) -> RuntimeStage:
        runtime = self.runtimes.get(stage)
        if runtime is None:
            raise UnknownKeyError(f"{stage!r} does not run on this worker")
        return RuntimeStage(runtime)

    # -- long operations (REST answers 202 and the client polls) --------------------

    def start_snapshot(self, kind: Kind) -> Operation:
        """Snapshot (or savepoint) every worker's partitions, in the background."""
        taker = self.savepoints if kind == "savepoint" else self.snapshots
        return self.operations.start(kind, taker.take_everywhere)

    def start_stop(self, savepoint: bool) -> Operation:
        """Stop every worker of the app, after a final savepoint if asked."""
        return self.operations.start("stop", lambda: self._stopper.stop(savepoint=savepoint))

    async def take_part(self, kind: Kind, snapshot_id: str) -> dict[str, Any]:
        """This worker's part of a snapshot (or savepoint) a peer coordinates."""
        taker = self.savepoints if kind == "savepoint" else self.snapshots
        return await taker.part(snapshot_id)

    async def stop_phase(self, phase: Phase) -> dict[str, Any]:
        """One phase of a stop a peer (or this host's query plane) coordinates."""
        return await self._local_stop(phase)

    async def jobs(self, scope: Scope) -> dict[str, Any]:
        """The operations view: this worker's partitions, or (``all``) every worker's."""
        return await self._jobs.answer(scope)

    def metrics_text(self) -> tuple[bytes, str]:
        return generate_latest(self.metrics.registry), CONTENT_TYPE_LATEST

    def status(self) -> dict[str, Any]:
        now_ms = self.clock.now_ms()
        stages = {}
        for name, rt in self.runtimes.items():
            watermarks = {p: w for p, w in rt.watermarks().items() if w != MIN_WATERMARK}
            stages[name] = {
                "agent": self.agent_of(name),
                "ready": rt.ready,
                "partitions": sorted(rt.tasks),
                "restoring": sorted(rt.restoring),
                "watermarks_ms": {str(p): w for p, w in watermarks.items()},
                "min_watermark_lag_ms": now_ms - max(watermarks.values()) if watermarks else None,
                "max_watermark_lag_ms": now_ms - min(watermarks.values()) if watermarks else None,
                "records_in": _value(self.metrics, "eddy_records_in_total", stage=name),
                "windows_emitted": _value(self.metrics, "eddy_windows_emitted_total", stage=name),
                "late_records": _value(self.metrics, "eddy_late_records_total", stage=name),
                "dead_letters": _value(self.metrics, "eddy_dead_letters_total", stage=name),
                "commits": _value(self.metrics, "eddy_commits_total", stage=name),
            }
        return {"worker_id": self.worker_id, "now_ms": now_ms, "stages": stages}


def find_view(built: BuiltApp | None, agent: str, name: str) -> View:
    """``agent``'s ``windows`` view or its queryable state ``name``.

    Raises:
        UnknownKeyError: the agent or view does not exist (or not on this worker).
    """
    for view in [] if built is None else built.views:
        found = view.descriptor.name if view.descriptor is not None else view.kind
        if view.agent == agent and found == name:
            return view
    if built is None or agent not in built.agents:
        raise UnknownKeyError(f"agent {agent!r} does not run on this worker")
    raise UnknownKeyError(f"agent {agent!r} serves no {name!r}")


def stage_of(built: BuiltApp | None, agent: str) -> str:
    """The stage whose state ``agent`` serves (its last).

    Raises:
        UnknownKeyError: no such agent on this worker.
    """
    if built is None or agent not in built.agents:
        raise UnknownKeyError(f"agent {agent!r} does not run on this worker")
    return built.agents[agent].stages[-1].name


def agent_of(built: BuiltApp | None, stage: str) -> str:
    """The agent ``stage`` is part of: a re-keying stage added for a join
    (``<stage>.rekey.<topic>``, service/pipeline/copartition.py) belongs to the
    agent of the stage it feeds; a bare stage (no app) is its own agent."""
    if built is None:
        return stage
    try:
        return built.agent_of(stage)
    except KeyError:
        fed = stage.split(".rekey.", 1)[0]
        return built.agent_of(fed) if fed != stage else stage


def _value(metrics: Metrics, sample_name: str, **labels: str) -> float:
    """Sum of a metric's samples matching ``labels`` (over any other labels)."""
    total = 0.0
    for family in metrics.registry.collect():
        for sample in family.samples:
            if sample.name == sample_name and all(
                sample.labels.get(k) == v for k, v in labels.items()
            ):
                total += sample.value
    return total


def bind(host: str, port: int) -> socket.socket:
    """The REST API's listening socket.

    Raises:
        ConfigError: the port is taken, or the address is not this host's.
    """
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit it: without it a kept-alive query waits ~40 ms
    # for a delayed ACK (Nagle), 48 ms vs 1 ms measured in the benchmark.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ConfigError(
                f"port {port} on {host} is in use: stop what holds it or set EDDY_API_PORT"
            ) from None
        raise ConfigError(
            f"cannot listen on {host}:{port} ({exc.strerror}): set EDDY_API_HOST"
        ) from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def _built(settings: Settings, app: App | BuiltApp | Sequence[Pipeline] | None) -> BuiltApp | None:
    if isinstance(app, BuiltApp):
        return app
    if app is None:
        app = load_app(settings.app)
    if isinstance(app, App):
        return app.build(settings)
    return None


def endpoint_of(settings: Settings, port: int) -> str:
    """The API listening on ``port`` as other workers reach it."""
    if settings.api_advertised_url:
        return settings.api_advertised_url
    host = settings.api_host
    if host in ("0.0.0.0", "::", ""):
        host = socket.gethostname()  # bound to every interface: the name resolves
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


async def serve(settings: Settings, built: BuiltApp) -> int:
    return await run_worker(Worker(settings, built))


async def run_worker(worker: Worker) -> int:
    """Start ``worker``, run it until SIGINT or SIGTERM (or a failure), stop it;
    the process's exit code."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, worker.request_stop)
    exit_code = 0
    try:
        await worker.start()
        await worker.wait()
    except EddyError:
        raise  # a configuration or connectivity problem: the CLI prints it in one line
    except StateFormatError as exc:
        log.error("worker %s failed: %s", worker.worker_id, exc)
        exit_code = 1
    except Exception as exc:
        log.error("worker %s failed: %r (DEBUG logging shows the traceback)", worker.worker_id, exc)
        log.debug("traceback of the failure", exc_info=exc)
        exit_code = 1
    finally:
        log.info("worker %s stopping: committing and leaving the group", worker.worker_id)
        await stop_within(worker, worker.settings.stop_timeout_ms / 1000, exit_code)
    return exit_code


async def stop_within(worker: Worker, timeout_s: float, exit_code: int) -> None:
    """Stop ``worker``, or exit the process after ``timeout_s``: a pod is killed at
    the end of its grace period anyway, and what was not committed is aborted by
    Kafka (the next owner starts from the last commit), so exiting loses nothing."""
    try:
        await asyncio.wait_for(worker.stop(), timeout_s)
    except TimeoutError:
        log.warning(
            "worker %s: stopping took more than EDDY_STOP_TIMEOUT_MS (%.0f s; a broker "
            "unreachable?): exiting without a last commit",
            worker.worker_id,
            timeout_s,
        )
        # Now, not by returning: asyncio.run would wait for the clients still stuck
        # on that broker (aiokafka's sender awaits its requests when cancelled).
        logging.shutdown()
        os._exit(exit_code)


def quiet_logs(settings: Settings) -> None:
    logging.getLogger().setLevel(settings.log_level)
    logging.getLogger("aiokafka").setLevel(logging.WARNING)
    # aiohttp/httpx log every request at INFO: one line per lookup of an enrichment.
    logging.getLogger("httpx").setLevel(logging.WARNING)


def prepare(settings: Settings, built: BuiltApp, args: argparse.Namespace) -> None:
    """Before any worker process starts: restore a savepoint once, or refuse an app
    that a stop with a savepoint left stopped."""
    if getattr(args, "from_savepoint", None):
        from eddy.savepoint.cli import describe_report, restore_from

        report = restore_from(
            settings,
            args.from_savepoint,
            allow=args.allow_non_restored_state,
            once=True,
            pipelines=built.stages,
            group_ids={s.name: built.group_id_of(s.name) for s in built.stages},
        )
        log.info("%s", describe_report(report))
    else:
        from eddy.savepoint.catalog import check_not_stopped

        check_not_stopped(settings)
