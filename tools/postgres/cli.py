"""``python -m tools postgres start|stop|status|migrate`` (``make postgres-*``)."""

from __future__ import annotations

import argparse
import asyncio
import os

from rich.console import Console

from service.cli_parser import print_json
from tools import postgres


def run(args: argparse.Namespace) -> int:
    """Exit codes: 0 done (start/stop are no-ops when nothing is to do); status
    returns 1 when eddy's server is not running, so scripts can test it."""
    console = Console()
    action: str = args.action
    if action == "start":
        postgres.ensure_running(console=console)
    elif action == "stop":
        postgres.stop(console=console)
    elif action == "status":
        return _status(console, as_json=getattr(args, "json", False))
    elif action == "migrate":
        _migrate(console)
    else:  # argparse's subcommands make this unreachable from the command line
        raise ValueError(f"unknown postgres action {action!r}")
    return 0


def _migrate(console: Console) -> None:
    """EDDY_POSTGRES_DSN's server (the local one if unset), EDDY_POSTGRES_SCHEMA."""
    import asyncpg

    from agents.postgres_sink import SENSOR_SINK
    from service.pipeline.pgmigrate import MigrationError, migrate_dsn

    secret = os.environ.get("EDDY_POSTGRES_DSN")
    schema = os.environ.get("EDDY_POSTGRES_SCHEMA", "eddy")
    dsn = secret or postgres.dsn()
    try:
        applied = asyncio.run(migrate_dsn(dsn, schema, SENSOR_SINK))
    except (OSError, TimeoutError, asyncpg.PostgresError) as exc:
        where = "EDDY_POSTGRES_DSN" if secret is not None else f"{dsn} (make postgres-start)"
        raise MigrationError(f"could not migrate through {where}: {exc}") from None
    latest = max(m.version for m in SENSOR_SINK)
    done = ", ".join(f"{m.version} ({m.name})" for m in applied) or "none, already up to date"
    console.print(
        f"schema {schema} at version {latest}; applied: {done}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


def _status(console: Console, *, as_json: bool = False) -> int:
    state = postgres.status()
    if as_json:
        print_json(
            {
                "running": state.running,
                "ready": state.ready,
                "external": state.external,
                "pid": state.pid,
                "dsn": state.dsn,
                "data_dir": str(state.data_dir),
                "log": str(state.log),
            }
        )
        return 0 if state.running else 1
    if state.running:
        headline = "running" + ("" if state.ready else " (not accepting connections yet)")
    elif state.external:
        headline = "not running (another PostgreSQL, not eddy's, answers on the port)"
    else:
        headline = "not running"
    rows = [
        ("PostgreSQL", headline),
        ("pid", str(state.pid) if state.pid else "-"),
        ("dsn", state.dsn),
        ("data dir", str(state.data_dir)),
        ("log", str(state.log)),
    ]
    for name, value in rows:
        console.print(f"{name:<10} {value}", markup=False, highlight=False, soft_wrap=True)
    return 0 if state.running else 1
