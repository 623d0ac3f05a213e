"""PostgreSQL for the ``postgres_sink`` pipeline: a local server and the sink's schema.

Public API of the local server (synchronous and blocking, like
:mod:`tools.localkafka`; from async code call it through ``asyncio.to_thread``):

- :func:`ensure_running` starts the server on 127.0.0.1:5433 unless one answers.
- :func:`stop`, :func:`status`, :func:`dsn`.

The sink's tables come from :mod:`eddy.pipeline.pgmigrate`. Progress goes to
a :class:`rich.console.Console` (stderr unless one is passed).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from rich.console import Console

from tools.localkafka.broker import locked
from tools.postgres import server
from tools.postgres.server import DSN, HOST, PORT, LocalPostgresError

__all__ = ["LocalPostgresError", "ServerStatus", "dsn", "ensure_running", "status", "stop"]


def _say(console: Console, message: str) -> None:
    console.print(message, markup=False, highlight=False, soft_wrap=True)


def dsn() -> str:
    """The local server's DSN: ``postgresql://eddy@127.0.0.1:5433/eddy``."""
    return DSN


def _configured_elsewhere() -> str | None:
    """EDDY_POSTGRES_DSN when it names a server other than the local one."""
    configured = os.environ.get("EDDY_POSTGRES_DSN")
    if not configured:
        return None
    try:
        parts = urlsplit(configured)
        local = parts.hostname in {HOST, "localhost"} and (parts.port or 5432) == PORT
    except ValueError:
        local = False
    return None if local else (parts.hostname or "another server")


def ensure_running(console: Console | None = None) -> bool:
    """Start the local server unless a server is already there to use.

    Returns:
        True only if this call started the server (so the caller may stop it).

    Raises:
        LocalPostgresError: binaries missing, initdb or start failed (the message
            quotes the server's log).
    """
    console = console or Console(stderr=True)
    if (elsewhere := _configured_elsewhere()) is not None:
        _say(console, f"Local PostgreSQL skipped: EDDY_POSTGRES_DSN points at {elsewhere}")
        return False
    lay = server.layout()
    bins = server.bin_dir()
    with locked(lay.home):
        if (pid := server.running_pid(lay)) is not None:
            _say(console, f"PostgreSQL already running on {HOST}:{PORT} (pid {pid})")
            return False
        if server.port_in_use():
            if server.accepts_connections(bins):
                _say(
                    console, f"Using the existing PostgreSQL on {HOST}:{PORT} (not started by eddy)"
                )
                return False
            raise LocalPostgresError(
                f"port {PORT} on {HOST} is taken by a process that is not PostgreSQL (find it "
                f"with `ss -ltnp | grep {PORT}`); stop it, or set EDDY_POSTGRES_DSN"
            )
        server.prepare_dirs(lay)
        major = server.major_version(bins)
        written_by = server.initialised(lay)
        if written_by is None:
            _say(console, f"Initialising PostgreSQL {major} in {lay.data}")
            server.init_unlocked(lay, bins)
        elif written_by != major:
            raise LocalPostgresError(
                f"{lay.data} was written by PostgreSQL {written_by} but this machine has "
                f"{major}: delete it (make clean) to start afresh"
            )
        started = time.monotonic()
        with console.status(f"Starting PostgreSQL {major}…"):
            pid = server.start_unlocked(lay, bins)
        _say(
            console,
            f"PostgreSQL {major} ready on {HOST}:{PORT} in {time.monotonic() - started:.1f} s "
            f"(pid {pid}; data {lay.data}; log {lay.log}; {DSN})",
        )
        return True


def stop(console: Console | None = None) -> bool:
    """Stop our server (fast shutdown). False if it was not running (never an error)."""
    console = console or Console(stderr=True)
    lay = server.layout()
    if server.running_pid(lay) is None:
        _say(console, "PostgreSQL is not running")
        return False
    with locked(lay.home), console.status("Stopping PostgreSQL…"):
        pid = server.stop_unlocked(lay, server.bin_dir())
    _say(console, f"PostgreSQL stopped (pid {pid})")
    return pid is not None


@dataclass(frozen=True)
class ServerStatus:
    running: bool
    ready: bool
    pid: int | None
    dsn: str
    data_dir: Path
    log: Path
    external: bool  # another server, not eddy's, answers on port 5433


def status() -> ServerStatus:
    """What ``python -m tools postgres status`` reports."""
    lay = server.layout()
    pid = server.running_pid(lay)
    try:
        ready = server.port_in_use() and server.accepts_connections(server.bin_dir())
    except LocalPostgresError:  # no binaries: nothing of ours can be running
        ready = False
    return ServerStatus(pid is not None, ready, pid, DSN, lay.data, lay.log, ready and pid is None)
