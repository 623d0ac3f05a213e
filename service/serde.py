"""How a topic's bytes become typed values and back.

A :class:`Serde` belongs to a :class:`service.Topic`. Decoding is strict: a
record either validates completely or is rejected with a one-line reason, and
the record goes to the dead-letter topic with its original bytes and that
reason. Encoding refuses what JSON cannot carry faithfully (NaN, infinities)
instead of writing ``null``: an aggregate that overflowed is an error the
operator must see, not a silent value.
"""

from __future__ import annotations

import math
from typing import Any, Generic, Protocol, TypeVar

import orjson
from pydantic import BaseModel, ValidationError

V = TypeVar("V")
M = TypeVar("M", bound=BaseModel)


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
    """JSON validated as a pydantic model (the default for a topic with a model)."""

    def __init__(self, model: type[M]) -> None:
        self.model = model

    def decode(self, raw: bytes | None) -> M:
        """:func:`decode_model`, written out: it runs once per record."""
        if raw is None:
            raise DecodeError("empty value (tombstone)")
        try:
            # What ``model_validate_json`` calls, without its two Python frames.
            return self.model.__pydantic_validator__.validate_json(raw)  # type: ignore[no-any-return]
        except ValidationError as exc:
            raise DecodeError(reason_of(exc)) from None

    def encode(self, value: M) -> bytes:
        return encode_json(value)


class Json:
    """Any JSON value, unvalidated (a topic without a model)."""

    def decode(self, raw: bytes | None) -> Any:
        if raw is None:
            raise DecodeError("empty value (tombstone)")
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise DecodeError(f"malformed JSON: {exc}") from None

    def encode(self, value: Any) -> bytes:
        return encode_json(value)


def decode_model(model: type[M], raw: bytes | None) -> M:
    """Validate ``raw`` JSON as ``model``.

    Raises:
        DecodeError: with a short reason naming the offending field.
    """
    if raw is None:
        raise DecodeError("empty value (tombstone)")
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        raise DecodeError(reason_of(exc)) from None


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
    detail = f"{where}: {first['msg']}" if where else first["msg"]
    more = exc.error_count() - 1
    return f"{detail} (+{more} more)" if more else detail
