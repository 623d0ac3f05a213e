"""JSON Schema with a schema registry (the jsonschema library).

A record is validated against the schema it was written with (its id's), then
read as the agent's model: a field a newer writer added is ignored by the model
unless the model forbids extra fields, a field an older writer lacks takes the
model's default. Validators are built so that no schema can stall or reach out
of the worker (:mod:`eddy.schemas.jsonschema_checks`): patterns run on RE2,
references resolve only inside the schema, the work per record is bounded.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

import orjson
from jsonschema import exceptions
from pydantic import BaseModel

from eddy.errors import ConfigError
from eddy.schemas.base import Binding, BoundSerde, SchemaSerde, encode_failure, plain
from eddy.schemas.jsonschema_checks import Budget, OverBudget, Refused, bounded_validator
from eddy.schemas.registry import RegisteredSchema
from eddy.schemas.wire import split
from eddy.serde import DecodeError, json_reason


class JsonSchema(SchemaSerde):
    """JSON values checked by JSON Schema: ``Topic("readings", Reading, serde=JsonSchema())``.

    Args:
        schema: the schema written with (a dict or its text); None: the topic
            model's own (``model_json_schema()``).
        subjects: subjects besides the topic's whose schemas records may be
            written with.
    """

    schema_type: ClassVar[str] = "JSON"

    def __init__(
        self, schema: Mapping[str, Any] | str | None = None, *, subjects: Iterable[str] = ()
    ) -> None:
        self.schema = json.loads(schema) if isinstance(schema, str) else schema
        self.subjects = tuple(subjects)

    def bind(self, binding: Binding) -> BoundJsonSchema:
        schema = self.schema
        model = binding.model
        if schema is None and isinstance(model, type) and issubclass(model, BaseModel):
            schema = model.model_json_schema()
        return BoundJsonSchema(binding, None if schema is None else dict(schema), self.subjects)


class BoundJsonSchema(BoundSerde):
    schema_type: ClassVar[str] = "JSON"

    def __init__(
        self, binding: Binding, schema: dict[str, Any] | None, subjects: Iterable[str] = ()
    ) -> None:
        super().__init__(binding, None if schema is None else json.dumps(schema), subjects)
        self._max_bytes = binding.limits.max_record_bytes
        self._own: tuple[Any, Budget] | None = None
        if schema is not None:
            try:
                self._own = bounded_validator(schema, binding.limits.max_depth)
            except Refused as exc:
                raise ConfigError(
                    f"subject {binding.subject}: the JSON Schema declared for it is refused: {exc}"
                ) from None

    def decode(self, raw: bytes | None) -> Any:
        schema_id, payload = split(raw, self._max_bytes)
        # schema id -> (its validator, the budget its validations spend)
        checker: tuple[Any, Budget] | None = self._ready.get(schema_id)
        if checker is None:
            checker = self.ready(schema_id)
        try:
            value = orjson.loads(payload)
        except orjson.JSONDecodeError as exc:
            raise DecodeError(f"schema id {schema_id}: {json_reason(exc, payload)}") from None
        problem = _problem(checker[0], checker[1], value, len(payload))
        if problem is not None:
            raise DecodeError(f"schema id {schema_id}: {problem}")
        return self.typed(value, schema_id)

    def prepare_writer(self, found: RegisteredSchema) -> tuple[Any, Budget]:
        try:
            return bounded_validator(
                orjson.loads(found.text), self.limits.max_depth, found.references
            )
        except orjson.JSONDecodeError as exc:
            raise DecodeError(f"schema id {found.schema_id} is not JSON: {exc}") from None
        except Refused as exc:
            raise DecodeError(f"schema id {found.schema_id} is refused: {exc}") from None

    def encode(self, value: Any) -> bytes:
        header = self.header()
        document = plain(value, "json")
        if self._own is not None:
            problem = _problem(self._own[0], self._own[1], document, 0)
            if problem is not None:
                raise encode_failure(self.binding.subject, value, ValueError(problem))
        return header + orjson.dumps(document)


def _problem(checker: Any, budget: Budget, value: Any, size_bytes: int) -> str | None:
    """Why ``value`` does not validate (one line), or None if it does."""
    try:
        budget.reset(size_bytes)
        if checker.is_valid(value):
            return None
        budget.reset(size_bytes)
        error = exceptions.best_match(checker.iter_errors(value))
    except OverBudget as exc:
        return str(exc)
    except RecursionError:
        return "nested too deeply to validate"
    except Exception as exc:  # a $ref that resolves nowhere, a pattern RE2 cannot run...
        return f"cannot be validated: {exc!r:.300}"
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "(root)"
    return f"{where:.200}: {error.message:.300}"
