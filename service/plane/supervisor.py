"""The ingest processes of one ``eddy worker``: started, watched, restarted, stopped.

Each is a worker of its own in every consumer group (``service/plane/ingest.py``),
so the groups share the partitions among them as among separate workers; they
differ only in their state directory and worker id. What happens when one exits:

* exit code 0: it was asked to stop (SIGTERM, or ``POST /stop``); when all have,
  ``eddy worker`` exits 0;
* another exit code: the worker failed by itself (its restart strategy gave up, a
  configuration error): the others are stopped and ``eddy worker`` exits with it,
  as a single worker would;
* killed by a signal (``kill -9``, the kernel's OOM killer): the others go on, the
  group moves its partitions to them after the session timeout, and it is started
  again once they have (after ``EDDY_SESSION_TIMEOUT_MS``; doubling, up to 5 min,
  while it keeps dying young). It then takes some partitions back (its local state
  is warm, so the assignor prefers it for those it had). With no other ingest
  process running here there is no one to move them to, and waiting only keeps
  them unserved longer: it starts again after :data:`ALONE_FIRST_S` (doubling the
  same way), and its join completes as soon as the group drops the dead member.
  A record that killed it is then found where the process noted it
  (``service/runtime/inflight.py``): twice in a row, and it is dead-lettered.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from eddy.plane.status import ReportFile
from eddy.settings import Settings

log = logging.getLogger(__name__)
# A process that ran this long before dying was not crash-looping: its restart waits
# only for the group to have moved its partitions (RESTART_AFTER_SESSIONS).
STEADY_S = 60.0
MAX_DELAY_S = 300.0
# The group notices the death after a session timeout, the others learn of it at
# their next heartbeat (a quarter of it) and rejoin: a restart sooner than this
# joins that same rebalance, and the partitions never move to the others.
RESTART_AFTER_SESSIONS = 1.5
# The first restart of a process that was the only one running here.
ALONE_FIRST_S = 1.0
# A process gives up stopping after EDDY_STOP_TIMEOUT_MS by itself; this margin lets
# it exit before it is killed.
STOP_MARGIN_S = 3.0


def state_dir_of(settings: Settings, index: int) -> Path:
    """Ingest process ``index``'s state directory: process 0 keeps ``EDDY_STATE_DIR``
    itself (one process is laid out as a worker always was), the others a folder
    of their own in it. Each keeps its own, so a restarted process finds its
    partitions' state and the group's assignor gives them back to it."""
    return settings.state_dir if index == 0 else settings.state_dir / f"process-{index}"


@dataclass
class Child:
    """One ingest process slot: its process (restarted in place) and its reports."""

    index: int
    report: ReportFile
    metrics_path: Path
    process: asyncio.subprocess.Process | None = None
    started_at: float = 0.0
    restarts: int = 0
    stopped: bool = False  # exited 0: asked to stop
    _quick_deaths: int = field(default=0, repr=False)

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.returncode is None

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid


class Supervisor:
    """Starts ``count`` ingest processes and keeps them running (module docstring)."""

    def __init__(self, settings: Settings, count: int, endpoint: str, status_dir: Path) -> None:
        self.settings = settings
        self.endpoint = endpoint
        self.status_dir = status_dir
        status_dir.mkdir(parents=True, exist_ok=True)
        for stale in status_dir.iterdir():  # a previous run's reports
            stale.unlink()
        self.children = [
            Child(i, ReportFile(status_dir / f"{i}.json"), status_dir / f"{i}.prom")
            for i in range(count)
        ]
        self._stopping = False
        self._watchers: list[asyncio.Task[None]] = []
        self._failed: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    def running(self) -> list[Child]:
        return [c for c in self.children if c.running]

    async def start(self) -> None:
        for child in self.children:
            await self._spawn(child)
            self._watchers.append(
                asyncio.create_task(self._watch(child), name=f"ingest-{child.index}")
            )

    async def wait(self) -> int:
        """The exit code once every process stopped (0), or one failed (its code)."""
        return await self._failed

    async def stop(self) -> None:
        """SIGTERM every process (they commit and leave their groups); SIGKILL what
        is still running after the timeout."""
        self._stopping = True
        for child in self.running():
            with contextlib.suppress(ProcessLookupError):
                child.process.send_signal(signal.SIGTERM)  # type: ignore[union-attr]
        deadline = time.monotonic() + self.settings.stop_timeout_ms / 1000 + STOP_MARGIN_S
        for child in self.children:
            if child.process is None:
                continue
            try:
                await asyncio.wait_for(child.process.wait(), max(0.1, deadline - time.monotonic()))
            except TimeoutError:
                log.warning("ingest process %d did not stop in time; killing it", child.index)
                child.process.kill()
                await child.process.wait()
        for watcher in self._watchers:
            watcher.cancel()

    async def _spawn(self, child: Child) -> None:
        env = {
            **os.environ,
            **self.settings.to_env(),
            "EDDY_WORKER_ID": f"{self.settings.worker_id}-p{child.index}",
            "EDDY_STATE_DIR": str(state_dir_of(self.settings, child.index)),
            # Private: the query plane is this worker's API; the groups learn its
            # address, so peers forward queries to it, never to an ingest process.
            "EDDY_API_HOST": "127.0.0.1",
            "EDDY_API_PORT": "0",
            "EDDY_API_ADVERTISED_URL": self.endpoint,
        }
        argv = [sys.executable, "-m", "eddy.plane.ingest", "--index", str(child.index)]
        argv += ["--status-dir", str(self.status_dir), "--parent-pid", str(os.getpid())]
        child.process = await asyncio.create_subprocess_exec(*argv, env=env)
        child.started_at = time.monotonic()
        log.info("ingest process %d started (pid %d)", child.index, child.process.pid)

    async def _watch(self, child: Child) -> None:
        while True:
            assert child.process is not None
            code = await child.process.wait()
            # Its partitions are no longer served here, whatever its report says.
            child.report.forget()
            child.metrics_path.unlink(missing_ok=True)
            if self._stopping:
                return
            if code == 0:
                child.stopped = True
                log.info("ingest process %d stopped", child.index)
                if all(c.stopped for c in self.children) and not self._failed.done():
                    self._failed.set_result(0)
                return
            if code > 0:
                log.error("ingest process %d failed (exit code %d): stopping", child.index, code)
                if not self._failed.done():
                    self._failed.set_result(code)
                return
            alone = not any(c.running for c in self.children if c is not child)
            delay_s = self._restart_delay(child, self.settings.session_timeout_ms / 1000, alone)
            log.warning(
                "ingest process %d (pid %d) was killed by signal %d (%s); %s, and it starts "
                "again in %.0f s",
                child.index,
                child.process.pid,
                -code,
                _signal_name(-code),
                "its partitions wait for it" if alone else "its partitions move to the others",
                delay_s,
            )
            await asyncio.sleep(delay_s)
            if self._stopping:
                return
            child.restarts += 1
            await self._spawn(child)

    @staticmethod
    def _restart_delay(child: Child, session_s: float, alone: bool = False) -> float:
        if time.monotonic() - child.started_at >= STEADY_S:
            child._quick_deaths = 0
        child._quick_deaths += 1
        first_s = ALONE_FIRST_S if alone else session_s * RESTART_AFTER_SESSIONS
        return min(MAX_DELAY_S, first_s * 2.0 ** (child._quick_deaths - 1))


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return "unknown signal"
