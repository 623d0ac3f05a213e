"""A schema registry inside the process, for the test driver: an agent's unit
tests run its Avro, Protobuf and JSON Schema topics through the real serdes
without a server. It issues ids in registration order and checks no
compatibility rule: that is the real registry's job, tested against one."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace

from eddy.schemas.registry import RegisteredSchema


class MemoryRegistry:
    """The part of :class:`eddy.schemas.registry.SchemaRegistry` serdes use."""

    url = "memory:"

    def __init__(self) -> None:
        self._by_id: dict[int, RegisteredSchema] = {}
        self._subjects: dict[str, list[int]] = {}

    def schema(self, schema_id: int) -> RegisteredSchema | None:
        return self._by_id.get(schema_id)

    def known(self, schema_id: int) -> bool:
        return True  # every answer is at hand

    def forget(self, schema_id: int) -> None:
        """Nothing to forget: the answers are never out of date."""

    async def prefetch(self, schema_ids: Collection[int]) -> None:
        """Nothing to fetch."""

    def register(self, subject: str, text: str, schema_type: str) -> int:
        """The id of ``text`` (the same text has one id, in any subject), now a
        version of ``subject`` too."""
        versions = self._subjects.setdefault(subject, [])
        found = self.lookup(subject, text, schema_type)
        if found is not None:
            return found
        schema_id = next(
            (
                s.schema_id
                for s in self._by_id.values()
                if (s.text, s.schema_type) == (text, schema_type)
            ),
            len(self._by_id) + 1,
        )
        existing = self._by_id.get(schema_id, RegisteredSchema(schema_id, schema_type, text))
        self._by_id[schema_id] = replace(existing, subjects=existing.subjects | {subject})
        versions.append(schema_id)
        return schema_id

    def lookup(self, subject: str, text: str, schema_type: str) -> int | None:
        for schema_id in self._subjects.get(subject, []):
            if (self._by_id[schema_id].text, self._by_id[schema_id].schema_type) == (
                text,
                schema_type,
            ):
                return schema_id
        return None
