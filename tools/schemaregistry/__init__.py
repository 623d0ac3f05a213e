"""A real schema registry for tests and ``make run``: Apicurio Registry, which
serves Confluent Schema Registry's API under ``/apis/ccompat/v7``.

Public API (synchronous and blocking, like :mod:`tools.localkafka`):

- :func:`fetch` builds it from Maven Central into ``$EDDY_HOME/schema-registry``
  (once; :mod:`tools.schemaregistry.build` says how);
- :func:`ensure_running` starts it on 127.0.0.1:8081 unless a registry answers there;
- :func:`stop`, :func:`status`, :func:`url`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from tools.localkafka.broker import locked
from tools.schemaregistry import build, server
from tools.schemaregistry.build import RegistryBuildError, fetch
from tools.schemaregistry.server import URL, LocalRegistryError

__all__ = [
    "LocalRegistryError",
    "RegistryBuildError",
    "RegistryStatus",
    "ensure_running",
    "fetch",
    "status",
    "stop",
    "url",
]


def _say(console: Console, message: str) -> None:
    console.print(message, markup=False, highlight=False, soft_wrap=True)


def url() -> str:
    """What ``EDDY_SCHEMA_REGISTRY_URL`` is set to for the local registry."""
    return URL


def ensure_running(console: Console | None = None) -> bool:
    """Build (first time) and start the local registry unless one answers.

    Returns:
        True only if this call started it (so the caller may stop it).
    """
    console = console or Console(stderr=True)
    lay = server.layout()
    with locked(lay.home):
        if (pid := server.running_pid(lay)) is not None and server.answers():
            _say(console, f"Schema registry already running at {URL} (pid {pid})")
            return False
        if server.answers():
            _say(console, f"Using the schema registry that answers at {URL} (not started here)")
            return False
        started = time.monotonic()
        with console.status(f"Building Apicurio Registry {build.VERSION} (first time only)…"):
            jar = fetch()
        built = time.monotonic()
        with console.status("Starting the schema registry…"):
            pid = server.start_unlocked(lay, jar)
        _say(
            console,
            f"Schema registry (Apicurio {build.VERSION}) ready at {URL} in "
            f"{time.monotonic() - built:.1f} s (build/fetch {built - started:.1f} s; pid {pid}; "
            f"log {lay.log})",
        )
        return True


def stop(console: Console | None = None) -> bool:
    """Stop our registry. False if it was not running (never an error)."""
    console = console or Console(stderr=True)
    lay = server.layout()
    with locked(lay.home):
        pid = server.stop_unlocked(lay)
    _say(
        console,
        "Schema registry is not running" if pid is None else f"Schema registry stopped (pid {pid})",
    )
    return pid is not None


@dataclass(frozen=True)
class RegistryStatus:
    running: bool
    answers: bool
    pid: int | None
    url: str
    log: Path


def status() -> RegistryStatus:
    lay = server.layout()
    pid = server.running_pid(lay)
    return RegistryStatus(pid is not None, server.answers(), pid, URL, lay.log)
