"""Protobuf with a schema registry (Google's protobuf runtime).

A record is parsed as the topic's message class whatever version of the
message wrote it: fields the class does not know are kept as unknown fields and
not seen by the agent, fields the writer did not set take their defaults. The
writer's schema id must still be one the registry knows, and a Protobuf one.
"""

from __future__ import annotations

from typing import Any, ClassVar

from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError as ProtobufDecodeError
from google.protobuf.message import Message

from service.errors import ConfigError
from service.schemas.base import Binding, BoundSerde, SchemaSerde, encode_failure, plain
from service.schemas.wire import read_indexes, split, write_indexes
from service.serde import DecodeError


class Protobuf(SchemaSerde):
    """Protobuf values (or keys): ``Topic("readings", Reading, serde=Protobuf(ReadingPb))``.

    Args:
        message: the generated message class records are parsed as.
        schema: the ``.proto`` file's text, registered for an output topic (an
            input topic needs none: the writer registered its own).
    """

    schema_type: ClassVar[str] = "PROTOBUF"

    def __init__(self, message: type[Message], schema: str | None = None) -> None:
        if message.DESCRIPTOR.containing_type is not None:
            raise ConfigError(f"Protobuf: {message.DESCRIPTOR.full_name} is a nested message")
        self.message = message
        self.schema = schema

    def bind(self, binding: Binding) -> BoundProtobuf:
        return BoundProtobuf(binding, self)


class BoundProtobuf(BoundSerde):
    schema_type: ClassVar[str] = "PROTOBUF"

    def __init__(self, binding: Binding, declared: Protobuf) -> None:
        super().__init__(binding, declared.schema)
        self.message = declared.message
        file = self.message.DESCRIPTOR.file
        self._indexes = write_indexes(
            [list(file.message_types_by_name).index(self.message.DESCRIPTOR.name)]
        )
        self._known: set[int] = set()

    def decode(self, raw: bytes | None) -> Any:
        schema_id, payload = split(raw)
        if schema_id not in self._known:
            self.writer(schema_id)
            self._known.add(schema_id)
        _, start = read_indexes(payload)
        try:
            message = self.message.FromString(payload[start:])
        except ProtobufDecodeError as exc:
            raise DecodeError(
                f"schema id {schema_id}: not a {self.message.DESCRIPTOR.full_name} "
                f"(truncated or corrupt?): {exc}"
            ) from None
        value = json_format.MessageToDict(
            message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
        )
        return self.typed(_integers(self.message.DESCRIPTOR, value), schema_id)

    def encode(self, value: Any) -> bytes:
        header = self.header()
        try:
            message = json_format.ParseDict(plain(value, "json"), self.message())
        except json_format.ParseError as exc:
            raise encode_failure(self.binding.subject, value, exc) from None
        data: bytes = message.SerializeToString()
        return header + self._indexes + data


# Protobuf's JSON mapping writes 64-bit integers as strings (JavaScript cannot hold
# them), and map keys are strings whatever their type: a model with a strict int
# field would refuse every record. They are numbers again before the model sees them.
_WIDE = frozenset({FieldDescriptor.CPPTYPE_INT64, FieldDescriptor.CPPTYPE_UINT64})
_INTEGERS = _WIDE | {FieldDescriptor.CPPTYPE_INT32, FieldDescriptor.CPPTYPE_UINT32}


def _integers(descriptor: Descriptor, value: dict[str, Any]) -> dict[str, Any]:
    for field in descriptor.fields:
        if field.name not in value:
            continue
        found = value[field.name]
        entry = field.message_type
        if entry is not None and entry.GetOptions().map_entry:
            key, item = entry.fields_by_name["key"], entry.fields_by_name["value"]
            to_key = int if key.cpp_type in _INTEGERS else str
            value[field.name] = {to_key(k): _one(item, v) for k, v in found.items()}
        elif field.is_repeated:
            value[field.name] = [_one(field, v) for v in found]
        else:
            value[field.name] = _one(field, found)
    return value


def _one(field: FieldDescriptor, value: Any) -> Any:
    if field.cpp_type in _WIDE:
        return int(value)
    if field.cpp_type == FieldDescriptor.CPPTYPE_MESSAGE and isinstance(value, dict):
        return _integers(field.message_type, value)
    return value  # well-known types (Timestamp...) keep their JSON form
