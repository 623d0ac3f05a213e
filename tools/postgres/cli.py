"""``python -m tools postgres start|stop|status|migrate`` (``make postgres-*``)."""

from __future__ import annotations

import argparse
import asyncio
import os

from rich.console import Console

from tools import postgres
from tools.server_cli import Headline, print_status, run_action

HEADLINE = Headline(
    not_ready="not accepting connections yet",
    other="not running (another PostgreSQL, not eddy's, answers on the port)",
)


def run(args: argparse.Namespace) -> int:
    """Exit codes: 0 done (start/stop are no-ops when nothing is to do); status
    returns 1 when eddy's server is not running, so scripts can test it."""
    return run_action("postgres", args, postgres, _status, {"migrate": _migrate})


def _migrate(console: Console) -> None:
    """EDDY_POSTGRES_DSN's server (the local one if unset), EDDY_POSTGRES_SCHEMA."""
    import asyncpg

    from eddy.examples.postgres_sink import SENSOR_SINK
    from eddy.pipeline.pgmigrate import MigrationError, migrate_dsn

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


def _status(console: Console, as_json: bool) -> int:
    state = postgres.status()
    fields: dict[str, object] = {
        "running": state.running,
        "ready": state.ready,
        "external": state.external,
        "pid": state.pid,
        "dsn": state.dsn,
        "data_dir": str(state.data_dir),
        "log": str(state.log),
    }
    rows = [
        ("PostgreSQL", HEADLINE.of(state.running, state.ready, state.external)),
        ("pid", str(state.pid) if state.pid else "-"),
        ("dsn", state.dsn),
        ("data dir", str(state.data_dir)),
        ("log", str(state.log)),
    ]
    return print_status(
        console, up=state.running, as_json=as_json, fields=fields, rows=rows, width=10
    )
