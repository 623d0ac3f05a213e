"""How a topic's bytes become typed values and back.

A :class:`Serde` belongs to a :class:`service.Topic`. Decoding is strict: a
record either validates completely or is rejected with a one-line reason, and
the record goes to the dead-letter topic with its original bytes and that
reason. JSON has no NaN or infinity: decoding refuses them (and numbers beyond
a double, such as 1e400, which would read as infinity) unless the topic's serde
accepts them explicitly, and encoding refuses them instead of writing ``null``:
an aggregate that overflowed is an error the operator must see, not a silent
value.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

import orjson
import pydantic_core
from pydantic import BaseModel, ValidationError
from pydantic_core import SchemaValidator

V = TypeVar("V")
M = TypeVar("M", bound=BaseModel)
ValidateJson = Callable[[Any], Any]


class DecodeError(ValueError):
    """A record's bytes are not a valid value of the expected type; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class EncodeError(ValueError):
    """A value cannot be written to its topic (not JSON, or NaN/infinity). The
    message names the value; it is a bug in the function that produced it."""


class Serde(Protocol[V]):
    """Bytes <-> values of one topic."""

    def decode(self, raw: bytes | None) -> V:
        """Raises :class:`DecodeError` with a one-line reason."""
        ...

    def encode(self, value: V) -> bytes: ...


class JsonModel(Generic[M]):
    """JSON validated as a pydantic model (the default for a topic with a model).

    Args:
        model: the model each record must validate as.
        allow_non_finite: accept NaN, Infinity and numbers beyond a double's range
            (1e400 reads as infinity) where the model takes a float. By default a
            record holding one is refused: JSON has none of them, and a producer
            that writes one has overflowed or is not writing JSON.
    """

    def __init__(self, model: type[M], *, allow_non_finite: bool = False) -> None:
        self.model = model
        self.allow_non_finite = allow_non_finite
        self._validate: ValidateJson
        if allow_non_finite:
            self._validate, self._scan = model.__pydantic_validator__.validate_json, False
        else:
            self._validate, self._scan = finite_validator(model)

    def decode(self, raw: bytes | None) -> M:
        """:func:`decode_model`, written out: it runs once per record."""
        if raw is None:
            raise DecodeError("empty value (tombstone)")
        try:
            if self._scan:  # a field takes any JSON: orjson refuses NaN wherever it is
                orjson.loads(raw)
            return self._validate(raw)  # type: ignore[no-any-return]
        except ValidationError as exc:
            raise DecodeError(reason_of(exc)) from None
        except orjson.JSONDecodeError as exc:
            raise DecodeError(json_reason(exc, raw)) from None

    def encode(self, value: M) -> bytes:
        return encode_json(value)


class Json:
    """Any JSON value, unvalidated (a topic without a model).

    Args:
        allow_non_finite: read NaN and Infinity, and numbers beyond a double's
            range as infinities, instead of refusing the record (JSON has none).
    """

    def __init__(self, *, allow_non_finite: bool = False) -> None:
        self.allow_non_finite = allow_non_finite

    def decode(self, raw: bytes | None) -> Any:
        if raw is None:
            raise DecodeError("empty value (tombstone)")
        if self.allow_non_finite:
            try:
                return pydantic_core.from_json(raw, allow_inf_nan=True)
            except ValueError as exc:
                raise DecodeError(f"malformed JSON: {exc}") from None
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise DecodeError(json_reason(exc, raw)) from None

    def encode(self, value: Any) -> bytes:
        return encode_json(value)


def decode_model(model: type[M], raw: bytes | None) -> M:
    """Validate ``raw`` JSON as ``model`` (NaN and infinities refused).

    Raises:
        DecodeError: with a short reason naming the offending field.
    """
    return JsonModel(model).decode(raw)


def json_reason(exc: orjson.JSONDecodeError, raw: bytes | bytearray | memoryview | str) -> str:
    """orjson's reason, saying so when the record holds what JSON lacks."""
    reason = f"malformed JSON: {exc}"
    text = raw if isinstance(raw, str) else bytes(raw).decode("utf-8", "replace")
    if "infinity" in str(exc) or "NaN" in text or "Infinity" in text:
        reason += " (NaN, Infinity and numbers beyond a double such as 1e400 are not JSON)"
    return reason


# Core schema keys that hold no validation: walking them would find a "type"
# that is not a validator's (a serializer's function, a default value).
_NOT_VALIDATION = frozenset({"serialization", "metadata", "default", "json_schema_input_schema"})
# Validators that hand the JSON value on as it is (to the agent, or to a
# function of the user's): NaN would reach them whatever the floats refuse.
_OPAQUE = frozenset({"any", "function-plain", "function-wrap"})
_ITEMS = {"list": "items_schema", "set": "items_schema", "frozenset": "items_schema"}
_ITEMS |= {"generator": "items_schema", "dict": "values_schema", "tuple": "items_schema"}
_finite_validators: dict[type[Any], tuple[ValidateJson, bool]] = {}


