"""Running the built registry as a child process that outlives the command.

One registry per ``EDDY_HOME``: its pid in ``$EDDY_HOME/schema-registry/registry.pid``,
its log beside it. It keeps schemas in memory (Apicurio's default H2 database),
so a restart forgets them, as a test registry should.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from eddy.errors import EddyError
from eddy.paths import eddy_home

HOST = "127.0.0.1"
PORT = 8081  # Confluent Schema Registry's port, so clients' defaults find it
CCOMPAT_PATH = "/apis/ccompat/v7"
URL = f"http://{HOST}:{PORT}{CCOMPAT_PATH}"
READY_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0


class LocalRegistryError(EddyError):
    """The local schema registry did not start: the message names its log."""


@dataclass(frozen=True)
class Layout:
    home: Path
    pid_file: Path
    log: Path

    @classmethod
    def at(cls, home: Path) -> Layout:
        return cls(home, home / "registry.pid", home / "registry.log")


def layout() -> Layout:
    return Layout.at(eddy_home() / "schema-registry")


def answers(url: str = URL, timeout_s: float = 2.0) -> bool:
    """Whether a registry's Confluent-compatible API answers at ``url``."""
    try:
        return httpx.get(f"{url}/subjects", timeout=timeout_s).status_code == 200
    except httpx.HTTPError:
        return False


def running_pid(lay: Layout) -> int | None:
    """Our registry's pid, if that process is alive and is a java (a stale pid
    file after a reboot may name some other process)."""
    try:
        pid = int(lay.pid_file.read_text().strip())
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return None
    return pid if b"schema-registry" in command else None


def java() -> str:
    found = shutil.which("java")
    if found is None:
        raise LocalRegistryError("java is not on PATH: install a Java 11+ runtime")
    return found


def start_unlocked(lay: Layout, jar: Path) -> int:
    """Start the registry and wait until its API answers; its pid."""
    lay.home.mkdir(parents=True, exist_ok=True)
    command = [
        java(),
        f"-Dquarkus.http.host={HOST}",
        f"-Dquarkus.http.port={PORT}",
        "-Xmx512m",
        "-jar",
        str(jar),
    ]
    with lay.log.open("ab") as log:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C in a terminal must not reach the registry
        )
    lay.pid_file.write_text(f"{process.pid}\n")
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not answers():
        if process.poll() is not None or time.monotonic() > deadline:
            _kill(process.pid)
            lay.pid_file.unlink(missing_ok=True)
            tail = "\n".join(lay.log.read_text(errors="replace").splitlines()[-15:])
            raise LocalRegistryError(
                f"the schema registry did not answer on {URL} within {READY_TIMEOUT_S:.0f} s "
                f"(exit {process.poll()}); its log is {lay.log}; last lines:\n{tail}"
            )
        time.sleep(0.25)
    return process.pid


def stop_unlocked(lay: Layout) -> int | None:
    """SIGTERM (Quarkus shuts down cleanly), SIGKILL after STOP_TIMEOUT_S."""
    pid = running_pid(lay)
    if pid is None:
        lay.pid_file.unlink(missing_ok=True)
        return None
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while running_pid(lay) is not None and time.monotonic() < deadline:
        time.sleep(0.2)
    if running_pid(lay) is not None:
        _kill(pid)
    lay.pid_file.unlink(missing_ok=True)
    return pid


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:  # it died on its own first
        return
