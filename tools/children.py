"""The processes ``make run`` starts (worker, room service, simulator): started so
that they never outlive the launcher, stopped politely or by force.

Every child runs in a session of its own, so a Ctrl-C in the terminal reaches only
the launcher, which then stops them in order. On Linux each child also asks the
kernel, before it runs anything, to be sent SIGKILL when the launcher dies
(``prctl(PR_SET_PDEATHSIG)``): a launcher killed with ``kill -9`` or by the OOM
killer then leaves no worker holding port 8000 and its partitions. A parent-pid
watch would need code in every child and a polling interval during which the
orphan still runs; the kernel's notice needs neither. SIGKILL, not SIGTERM: no
one is left to escalate if a child hangs while stopping, and the worker's state
is built to survive a kill (its transactions abort, its RocksDB has a log).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>

STOP_TIMEOUT_S = 30.0


def _die_with_parent() -> Callable[[], None] | None:
    """The ``preexec_fn`` that ties a child to this process, or None off Linux.

    libc is loaded here, in the parent: between fork and exec the child runs only
    the prctl call and a getppid, nothing that allocates or takes a lock."""
    if sys.platform != "linux":
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    parent_pid = os.getpid()

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent_pid:  # the launcher died before the request took effect
            os._exit(1)

    return preexec


@dataclass
class Child:
    name: str
    process: subprocess.Popen[bytes]
    log: IO[bytes]
    log_path: Path

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> bool:
        """SIGTERM (the worker commits and leaves its groups), SIGKILL after
        ``timeout_s``; True if it had to be killed."""
        killed = False
        if self.running:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                killed = True
                self.kill()
                self.process.wait()
        self.log.close()
        return killed

    def kill(self) -> None:
        """SIGKILL to the child's whole session (the worker's ingest processes too),
        unless it has ended. Returns at once: :meth:`stop` reaps it."""
        if self.running:  # once reaped, its pid may name someone else's group
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)


def spawn(name: str, args: list[str], log_dir: Path, env: dict[str, str] | None = None) -> Child:
    """``python -m <args>``, its output in ``<log_dir>/<name>.log``.

    Call it from the main thread: the kernel sends the death signal when the
    *thread* that forked the child ends, and only the main thread lives as long
    as the launcher (a worker thread of ``asyncio.to_thread`` may end any time).
    """
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{name}.log"
    log = log_path.open("ab")
    process = subprocess.Popen(
        [sys.executable, "-m", *args],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=_die_with_parent(),
        env={**os.environ, **(env or {})},
    )
    return Child(name, process, log, log_path)
