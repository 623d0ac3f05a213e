"""The application under test as processes the run bounces: Eddy workers, or
Kafka Streams' own ``EosTestClient`` (the positive control).

On a fleet (a :class:`~tools.chaos.cluster.Placement`) each slot runs inside its
host's network namespace, as a pod of its own.

Both answer the same four calls: start a slot, kill it hard (SIGKILL), stop it
cleanly (SIGTERM, waiting for it to commit and leave the group), stop all.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from pathlib import Path
from typing import Protocol

from eddy.settings import Settings
from tools.chaos.cluster import Cluster, Placement, WorkerProc
from tools.kafkaeos import jars

CLEAN_STOP_TIMEOUT_S = 30.0  # Kubernetes' default grace period
STREAMS_RUNNING_TIMEOUT_S = 180.0  # a JVM start and a rebalance, on a loaded machine
RUNNING = "-> RUNNING"  # EosTestClient prints its state changes: "StateChange: A -> B"


class AppUnderTest(Protocol):
    async def start(self, slot: str) -> None: ...
    async def hard_kill(self, slot: str) -> None: ...
    async def clean_stop(self, slot: str) -> None: ...
    async def stop_all(self) -> None: ...
    def crashes(self) -> list[str]: ...


class EddyWorkers:
    """``python -m eddy worker --app tools.kafkaeos.app:app``, one per slot."""

    def __init__(
        self, settings: Settings, run_dir: Path, repo: Path, placement: Placement | None = None
    ) -> None:
        # The worker imports the app from this checkout, wherever it is started.
        self.cluster = Cluster(
            settings,
            run_dir,
            ("eos", "eos_repartitioned"),
            {"PYTHONPATH": str(repo)},
            placement=placement,
        )

    def _worker(self, slot: str) -> WorkerProc:
        return self.cluster.workers[slot]

    async def start(self, slot: str) -> None:
        await self.cluster.wait_ready(self.cluster.spawn(slot))

    async def hard_kill(self, slot: str) -> None:
        await self.cluster.kill(self._worker(slot))

    async def clean_stop(self, slot: str) -> None:
        worker = self._worker(slot)
        self.cluster.signal(worker, signal.SIGTERM)
        if await self.cluster.wait_exit(worker, CLEAN_STOP_TIMEOUT_S) is None:
            raise TimeoutError(f"{worker.name} did not stop within {CLEAN_STOP_TIMEOUT_S:.0f} s")

    async def stop_all(self) -> None:
        await self.cluster.stop_all(CLEAN_STOP_TIMEOUT_S)
        await self.cluster.close()

    def crashes(self) -> list[str]:
        self.cluster.reap_crashes()
        return [f"{c.worker} exited {c.exit_code} ({c.log_path})" for c in self.cluster.crashes]


class StreamsClients:
    """``StreamsEosTest process-complex``: Kafka Streams, exactly-once v2."""

    def __init__(
        self, lib: Path, properties: Path, run_dir: Path, placement: Placement | None = None
    ) -> None:
        self.lib, self.properties = lib, properties
        self.placement = placement
        # Added to each client's properties (Kafka Streams hands them to its clients).
        self.client_properties: dict[str, str] = {}
        self.logs = run_dir / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self._incarnations: dict[str, int] = {}
        self._expected: set[int] = set()

    async def start(self, slot: str) -> None:
        n = self._incarnations[slot] = self._incarnations.get(slot, 0) + 1
        # Its own state.dir, as on a machine of its own: instances sharing one would
        # share Kafka Streams' process id and lock each other's task directories.
        props = self.properties.with_name(f"streams-{slot}.properties")
        state = self.properties.parent / "streams-state" / slot
        extra = "".join(f"{key}={value}\n" for key, value in self.client_properties.items())
        props.write_text(f"{self.properties.read_text()}state.dir={state}\n{extra}")
        command = jars.command(self.lib, props, "process-complex")
        if self.placement is not None:  # `ip netns exec` execs java: the pid is java's
            netns, _ = self.placement.place(slot)
            command = ["ip", "netns", "exec", netns, *command]
        log_path = self.logs / f"{slot}-{n}.log"
        self.procs[slot] = spawn(command, log_path)
        await self._wait_running(slot, log_path)

    async def _wait_running(self, slot: str, log_path: Path) -> None:
        """Until the client printed its first change to RUNNING (it has no readiness
        probe): a bounce or a cut then hits an instance that processes, not one still
        starting its JVM or joining the group.

        Raises:
            TimeoutError: it exited first, or was not running within the timeout.
        """
        proc = self.procs[slot]
        deadline = time.monotonic() + STREAMS_RUNNING_TIMEOUT_S
        while time.monotonic() < deadline:
            if RUNNING in await asyncio.to_thread(log_path.read_text, errors="replace"):
                return
            if proc.poll() is not None:
                raise TimeoutError(f"Streams client {slot} exited {proc.returncode} ({log_path})")
            await asyncio.sleep(0.5)
        raise TimeoutError(
            f"Streams client {slot} not RUNNING within {STREAMS_RUNNING_TIMEOUT_S:.0f} s "
            f"({log_path})"
        )

    async def _signal(self, slot: str, sig: signal.Signals, timeout_s: float) -> None:
        proc = self.procs[slot]
        self._expected.add(proc.pid)
        proc.send_signal(sig)
        if await wait_exit(proc, timeout_s) is None:
            raise TimeoutError(f"Streams client {slot} did not stop within {timeout_s:.0f} s")

    async def hard_kill(self, slot: str) -> None:
        await self._signal(slot, signal.SIGKILL, 30.0)

    async def clean_stop(self, slot: str) -> None:
        await self._signal(slot, signal.SIGTERM, CLEAN_STOP_TIMEOUT_S)

    async def stop_all(self) -> None:
        for slot, proc in self.procs.items():
            if proc.poll() is None:
                await self.clean_stop(slot)

    def crashes(self) -> list[str]:
        return [
            f"Streams client pid {p.pid} exited {p.returncode}"
            for p in self.procs.values()
            if p.poll() is not None and p.pid not in self._expected
        ]


def spawn(command: list[str], log_path: Path) -> subprocess.Popen[bytes]:
    """Start ``command``, its output appended to ``log_path``."""
    with log_path.open("ab") as log:
        return subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
        )


async def wait_exit(proc: subprocess.Popen[bytes], timeout_s: float) -> int | None:
    """The exit code, or None if ``proc`` still runs after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        code = proc.poll()
        if code is not None:
            return code
        await asyncio.sleep(0.1)
    return None
