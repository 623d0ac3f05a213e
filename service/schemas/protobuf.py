"""Protobuf with a schema registry (Google's protobuf runtime).

A record is parsed as the topic's message class whatever version of the
message wrote it: fields the class does not know are kept as unknown fields and
not seen by the agent, fields the writer did not set take their defaults. The
writer's schema id must still be one the registry knows, a Protobuf one, and the
record's message indexes must select, in that schema, a message of the class's
name: a record of another message of the file is refused, never read as the
topic's (its bytes would parse, as something else).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError as ProtobufDecodeError
from google.protobuf.message import Message

from eddy.errors import ConfigError
from eddy.schemas.base import Binding, BoundSerde, SchemaSerde, encode_failure, plain
from eddy.schemas.proto_text import top_level_messages
from eddy.schemas.registry import RegisteredSchema
from eddy.schemas.wire import read_indexes, split, write_indexes
from eddy.serde import DecodeError


class Protobuf(SchemaSerde):
    """Protobuf values (or keys): ``Topic("readings", Reading, serde=Protobuf(ReadingPb))``.

    Args:
        message: the generated message class records are parsed as.
        schema: the ``.proto`` file's text, registered for an output topic (an
            input topic needs none: the writer registered its own).
        subjects: subjects besides the topic's whose schemas records may be
            written with.
    """

    schema_type: ClassVar[str] = "PROTOBUF"

    def __init__(
        self, message: type[Message], schema: str | None = None, *, subjects: Iterable[str] = ()
    ) -> None:
        if message.DESCRIPTOR.containing_type is not None:
            raise ConfigError(f"Protobuf: {message.DESCRIPTOR.full_name} is a nested message")
        self.message = message
        self.schema = schema
        self.subjects = tuple(subjects)

    def bind(self, binding: Binding) -> BoundProtobuf:
        return BoundProtobuf(binding, self)


class BoundProtobuf(BoundSerde):
    schema_type: ClassVar[str] = "PROTOBUF"

    def __init__(self, binding: Binding, declared: Protobuf) -> None:
        super().__init__(binding, declared.schema, declared.subjects)
        self.message = declared.message
        file = self.message.DESCRIPTOR.file
        self._indexes = write_indexes(
            [list(file.message_types_by_name).index(self.message.DESCRIPTOR.name)]
        )
        self._max_bytes = binding.limits.max_record_bytes

    def decode(self, raw: bytes | None) -> Any:
        schema_id, payload = split(raw, self._max_bytes)
        # schema id -> (the indexes of the class's message in it, its top-level messages)
        found = self._ready.get(schema_id)
        if found is None:
            found = self.ready(schema_id)
        indexes, start = read_indexes(payload)
        if indexes != found[0]:
            raise DecodeError(self._another_message(schema_id, indexes, found[1]))
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

    def prepare_writer(self, found: RegisteredSchema) -> tuple[list[int], list[str]]:
        """The indexes that select the class's message in the writer's schema (by
        its name: a package renamed between versions is the same message)."""
        _, names = top_level_messages(found.text)
        name = self.message.DESCRIPTOR.name
        if name not in names:
            listed = ", ".join(names[:5]) or "none"
            raise DecodeError(
                f"schema id {found.schema_id} has no message {name} at its top level "
                f"(it has {listed}): its records are not {self.message.DESCRIPTOR.full_name}"
            )
        return [names.index(name)], names

    def _another_message(self, schema_id: int, indexes: list[int], names: list[str]) -> str:
        first = indexes[0] if indexes else -1
        which = names[first] if 0 <= first < len(names) else f"no message (index {first})"
        if len(indexes) > 1 and 0 <= first < len(names):
            which = f"a message nested in {which}"
        return (
            f"schema id {schema_id}: the record is {which} (message indexes {indexes[:8]}), "
            f"not {self.message.DESCRIPTOR.name}: the topic is read as "
            f"{self.message.DESCRIPTOR.full_name}"
        )

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
