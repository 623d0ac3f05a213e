"""JSON Schema with a schema registry (the jsonschema library).

A record is validated against the schema it was written with (its id's), then
read as the agent's model: a field a newer writer added is ignored by the model
unless the model forbids extra fields, a field an older writer lacks takes the
model's default.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar

import orjson
from jsonschema import exceptions, validators
from pydantic import BaseModel

from service.schemas.base import Binding, BoundSerde, SchemaSerde, encode_failure, plain
from service.schemas.wire import split
from service.serde import DecodeError


class JsonSchema(SchemaSerde):
    """JSON values checked by JSON Schema: ``Topic("readings", Reading, serde=JsonSchema())``.

    Args:
        schema: the schema written with (a dict or its text); None: the topic
            model's own (``model_json_schema()``).
    """

    schema_type: ClassVar[str] = "JSON"

    def __init__(self, schema: Mapping[str, Any] | str | None = None) -> None:
        self.schema = json.loads(schema) if isinstance(schema, str) else schema

    def bind(self, binding: Binding) -> BoundJsonSchema:
        schema = self.schema
        model = binding.model
        if schema is None and isinstance(model, type) and issubclass(model, BaseModel):
            schema = model.model_json_schema()
        return BoundJsonSchema(binding, None if schema is None else dict(schema))


class BoundJsonSchema(BoundSerde):
    schema_type: ClassVar[str] = "JSON"

    def __init__(self, binding: Binding, schema: dict[str, Any] | None) -> None:
        super().__init__(binding, None if schema is None else json.dumps(schema))
        self._own = None if schema is None else _checker(schema)
        self._validators: dict[int, Any] = {}  # schema id -> its validator

    def decode(self, raw: bytes | None) -> Any:
        schema_id, payload = split(raw)
        checker = self._validators.get(schema_id)
        if checker is None:
            checker = self._validators[schema_id] = self._writer_checker(schema_id)
        try:
            value = orjson.loads(payload)
        except orjson.JSONDecodeError as exc:
            raise DecodeError(f"schema id {schema_id}: malformed JSON: {exc}") from None
        if checker.is_valid(value):
            return self.typed(value, schema_id)
        error = exceptions.best_match(checker.iter_errors(value))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "(root)"
            raise DecodeError(f"schema id {schema_id}: {where}: {error.message}")
        return self.typed(value, schema_id)

    def _writer_checker(self, schema_id: int) -> Any:
        text = self.writer(schema_id).text
        try:
            return _checker(json.loads(text))
        except (ValueError, exceptions.SchemaError) as exc:
            raise DecodeError(f"schema id {schema_id} is not a JSON Schema: {exc}") from None

    def encode(self, value: Any) -> bytes:
        header = self.header()
        document = plain(value, "json")
        if self._own is not None:
            error = exceptions.best_match(self._own.iter_errors(document))
            if error is not None:
                raise encode_failure(self.binding.subject, value, ValueError(error.message))
        return header + orjson.dumps(document)


def _checker(schema: dict[str, Any]) -> Any:
    cls = validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)