def finite_validator(model: type[BaseModel]) -> tuple[ValidateJson, bool]:
    """``model``'s JSON validator with NaN and infinities refused by pydantic-core,
    and whether a record must also be scanned (a field takes any JSON value).

    Why a rebuilt validator: pydantic-core refuses non-finite floats where a
    float's schema says ``allow_inf_nan=False``, at no cost per record, while a
    walk over every decoded value in Python would double a record's cost. The
    model's own validator is left as it is (a model that allows them, by
    ``ConfigDict(allow_inf_nan=True)`` or a field's, keeps allowing them).
    """
    found = _finite_validators.get(model)
    if found is None:
        found = _finite_validators[model] = _build_finite(model)
    return found


def _build_finite(model: type[BaseModel]) -> tuple[ValidateJson, bool]:
    if not model.__pydantic_complete__ and not model.model_rebuild(raise_errors=False):
        # Forward references not resolvable yet: validate as the model does when it
        # can, and let orjson refuse NaN and infinities first.
        return (lambda raw: model.__pydantic_validator__.validate_json(raw)), True
    walk = _Walk()
    schema = walk.finite(model.__pydantic_core_schema__, allow=False)
    # pydantic-core reuses a complete model's own validator for a model schema (its
    # prebuilt validator), which would ignore the floats changed above; the models
    # are marked incomplete while this one validator is built, in the one thread
    # that builds the app.
    complete = [c for c in walk.classes if c.__dict__.get("__pydantic_complete__") is True]
    for cls in complete:
        setattr(cls, "__pydantic_complete__", False)  # noqa: B010 (a class attribute)
    try:
        validator = SchemaValidator(schema)
    finally:
        for cls in complete:
            setattr(cls, "__pydantic_complete__", True)  # noqa: B010
    return validator.validate_json, walk.opaque


class _Walk:
    """A copy of a core schema whose floats and decimals refuse NaN and infinities."""

    def __init__(self) -> None:
        self.classes: set[type[Any]] = set()
        self.opaque = False

    def finite(self, schema: Any, allow: bool) -> Any:
        if isinstance(schema, list):
            return [self.finite(each, allow) for each in schema]
        if not isinstance(schema, dict):
            return schema
        kind = schema.get("type")
        if kind in ("model", "dataclass", "typed-dict"):
            allow = bool(schema.get("config", {}).get("allow_inf_nan", False))
            if isinstance(schema.get("cls"), type):
                self.classes.add(schema["cls"])
        if kind in _OPAQUE or (kind in _ITEMS and _ITEMS[kind] not in schema):
            self.opaque = True
        copy = {
            key: value if key in _NOT_VALIDATION else self.finite(value, allow)
            for key, value in schema.items()
        }
        if kind in ("float", "decimal") and not allow and "allow_inf_nan" not in copy:
            copy["allow_inf_nan"] = False
        return copy


def _default(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def encode_json(value: Any) -> bytes:
    """``value`` as JSON; pydantic models as their JSON form.

    Raises:
        EncodeError: ``value`` holds NaN or an infinity (JSON has neither; orjson
            would write ``null``), or something JSON cannot represent.
    """
    try:
        encoded = orjson.dumps(value, default=_default)
    except TypeError as exc:
        raise EncodeError(f"cannot write {value!r} as JSON: {exc}") from None
    if b"null" in encoded and _has_non_finite(value):
        raise EncodeError(f"cannot write {value!r} as JSON: NaN or infinity (an overflow?)")
    return encoded


def _has_non_finite(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, BaseModel):
        return _has_non_finite(value.model_dump())
    if isinstance(value, dict):
        return any(_has_non_finite(v) for v in value.values())
    if isinstance(value, (list, tuple, set, frozenset)):
        return any(_has_non_finite(v) for v in value)
    return False


def reason_of(exc: ValidationError) -> str:
    """The one-line reason of a validation failure: its first error, and how many more."""
    first = exc.errors(include_url=False)[0]
    where = ".".join(str(part) for part in first["loc"])
    if first["type"] == "json_invalid":
        return f"malformed JSON: {first['msg']}"
    if first["type"] == "finite_number":
        first["msg"] = (
            f"{first['input']!r} is not a finite number (NaN, Infinity and numbers beyond "
            "a double such as 1e400 are refused)"
        )
    detail = f"{where}: {first['msg']}" if where else first["msg"]
    more = exc.error_count() - 1
    return f"{detail} (+{more} more)" if more else detail
