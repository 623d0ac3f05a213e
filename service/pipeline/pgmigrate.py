"""Schema migrations: an ordered list of SQL steps, each applied once per schema.

``<schema>.eddy_schema_migrations`` records the versions applied. Everything runs
in one transaction under a transaction-level advisory lock keyed by the schema,
so workers that start together apply each step exactly once: the others wait for
the lock, then find the versions recorded. A failed step rolls back with the rest.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from eddy.errors import EddyError


class MigrationError(EddyError):
    """The schema could not be migrated: the message names the server and the error."""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str  # ``{schema}`` stands for the quoted schema name


def quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def lock_key(schema: str) -> int:
    """A stable signed 64-bit advisory lock key for ``schema``'s migrations."""
    digest = hashlib.blake2b(f"eddy.migrations:{schema}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


async def migrate(connection: Any, schema: str, migrations: Sequence[Migration]) -> list[Migration]:
    """Create ``schema`` if needed and apply the migrations it lacks, in version order.

    Args:
        connection: an ``asyncpg.Connection`` (or a pool's proxy of one).

    Returns:
        The migrations this call applied (empty when the schema was up to date).
    """
    if len({m.version for m in migrations}) != len(migrations):
        raise ValueError("migration versions must be unique")
    quoted = quote(schema)
    applied: list[Migration] = []
    async with connection.transaction():
        # Waits for any other worker migrating this schema; released at commit.
        await connection.execute("SELECT pg_advisory_xact_lock($1)", lock_key(schema))
        await connection.execute(f"CREATE SCHEMA IF NOT EXISTS {quoted}")
        await connection.execute(
            f"CREATE TABLE IF NOT EXISTS {quoted}.eddy_schema_migrations "
            "(version int PRIMARY KEY, name text NOT NULL)"
        )
        rows = await connection.fetch(f"SELECT version FROM {quoted}.eddy_schema_migrations")
        done = {row["version"] for row in rows}
        for migration in sorted(migrations, key=lambda m: m.version):
            if migration.version in done:
                continue
            await connection.execute(migration.sql.format(schema=quoted))
            await connection.execute(
                f"INSERT INTO {quoted}.eddy_schema_migrations (version, name) VALUES ($1, $2)",
                migration.version,
                migration.name,
            )
            applied.append(migration)
    return applied


async def migrate_dsn(
    dsn: str, schema: str, migrations: Sequence[Migration], timeout_s: float = 10.0
) -> list[Migration]:
    """Connect to ``dsn`` and :func:`migrate` (``python -m tools postgres migrate``)."""
    import asyncpg  # only where PostgreSQL is used (pgsink.py)

    connection = await asyncpg.connect(dsn, timeout=timeout_s)
    try:
        return await migrate(connection, schema, migrations)
    finally:
        await connection.close()
