"""What the three schema-registry serdes share: a declaration bound at build time,
and a bound serde that knows its registry, subject, limits and the agent's model.

A writer schema is checked once per id before any record is decoded with it: it
must be a version of the topic's subject (or of a subject the serde names), of
the serde's format, and safe to decode with (each format says what that means).
A refused id is remembered for ``not_found_ttl_ms`` (its records dead-lettered
without asking again), then checked anew: the same schema may have been
registered under the subject since.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import BaseModel, ValidationError

from eddy.errors import ConfigError
from eddy.redact import redact_url
from eddy.schemas import wire
from eddy.schemas.registry import RegisteredSchema, Registry
from eddy.serde import DecodeError, EncodeError, reason_of


@dataclass(frozen=True)
class Limits:
    """What a bound serde accepts (``EDDY_SCHEMA_REGISTRY_*``, eddy.schemas.settings)."""

    max_depth: int = 64
    max_record_bytes: int = 8_388_608
    cache_size: int = 1_000
    not_found_ttl_ms: int = 30_000


@dataclass(frozen=True)
class Binding:
    """Where a declared serde is used: its registry, subject, the agent's model
    (None: values stay dicts), whether outputs may register schemas, and limits."""

    registry: Registry
    subject: str
    model: type[Any] | None
    auto_register: bool = True
    limits: Limits = field(default_factory=Limits)


class SchemaSerde(ABC):
    """A serde declared on a topic; building the app binds it (:meth:`bind`).

    ``subjects`` are subjects besides the topic's whose schemas its records may be
    written with (a record-name subject naming strategy, a schema shared by topics).
    """

    schema_type: ClassVar[str]
    subjects: tuple[str, ...] = ()

    @abstractmethod
    def bind(self, binding: Binding) -> BoundSerde:
        """This serde, reading and writing through ``binding``'s registry.

        Raises:
            ConfigError: the declared schema is one Eddy refuses to decode with.
        """

    def decode(self, raw: bytes | None) -> Any:
        raise TypeError(f"{type(self).__name__} is bound to a schema registry when the app builds")

    def encode(self, value: Any) -> bytes:
        raise TypeError(f"{type(self).__name__} is bound to a schema registry when the app builds")


class BoundSerde(ABC):
    """Decodes by the writer's schema id; encodes with its own schema's id."""

    schema_type: ClassVar[str]

    def __init__(self, binding: Binding, text: str | None, subjects: Iterable[str] = ()) -> None:
        self.binding = binding
        self.text = text  # the schema this serde writes (None: it only reads)
        self.limits = binding.limits
        self.accepted = frozenset((binding.subject, *subjects))
        self._validate = _validator(binding.model)
        self._schema_id: int | None = None
        self._header = b""
        # schema id -> what decoding with it needs (the format's): read per record.
        self._ready: dict[int, Any] = {}
        # schema id -> (until when, by time.monotonic, it stays refused; the refusal)
        self._refused: dict[int, tuple[float, str]] = {}

    @abstractmethod
    def decode(self, raw: bytes | None) -> Any: ...

    @abstractmethod
    def encode(self, value: Any) -> bytes: ...

    @abstractmethod
    def prepare_writer(self, found: RegisteredSchema) -> Any:
        """What decoding with ``found`` needs, once its subject and format are checked.

        Raises:
            DecodeError: the schema is refused (the reason says why).
        """

    def ready(self, schema_id: int) -> Any:
        """What decoding with ``schema_id`` needs: :meth:`prepare_writer`'s, kept.

        Raises:
            DecodeError: the registry has no such id, or its schema is refused.
            RegistryUnavailable: the registry did not answer.
        """
        refused = self._refused.get(schema_id)
        if refused is not None:
            if refused[0] > time.monotonic():
                raise DecodeError(refused[1])
            del self._refused[schema_id]
            self.binding.registry.forget(schema_id)
        found = self.binding.registry.schema(schema_id)
        if found is None:
            raise DecodeError(
                f"unknown schema id {schema_id}: the schema registry "
                f"{redact_url(self.binding.registry.url)} has no schema with that id"
            )
        try:
            self._check_subject(found)
            prepared = self.prepare_writer(found)
        except DecodeError as exc:
            self._refuse(schema_id, exc.reason)
            raise
        _keep(self._ready, schema_id, prepared, self.limits.cache_size)
        return prepared

    def missing(self, raws: Iterable[bytes | None]) -> set[int]:
        """The schema ids that the 5-byte headers of ``raws`` name and that neither
        this serde nor its registry knows yet: those a batch fetches before it is
        decoded (:meth:`Registry.prefetch`)."""
        ready, refused, registry = self._ready, self._refused, self.binding.registry
        now = time.monotonic()
        ids = set()
        for head in {raw[:5] for raw in raws if raw}:
            if len(head) < 5 or head[0] != wire.MAGIC:
                continue
            schema_id = int.from_bytes(head[1:], "big")
            if schema_id in ready:
                continue
            until = refused.get(schema_id)
            if until is not None and until[0] > now:
                continue
            if until is not None:  # time to check it anew, with a fresh answer
                del refused[schema_id]
                registry.forget(schema_id)
            if not registry.known(schema_id):
                ids.add(schema_id)
        return ids

    def _check_subject(self, found: RegisteredSchema) -> None:
        if found.schema_type != self.schema_type:
            raise DecodeError(
                f"schema id {found.schema_id} is a {found.schema_type} schema; "
                f"subject {self.binding.subject} is read as {self.schema_type}"
            )
        if found.subjects & self.accepted:
            return
        listed = ", ".join(sorted(found.subjects)[:3]) or "none (its versions were deleted?)"
        more = f" and {len(found.subjects) - 3} more" if len(found.subjects) > 3 else ""
        raise DecodeError(
            f"schema id {found.schema_id} is not a version of subject {self.binding.subject} "
            f"(its subjects: {listed}{more}): a record must be written with a schema of its "
            "topic's subject, or of a subject the topic's serde names in subjects="
        )

    def _refuse(self, schema_id: int, reason: str) -> None:
        until = time.monotonic() + self.limits.not_found_ttl_ms / 1000
        _keep(self._refused, schema_id, (until, reason), self.limits.cache_size)

    def typed(self, value: Any, schema_id: int) -> Any:
        """``value`` as the agent's model (a dict when it has none)."""
        if self._validate is None:
            return value
        try:
            return self._validate(value)
        except ValidationError as exc:
            raise DecodeError(f"schema id {schema_id}: {reason_of(exc)}") from None

    def prepare(self) -> int:
        """This output's schema id: registered under the subject when auto-registration
        is on, else looked up (and refused if the subject lacks it).

        Raises:
            ConfigError: no schema to write, or the subject lacks it.
            SchemaRejected: the registry's compatibility check refused it.
        """
        if self._schema_id is not None:
            return self._schema_id
        if self.text is None:
            raise ConfigError(
                f"subject {self.binding.subject}: {type(self).__name__} has no schema to write "
                "with; give the serde its schema"
            )
        registry, subject = self.binding.registry, self.binding.subject
        if self.binding.auto_register:
            schema_id = registry.register(subject, self.text, self.schema_type)
        else:
            found = registry.lookup(subject, self.text, self.schema_type)
            if found is None:
                raise ConfigError(
                    f"subject {subject} has no version of this output's schema and "
                    "EDDY_SCHEMA_REGISTRY_AUTO_REGISTER is false: register it, or set it true"
                )
            schema_id = found
        self._schema_id, self._header = schema_id, wire.header(schema_id)
        return schema_id

    def header(self) -> bytes:
        if self._schema_id is None:
            self.prepare()
        return self._header


def _keep(cache: dict[int, Any], key: int, value: Any, size: int) -> None:
    """``cache[key] = value``, dropping the oldest entry past ``size`` (a plain dict
    read per record: a hit costs no more than before there was a bound)."""
    if key not in cache and len(cache) >= size:
        del cache[next(iter(cache))]
    cache[key] = value


def plain(value: Any, mode: str = "python") -> Any:
    """A model as the dict its schema describes; other values as they are."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode=mode)
    return value


def encode_failure(subject: str, value: Any, exc: Exception) -> EncodeError:
    return EncodeError(f"cannot write {value!r} to subject {subject}: {exc}")


def _validator(model: type[Any] | None) -> Any:
    if isinstance(model, type) and issubclass(model, BaseModel):
        return model.__pydantic_validator__.validate_python
    return None
