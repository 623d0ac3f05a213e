"""Avro with a schema registry (fastavro).

A record is read with the schema it was written with (its id's) resolved
against the topic's schema by Avro's rules: a field the writer lacks takes the
reader's default, a field the reader lacks is skipped, an int widens to a long.
A writer schema that cannot be resolved fails the record as a whole, with the
resolver's reason; it is never half-read. A writer schema that is recursive,
nested deeper than ``max_depth`` or has an array of items that take no bytes is
refused (:mod:`eddy.schemas.avro_checks` says why each is unsafe).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

import fastavro
import orjson
from fastavro.read import SchemaResolutionError

from eddy.errors import ConfigError
from eddy.schemas.avro_checks import DecimalTooLong, bounded_decimals, unsafe
from eddy.schemas.base import Binding, BoundSerde, SchemaSerde, encode_failure, plain
from eddy.schemas.registry import RegisteredSchema
from eddy.schemas.wire import split
from eddy.serde import DecodeError

bounded_decimals()


class Avro(SchemaSerde):
    """Avro values (or keys): ``Topic("readings", Reading, serde=Avro(SCHEMA))``.

    Args:
        schema: the Avro schema the agent reads records as (and writes with): a
            dict, or its JSON text (``'"string"'`` for a string key).
        subjects: subjects besides the topic's whose schemas records may be
            written with (e.g. ``("eddy.Reading",)`` under a record-name strategy).
    """

    schema_type: ClassVar[str] = "AVRO"

    def __init__(self, schema: Mapping[str, Any] | str, *, subjects: Iterable[str] = ()) -> None:
        # A str is the schema's JSON: a record's object, or a primitive's '"string"'.
        self.schema: Any = json.loads(schema) if isinstance(schema, str) else dict(schema)
        self.parsed = fastavro.parse_schema(self.schema)  # raises on an invalid schema, at import
        self.subjects = tuple(subjects)

    def bind(self, binding: Binding) -> BoundAvro:
        reason = unsafe(self.parsed, binding.limits.max_depth)
        if reason is not None:
            raise ConfigError(
                f"subject {binding.subject}: the Avro schema declared for it is refused: {reason}"
            )
        return BoundAvro(binding, self)


class BoundAvro(BoundSerde):
    schema_type: ClassVar[str] = "AVRO"

    def __init__(self, binding: Binding, declared: Avro) -> None:
        text = json.dumps(declared.schema, separators=(",", ":"))
        super().__init__(binding, text, declared.subjects)
        self.reader = declared.parsed
        self._max_bytes = binding.limits.max_record_bytes

    def decode(self, raw: bytes | None) -> Any:
        schema_id, payload = split(raw, self._max_bytes)
        # schema id -> (its parsed schema, the reader schema to resolve it against)
        writer = self._ready.get(schema_id)
        if writer is None:
            writer = self.ready(schema_id)
        buffer = io.BytesIO(payload)
        try:
            value = fastavro.schemaless_reader(buffer, *writer)
        except SchemaResolutionError as exc:
            raise DecodeError(
                f"schema id {schema_id} cannot be read as subject {self.binding.subject}'s "
                f"schema: {exc!s:.300}"
            ) from None
        except DecimalTooLong as exc:
            raise DecodeError(f"schema id {schema_id}: {exc}") from None
        except Exception as exc:  # fastavro raises EOFError, ValueError, IndexError... on bad bytes
            raise DecodeError(
                f"schema id {schema_id}: not an Avro record of that schema "
                f"(truncated or corrupt?): {exc!r:.300}"
            ) from None
        if buffer.tell() != len(payload):
            raise DecodeError(
                f"schema id {schema_id}: {len(payload) - buffer.tell()} bytes after the record "
                "(written with another schema than its id says?)"
            )
        return self.typed(value, schema_id)

    def prepare_writer(self, found: RegisteredSchema) -> tuple[Any, Any]:
        """The writer's schema and the reader schema to resolve it against: None
        when they are the same, as fastavro then skips resolution (a quarter of
        the decode's time)."""
        schema_id = found.schema_id
        try:
            # orjson: a schema nested past 1,024 levels is refused, not a RecursionError.
            writer = fastavro.parse_schema(orjson.loads(found.text))
        except Exception as exc:  # the registry holds a schema fastavro cannot parse
            raise DecodeError(
                f"schema id {schema_id} is not an Avro schema fastavro reads: {exc!r:.300}"
            ) from None
        reason = unsafe(writer, self.limits.max_depth)
        if reason is not None:
            raise DecodeError(f"schema id {schema_id} is refused: {reason}")
        same = fastavro.schema.to_parsing_canonical_form(
            writer
        ) == fastavro.schema.to_parsing_canonical_form(self.reader)
        return writer, None if same else self.reader

    def encode(self, value: Any) -> bytes:
        header = self.header()
        buffer = io.BytesIO()
        buffer.write(header)
        try:
            fastavro.schemaless_writer(buffer, self.reader, plain(value), strict=True)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise encode_failure(self.binding.subject, value, exc) from None
        return buffer.getvalue()
