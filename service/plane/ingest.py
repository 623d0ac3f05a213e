"""One ingest process of ``eddy worker`` (``python -m eddy.plane.ingest``).

A worker like any other (its stages, its consumers in the groups, its stores), with
two differences: its REST API listens on a private local port, for the query
plane's control calls only (operations, metrics, the jobs view), and it reports
what it serves to the query plane (``service/plane/status.py``). The query plane
starts it with the settings in its environment; it is not a command of its own.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import logging
import os
import signal
import sys
from pathlib import Path

from eddy import logs
from eddy.app.app import BuiltApp
from eddy.app.loader import load_app_and_settings
from eddy.errors import EddyError
from eddy.plane.status import StatusWriter
from eddy.runtime.engine import PipelineRuntime
from eddy.settings import Settings
from eddy.worker import Worker, quiet_logs, run_worker

log = logging.getLogger(__name__)
PR_SET_PDEATHSIG = 1  # linux/prctl.h


async def run(settings: Settings, built: BuiltApp, index: int, status_dir: Path) -> int:
    writer: StatusWriter | None = None

    def changed(runtime: PipelineRuntime, urgent: bool) -> None:
        if writer is not None:
            writer.changed(runtime, urgent)

    worker = Worker(settings, built, on_stage_change=changed, observe_requests=False)
    writer = StatusWriter(
        status_dir,
        index,
        worker_id=worker.worker_id,
        runtimes=lambda: worker.runtimes,
        agent_of=worker.agent_of,
        registry=worker.metrics.registry,
        health=lambda: (worker.started, worker.readiness()[0], worker.is_live()),
        control_url=lambda: (
            None if worker.api_port is None else f"http://127.0.0.1:{worker.api_port}"
        ),
    )
    writer.write()
    periodic = asyncio.create_task(writer.run(), name="status")
    try:
        return await run_worker(worker)
    finally:
        periodic.cancel()
        writer.write()  # stopped: every partition closed, nothing served


def die_with_parent(parent_pid: int) -> None:
    """Be killed when the query plane dies, however it dies (kill -9 included): an
    ingest process left behind would hold partitions nobody can query."""
    if sys.platform == "linux":
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:  # it died before the request took effect
        os._exit(1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eddy.plane.ingest", description=__doc__)
    parser.add_argument("--index", type=int, required=True, help="this process's number")
    parser.add_argument("--status-dir", type=Path, required=True, help="where to report")
    parser.add_argument("--parent-pid", type=int, required=True, help="the query plane's pid")
    args = parser.parse_args(argv)
    die_with_parent(args.parent_pid)
    logs.configure(f"%(asctime)s %(levelname)s [ingest {args.index}] %(name)s: %(message)s")
    try:
        app, settings = load_app_and_settings()
        quiet_logs(settings)
        os.nice(settings.ingest_niceness)
        # asyncio's own loop, not uvloop: measured, uvloop did not make the drain
        # faster (docs/performance.md), and the chaos suite proves exactly-once
        # through faults on this loop.
        return asyncio.run(run(settings, app.build(settings), args.index, args.status_dir))
    except EddyError as exc:
        log.error("%s", exc)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
