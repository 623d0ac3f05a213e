"""``eddy worker``: the query process, and the ingest processes it starts.

::

    eddy worker (query process: REST on EDDY_API_PORT, supervisor)
      ├─ ingest process 0   stages, consumers, producers, RocksDB (primary)
      ├─ ingest process 1   ...                    private API on 127.0.0.1
      └─ ...                writes <i>.json per checkpoint, <i>.prom per second
    queries: reports (stat) -> RocksDB secondary instance (catch up) -> answer

The query process binds the API's port, starts the ingest processes and serves
every request itself: queries from the ingest processes' stores, read through
RocksDB secondary instances, so they take no CPU from ingest and ingest never
waits for them; operations by calling the processes' private APIs. One port, one
``/readyz`` (ready when every process is), one ``/metrics`` (all of them added up).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import os
import shutil
import signal

import uvicorn
import uvloop

from eddy.api.app import create_app
from eddy.app.app import BuiltApp
from eddy.app.loader import load_app_and_settings
from eddy.eventtime import SystemClock
from eddy.plane.backend import QueryPlane
from eddy.plane.stages import Secondaries
from eddy.plane.status import claim_reports_dir, reports_dir
from eddy.plane.supervisor import Supervisor
from eddy.settings import Settings
from eddy.worker import ApiServer, bind, endpoint_of, prepare, quiet_logs

log = logging.getLogger(__name__)


def run_cli(args: argparse.Namespace) -> int:
    """``eddy worker``."""
    app, settings = load_app_and_settings(args.app)
    built = app.build(settings)
    quiet_logs(settings)
    prepare(settings, built, args)
    # uvloop: libuv's loop serves a query in less CPU than asyncio's selector loop.
    return uvloop.run(run(settings, built, args.processes or settings.worker_processes))


def process_count(asked: int) -> int:
    """``asked``, or one per CPU core this process may run on."""
    return asked or len(os.sched_getaffinity(0))


async def run(settings: Settings, built: BuiltApp, processes: int) -> int:
    """Serve the API and run ``processes`` ingest processes (0: one per core) until
    SIGINT or SIGTERM, a stop over the API, or a failure; the exit code."""
    count = process_count(processes)
    sock = bind(settings.api_host, settings.api_port)
    endpoint = endpoint_of(settings, sock.getsockname()[1])
    home = settings.state_dir / settings.app_id / ".query"
    reports = reports_dir(home)
    supervisor = Supervisor(settings, count, endpoint, reports)
    claim_reports_dir(reports)
    secondaries = Secondaries(home / "secondary", settings.api_catch_up_interval_ms)
    plane = QueryPlane(
        settings, built, SystemClock(), lambda: supervisor.children, secondaries, lambda: endpoint
    )
    token = settings.api_token
    api = create_app(
        plane,
        token.get_secret_value() if token else None,
        plane.observe_request,
        app=built.app,
    )
    config = uvicorn.Config(api, log_level="warning", access_log=False, lifespan="off")
    server = ApiServer(config)
    # What is built by now (the app, its routes and models, the agents) lives as long
    # as the process: out of the collector's sight, a full collection walks only what
    # came after (docs/architecture.md, "Queries that scan": it walked all of it, and
    # held the query loop up to 242 ms under scans).
    gc.collect()
    gc.freeze()
    serving = asyncio.create_task(server.serve([sock]), name="api")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    exit_code = 0
    try:
        await supervisor.start()
        log.info(
            "worker %s started: %d ingest processes; API on %s", settings.worker_id, count, endpoint
        )
        stopped = asyncio.create_task(stop.wait())
        ended = asyncio.create_task(supervisor.wait())
        done, _ = await asyncio.wait([stopped, ended, serving], return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        if ended in done:
            exit_code = ended.result()
        else:
            ended.cancel()
        if serving in done and serving.exception() is not None:
            log.error("the API failed: %r", serving.exception())
            exit_code = 1
    finally:
        log.info("worker %s stopping its ingest processes", settings.worker_id)
        await supervisor.stop()
        server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError, TimeoutError):
            await asyncio.wait_for(serving, timeout=10)
        await plane.control.close()
        client = getattr(api.state, "forward_client", None)
        if client is not None:
            await client.aclose()
        secondaries.close()
        shutil.rmtree(reports, ignore_errors=True)
    return exit_code
