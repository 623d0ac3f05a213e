"""The session's PostgreSQL (the one `make test` started, or one started and stopped
here) and throwaway schemas in it. Import the fixtures into a test module."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import asyncpg
import pytest

from eddy.pipeline.pgmigrate import quote
from tools import postgres


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    started = postgres.ensure_running()
    yield os.environ.get("EDDY_POSTGRES_DSN") or postgres.dsn()
    if started:
        postgres.stop()


@pytest.fixture
async def fresh_schema(postgres_dsn: str) -> AsyncIterator[Callable[[], str]]:
    """Makes unused schema names; drops every schema made with them after the test."""
    made: list[str] = []

    def make() -> str:
        made.append(f"test_{uuid.uuid4().hex[:12]}")
        return made[-1]

    yield make
    connection = await asyncpg.connect(postgres_dsn)
    try:
        for schema in made:
            await connection.execute(f"DROP SCHEMA IF EXISTS {quote(schema)} CASCADE")
    finally:
        await connection.close()


async def rows_of(dsn: str, schema: str, table: str) -> list[tuple[Any, ...]]:
    """Every row of ``schema.table``, sorted, as plain tuples."""
    connection = await asyncpg.connect(dsn)
    try:
        records = await connection.fetch(f"SELECT * FROM {quote(schema)}.{quote(table)}")
    finally:
        await connection.close()
    return sorted(tuple(record.values()) for record in records)
