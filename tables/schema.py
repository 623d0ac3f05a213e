"""Schema versions of state, and migrations of stored values between them.

A pipeline declares each state it keeps by its stable name (the table name) with
the version of its value format. A savepoint records the versions it was written
with; resuming under newer code migrates each value up to the declared version,
or refuses with a message when the code gives no way to (docs/savepoints.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

# (version the value was written in, raw value) -> raw value in the current version
Migrate = Callable[[int, bytes], bytes]


@dataclass(frozen=True)
class StateSchema:
    """One state's value format: its version, and how to read older versions."""

    version: int = 1
    migrate: Migrate | None = None
    # Oldest version ``migrate`` accepts; older savepoints are refused.
    migrates_from: int = field(default=1)

    def __post_init__(self) -> None:
        if self.version < 1 or not 1 <= self.migrates_from <= self.version:
            raise ValueError("versions start at 1, and migrates_from <= version")


def json_migration(steps: Mapping[int, Callable[[Any], Any]]) -> Migrate:
    """A :data:`Migrate` for JSON values: ``steps[v]`` turns a version ``v`` value
    into a version ``v + 1`` value; a value is taken through each step in turn."""

    def migrate(from_version: int, raw: bytes) -> bytes:
        value = orjson.loads(raw)
        version = from_version
        while version in steps:
            value = steps[version](value)
            version += 1
        return orjson.dumps(value)

    return migrate


def json_schema(version: int, steps: Mapping[int, Callable[[Any], Any]]) -> StateSchema:
    """A JSON state at ``version``, readable from the oldest version ``steps`` covers."""
    if set(steps) != set(range(min(steps, default=version), version)):
        raise ValueError(f"steps must cover every version from the oldest up to {version}")
    return StateSchema(version, json_migration(steps), min(steps, default=version))


def schema_for(declared: Mapping[str, StateSchema], table: str) -> StateSchema | None:
    """The declared schema of ``table``: by its name, or by a ``prefix.*`` pattern
    (``state.*``: any state; ``state.broadcast.*``: any broadcast state)."""
    schema = declared.get(table)
    if schema is not None:
        return schema
    patterns = sorted((k for k in declared if k.endswith(".*")), key=len, reverse=True)
    for pattern in patterns:
        if table.startswith(pattern[:-1]):
            return declared[pattern]
    return None
