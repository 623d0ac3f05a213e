"""Worker processes and the local broker, as the fault injector drives them.

Each worker is ``python -m eddy worker`` with the run's settings
(``Settings.to_env()``: ``EDDY_AGENTS`` names the agents it runs), its agents'
settings, and its own ``EDDY_WORKER_ID``, ``EDDY_STATE_DIR`` and
``EDDY_API_PORT``: separate machines sharing one application id and its topics.
A slot (``w0``, ``x1``...) is a machine: restarting it keeps its state directory
(unless a fault wipes it) and starts a new incarnation with a log file of its own.

Given a :class:`Placement` (the fleet harness), each slot is a host of its own: the
worker runs inside that host's network namespace, binds its API to the host's
address on port 8000 and advertises ``http://<address>:8000``, as a StatefulSet
pod does; a slot restarted after a readdress comes back under its new address.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx

from eddy.settings import ENV_PREFIX, OTHER_VARIABLES, Settings

# A broker restart recovers every partition first: minutes on a loaded machine.
READY_TIMEOUT_S = 300.0
FLEET_API_PORT = 8000


class Placement(Protocol):
    """Where a slot's worker runs: its network namespace and its API's address."""

    def place(self, slot: str) -> tuple[str, str]: ...


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class WorkerProc:
    slot: str
    incarnation: int
    extra: bool
    process: subprocess.Popen[bytes]
    port: int
    log_path: Path
    spawned_at: float
    expected_exit: bool = False  # the harness signalled it; an exit is not a crash
    stopped: bool = False  # SIGSTOPped right now
    host: str = "127.0.0.1"  # its API's address (a fleet: its own)

    @property
    def name(self) -> str:
        return f"{self.slot}-{self.incarnation}"

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def alive(self) -> bool:
        return self.process.poll() is None


@dataclass
class Crash:
    worker: str
    exit_code: int | None
    at_s: float
    log_path: str
    excerpt: list[str] = field(default_factory=list)


class Cluster:
    """The run's workers: spawn, signal, wait for readiness, query.

    Args:
        stages: the names of the stages each worker runs (what ``/status`` lists).
        agent_env: the agents' settings as variables (the harness's environment is
            not passed on: every ``EDDY_`` variable a worker sees is set here).
    """

    def __init__(
        self,
        settings: Settings,
        run_dir: Path,
        stages: Sequence[str],
        agent_env: Mapping[str, str] | None = None,
        placement: Placement | None = None,
    ) -> None:
        self.settings = settings
        self.placement = placement
        self.stages = tuple(stages)
        self.agent_env = dict(agent_env or {})
        self.run_dir = run_dir
        self.workers: dict[str, WorkerProc] = {}  # slot -> current incarnation
        self.crashes: list[Crash] = []
        self.started = time.monotonic()
        self._incarnations: dict[str, int] = {}
        self._extras = 0
        self.closing = False  # set by stop_all: nothing may be (re)started any more
        self.http = httpx.AsyncClient(timeout=5.0)
        (run_dir / "logs").mkdir(parents=True, exist_ok=True)

    # -- processes -------------------------------------------------------------------

    def state_dir(self, slot: str) -> Path:
        return self.run_dir / "state" / slot

    def spawn(self, slot: str | None = None, extra: bool = False) -> WorkerProc:
        if self.closing:
            raise WorkerDown("the cluster is shutting down")
        if slot is None:
            slot = f"x{self._extras}"
            self._extras += 1
            extra = True
        incarnation = self._incarnations.get(slot, 0) + 1
        self._incarnations[slot] = incarnation
        argv = [sys.executable, "-m", "eddy", "worker"]
        host, port = "127.0.0.1", 0
        if self.placement is not None:
            netns, host = self.placement.place(slot)
            argv, port = ["ip", "netns", "exec", netns, *argv], FLEET_API_PORT
        else:
            port = free_port()
        log_path = self.run_dir / "logs" / f"{slot}-{incarnation}.log"
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(ENV_PREFIX) or k in OTHER_VARIABLES
        }
        env.update(self.agent_env)
        env.update(self.settings.to_env())
        env.update(
            EDDY_WORKER_ID=f"{slot}-{incarnation}",
            EDDY_STATE_DIR=str(self.state_dir(slot)),
            EDDY_API_PORT=str(port),
            # One ingest process per worker: a fault hits one group member.
            EDDY_WORKER_PROCESSES="1",
        )
        if self.placement is not None:
            env.update(EDDY_API_HOST=host, EDDY_API_ADVERTISED_URL=f"http://{host}:{port}")
        with log_path.open("ab") as log:
            process = subprocess.Popen(
                argv,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                # Its own process group: a signal reaches the query process and its
                # ingest process together (SIGSTOP must freeze the ingest).
                start_new_session=True,
            )
        worker = WorkerProc(
            slot, incarnation, extra, process, port, log_path, time.monotonic(), host=host
        )
        self.workers[slot] = worker
        return worker

    def alive(self) -> list[WorkerProc]:
        """Running workers (SIGSTOPped ones included), base slots first."""
        running = [w for w in self.workers.values() if w.alive() and not w.expected_exit]
        return sorted(running, key=lambda w: (w.extra, w.slot))

    def extras(self) -> list[WorkerProc]:
        return [w for w in self.alive() if w.extra]

    def signal(self, worker: WorkerProc, sig: signal.Signals) -> None:
        if sig in (signal.SIGKILL, signal.SIGTERM):
            worker.expected_exit = True
        if sig is signal.SIGSTOP:
            worker.stopped = True
        elif sig is signal.SIGCONT:
            worker.stopped = False
        with contextlib.suppress(ProcessLookupError):
            os.killpg(worker.process.pid, sig)

    async def wait_exit(self, worker: WorkerProc, timeout_s: float) -> int | None:
        """The exit code, or None if the worker is still running after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            code = worker.process.poll()
            if code is not None:
                return code
            await asyncio.sleep(0.05)
        return None

    async def kill(self, worker: WorkerProc) -> None:
        if worker.stopped:
            self.signal(worker, signal.SIGCONT)
        self.signal(worker, signal.SIGKILL)
        await self.wait_exit(worker, 30.0)

    def reap_crashes(self) -> list[WorkerProc]:
        """Workers that exited without the harness asking: recorded as crashes."""
        crashed = []
        for worker in list(self.workers.values()):
            code = worker.process.poll()
            if code is not None and not worker.expected_exit:
                worker.expected_exit = True
                self.crashes.append(
                    Crash(
                        worker.name,
                        code,
                        round(time.monotonic() - self.started, 1),
                        str(worker.log_path),
                        excerpt(worker.log_path),
                    )
                )
                crashed.append(worker)
        return crashed

    async def supervise(self, stop: asyncio.Event) -> None:
        """Restart crashed workers, as a process supervisor would; each crash stays
        recorded in :attr:`crashes` and fails the verdict."""
        while not stop.is_set():
            for worker in self.reap_crashes():
                if self.workers.get(worker.slot) is worker and not self.closing:
                    self.spawn(worker.slot, worker.extra)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.5)

    async def stop_all(self, timeout_s: float = 30.0) -> dict[str, int | None]:
        """SIGTERM every worker (SIGCONT first if stopped); SIGKILL what ignores it."""
        self.closing = True
        codes: dict[str, int | None] = {}
        running = [w for w in self.workers.values() if w.alive()]
        for worker in running:
            if worker.stopped:
                self.signal(worker, signal.SIGCONT)
            self.signal(worker, signal.SIGTERM)
        for worker in running:
            codes[worker.name] = await self.wait_exit(worker, timeout_s)
            if codes[worker.name] is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(worker.process.pid, signal.SIGKILL)
                worker.process.wait()
        return codes

    async def close(self) -> None:
        for worker in self.workers.values():
            if worker.alive():
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(worker.process.pid, signal.SIGCONT)
                    os.killpg(worker.process.pid, signal.SIGKILL)
                worker.process.wait()
        await self.http.aclose()

    # -- HTTP ----------------------------------------------------------------------------

    async def get(self, worker: WorkerProc, path: str, **params: Any) -> httpx.Response | None:
        try:
            return await self.http.get(f"{worker.base_url}{path}", params=params)
        except httpx.HTTPError:
            return None

    async def is_ready(self, worker: WorkerProc) -> bool:
        response = await self.get(worker, "/readyz")
        return response is not None and response.status_code == 200

    async def status(self, worker: WorkerProc) -> dict[str, Any] | None:
        response = await self.get(worker, "/status")
        if response is None or response.status_code != 200:
            return None
        body: dict[str, Any] = response.json()
        return body

    async def wait_ready(self, worker: WorkerProc, timeout_s: float = READY_TIMEOUT_S) -> float:
        """Seconds from the worker's spawn until ``/readyz`` answered 200.

        Raises:
            WorkerDown: it exited first, or was not ready within ``timeout_s``.
        """
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not worker.alive():
                raise WorkerDown(f"{worker.name} exited ({worker.process.returncode}) before ready")
            if await self.is_ready(worker):
                return time.monotonic() - worker.spawned_at
            await asyncio.sleep(0.1)
        raise WorkerDown(f"{worker.name} not ready after {timeout_s:.0f} s")

    async def wait_all_ready(self, timeout_s: float = READY_TIMEOUT_S) -> float:
        """Seconds until every alive worker answers ``/readyz`` 200 at the same time."""
        started = time.monotonic()
        while time.monotonic() - started < timeout_s:
            workers = self.alive()
            ready = await asyncio.gather(*(self.is_ready(w) for w in workers))
            if workers and all(ready):
                return time.monotonic() - started
            await asyncio.sleep(0.2)
        raise WorkerDown(f"workers not all ready after {timeout_s:.0f} s")

    async def wait_settled(self, timeout_s: float = READY_TIMEOUT_S) -> float:
        """Seconds until the group settled: every running worker ready and owning a
        share of each stage's partitions, each partition owned exactly once."""
        started = time.monotonic()
        while time.monotonic() - started < timeout_s:
            workers = [w for w in self.alive() if not w.stopped]
            statuses = await asyncio.gather(*(self.status(w) for w in workers))
            if workers and settled(statuses, self.settings.partitions):
                return time.monotonic() - started
            await asyncio.sleep(0.2)
        raise WorkerDown(f"the group did not settle within {timeout_s:.0f} s")


def settled(statuses: list[dict[str, Any] | None], partitions: int) -> bool:
    """Whether ``/status`` answers show a settled group (see :meth:`Cluster.wait_settled`)."""
    owned: dict[str, list[int]] = {}
    for status in statuses:
        if status is None:
            return False
        for name, stage in status["stages"].items():
            if not stage["ready"] or stage["restoring"]:
                return False
            if not stage["partitions"] and len(statuses) <= partitions:
                return False
            owned.setdefault(name, []).extend(stage["partitions"])
    return bool(owned) and all(sorted(p) == list(range(partitions)) for p in owned.values())


class WorkerDown(Exception):
    """A worker died or stayed unready where the harness needed it ready."""


def excerpt(log_path: Path, tail: int = 25, notable: int = 25) -> list[str]:
    """The log lines that say what went wrong: warnings/errors, then the last lines."""
    try:
        lines = log_path.read_text(errors="replace").splitlines()
    except OSError:
        return []
    flagged = [
        line
        for line in lines
        if any(word in line for word in (" WARNING ", " ERROR ", "Traceback", "Error:"))
    ]
    last = lines[-tail:]
    head = [line for line in flagged[-notable:] if line not in last]
    return [*head, "...", *last] if head else last
