"""What the three schema-registry serdes share: a declaration bound at build time,
and a bound serde that knows its registry, subject and the agent's model."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import BaseModel, ValidationError

from service.errors import ConfigError
from service.schemas import wire
from service.schemas.registry import RegisteredSchema, Registry
from service.serde import DecodeError, EncodeError, reason_of


@dataclass(frozen=True)
class Binding:
    """Where a declared serde is used: its registry, subject, the agent's model
    (None: values stay dicts) and whether outputs may register schemas."""

    registry: Registry
    subject: str
    model: type[Any] | None
    auto_register: bool = True


class SchemaSerde(ABC):
    """A serde declared on a topic; building the app binds it (:meth:`bind`)."""

    schema_type: ClassVar[str]

    @abstractmethod
    def bind(self, binding: Binding) -> BoundSerde:
        """This serde, reading and writing through ``binding``'s registry."""

    def decode(self, raw: bytes | None) -> Any:
        raise TypeError(f"{type(self).__name__} is bound to a schema registry when the app builds")

    def encode(self, value: Any) -> bytes:
        raise TypeError(f"{type(self).__name__} is bound to a schema registry when the app builds")


class BoundSerde(ABC):
    """Decodes by the writer's schema id; encodes with its own schema's id."""

    schema_type: ClassVar[str]

    def __init__(self, binding: Binding, text: str | None) -> None:
        self.binding = binding
        self.text = text  # the schema this serde writes (None: it only reads)
        self._validate = _validator(binding.model)
        self._schema_id: int | None = None
        self._header = b""

    @abstractmethod
    def decode(self, raw: bytes | None) -> Any: ...

    @abstractmethod
    def encode(self, value: Any) -> bytes: ...

    def writer(self, schema_id: int) -> RegisteredSchema:
        """The registered schema a record was written with.

        Raises:
            DecodeError: the registry has no such id, or it is another format's.
        """
        found = self.binding.registry.schema(schema_id)
        if found is None:
            raise DecodeError(
                f"unknown schema id {schema_id}: the schema registry "
                f"{self.binding.registry.url} has no schema with that id"
            )
        if found.schema_type != self.schema_type:
            raise DecodeError(
                f"schema id {schema_id} is a {found.schema_type} schema; "
                f"subject {self.binding.subject} is read as {self.schema_type}"
            )
        return found

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
