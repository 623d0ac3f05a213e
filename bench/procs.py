"""Contender processes and what they cost, read from /proc (Linux only).

CPU is the process tree's user + system time (``/proc/<pid>/stat``), so a
contender is charged for every thread it runs (librdkafka's, the JVM's) and for
child processes. Peak RSS is the kernel's high-water mark (``VmHWM``), summed over
the tree: no sampling can miss a short peak.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from bench.errors import BenchError

TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def _tree(pid: int) -> list[int]:
    pids = [pid]
    for p in pids:
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                children = Path(f"/proc/{p}/task/{task}/children").read_text().split()
                pids.extend(int(c) for c in children)
        except OSError:
            continue  # gone between listing and reading
    return pids


def cpu_ms(pid: int) -> int:
    """User + system CPU of ``pid`` and its live descendants, in milliseconds."""
    return sum(_ticks(p) for p in _tree(pid)) * 1_000 // TICKS_PER_S


def own_cpu_ms(pid: int) -> int:
    """User + system CPU of ``pid`` alone (not its children), in milliseconds."""
    return _ticks(pid) * 1_000 // TICKS_PER_S


def _ticks(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    # The command name may hold spaces: fields start after its closing ')'.
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[11]) + int(fields[12])  # utime, stime


def peak_rss_bytes(pid: int) -> int:
    total = 0
    for p in _tree(pid):
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total += int(line.split()[1]) * 1_024
        except OSError:
            continue
    return total


class Proc:
    """One contender process, its output in a log file."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.name = name
        self.log_path = log_path
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = log_path.open("ab")
        try:
            self.process = subprocess.Popen(
                list(argv),
                env=dict(env) if env is not None else None,
                cwd=cwd,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        except OSError as exc:
            self._log.close()
            raise BenchError(f"{name}: cannot start {argv[0]}: {exc}") from None

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def check_alive(self) -> None:
        if not self.alive():
            raise BenchError(
                f"{self.name} exited with {self.process.returncode}; last log lines:\n{self.tail()}"
            )

    def cpu_ms(self) -> int:
        return cpu_ms(self.pid)

    def peak_rss_bytes(self) -> int:
        return peak_rss_bytes(self.pid)

    def stop(self, timeout_s: float = 40.0) -> int:
        """SIGTERM (every contender commits and leaves its group on it), then SIGKILL."""
        if self.alive():
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
        return self.process.returncode

    def wait(self, timeout_s: float) -> int:
        try:
            code = self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.stop(5)
            raise BenchError(f"{self.name} did not finish in {timeout_s:.0f} s") from None
        self._log.close()
        return code

    def tail(self, lines: int = 15) -> str:
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])
