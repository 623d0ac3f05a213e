"""What the decoder fuzzer feeds: every serde a topic can have, bound to an
in-memory registry that holds adversarial writer schemas next to good ones.

An input is ``[target][variant][payload...]``: the target picks a serde (JSON,
Avro, Protobuf, JSON Schema, or a whole :class:`Source` reading a key and a
value), the variant picks the schema id the record's header names (or, past the
ids, the payload is the record as it is, header and all). The invariant
(:func:`run_one`): an input decodes or raises :class:`DecodeError`; anything
else is a finding.
"""

from __future__ import annotations

import base64
import importlib
import io
import json
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from types import ModuleType
from typing import Any

import fastavro
from google.protobuf.descriptor_pb2 import FileDescriptorProto
from pydantic import BaseModel

from eddy.consume import Decoder, text_line
from eddy.pipeline.source import Source, as_key
from eddy.replay_files import ReplayInputError, read_records
from eddy.schemas import wire
from eddy.schemas.avro import Avro
from eddy.schemas.base import Binding
from eddy.schemas.jsonschema import JsonSchema
from eddy.schemas.memory import MemoryRegistry
from eddy.schemas.protobuf import Protobuf
from eddy.serde import DecodeError, Json, JsonModel

RAW = 0xF0  # a variant from here on: the payload is the whole record
REPLAY_LINE_BYTES = 4_096  # small, so that inputs reach past the limit


class Part(BaseModel):
    serial: int
    ratio: float | None = None


class Reading(BaseModel):
    sensor_id: str
    timestamp_ms: int
    temperature: float
    humidity: float | None = None
    tags: list[str] = []
    parts: list[Part] = []
    extra: dict[str, Any] = {}
    when: datetime | None = None


def _record(name: str, *fields: tuple[str, Any], **more: Any) -> dict[str, Any]:
    return {
        "type": "record",
        "name": name,
        "fields": [{"name": n, "type": t, **more.get(n, {})} for n, t in fields],
    }


PART_AVRO = _record("Part", ("serial", "long"), ("ratio", ["null", "double"]))
READING_AVRO = _record(
    "Reading",
    ("sensor_id", "string"),
    ("timestamp_ms", "long"),
    ("temperature", "double"),
    ("humidity", ["null", "double"]),
    ("tags", {"type": "array", "items": "string"}),
    ("parts", {"type": "array", "items": PART_AVRO}),
    ("extra", {"type": "map", "values": ["null", "string", "long", "double", "boolean"]}),
    ("kind", {"type": "enum", "name": "Kind", "symbols": ["A", "B", "C"]}),
    ("mac", {"type": "fixed", "name": "Mac", "size": 6}),
    ("price", {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}),
    ("id", {"type": "string", "logicalType": "uuid"}),
    ("when", {"type": "long", "logicalType": "timestamp-millis"}),
    humidity={"default": None},
)
OLDER_AVRO = _record(
    "Reading",
    ("sensor_id", "string"),
    ("timestamp_ms", "int"),
    ("temperature", "float"),
    ("location", "string"),
)
RECURSIVE_AVRO = _record("Reading", ("sensor_id", "string"), ("next", ["null", "Reading"]))
ZERO_BYTE_AVRO = _record(
    "Reading", ("sensor_id", "string"), ("marks", {"type": "array", "items": "null"})
)
DECIMAL_AVRO = _record(
    "Reading",
    ("sensor_id", "string"),
    ("huge", {"type": "bytes", "logicalType": "decimal", "precision": 100_000, "scale": 3}),
)


def _deep_avro(levels: int) -> dict[str, Any]:
    schema: Any = "long"
    for level in range(levels):
        schema = _record(f"L{level}", ("x", schema))
    return schema  # type: ignore[no-any-return]


READING_PROTO = """syntax = "proto3";
package fuzz.v1;
// a comment with a brace { and the word message Decoy
message Reading {
  string sensor_id = 1;
  int64 timestamp_ms = 2;
  double temperature = 3;
  repeated string tags = 4;
  map<string, int64> counts = 5;
  message Part { uint64 serial = 1; }
  repeated Part parts = 6;
  bytes blob = 7;
  Kind kind = 8;
}
enum Kind { A = 0; B = 1; }
message Alert {
  string sensor_id = 1;
  string text = 2;
}
"""
SECOND_PROTO = READING_PROTO.replace("package fuzz.v1;", "package fuzz.v2;\nmessage First {}")
NO_READING_PROTO = 'syntax = "proto3";\npackage fuzz.v3;\nmessage Other { string a = 1; }\n'

REDOS = {"type": "object", "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}}}
REMOTE_REF = {"type": "object", "properties": {"s": {"$ref": "http://127.0.0.1:9/x.json"}}}
BACKREFERENCE = {"type": "object", "properties": {"s": {"pattern": "(a)\\1"}}}
# Each level refers twice to the next: 2^30 evaluations of a few bytes, unbounded.
BOMB: dict[str, Any] = {
    "$defs": {f"a{i}": {"anyOf": [{"$ref": f"#/$defs/a{i + 1}"}] * 2} for i in range(30)},
    "$ref": "#/$defs/a0",
}
BOMB["$defs"]["a30"] = {"type": "string"}
UNIQUE = {"type": "array", "uniqueItems": True, "items": {"type": ["object", "integer", "array"]}}
TREE = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "$ref": "#/definitions/node",
    "definitions": {
        "node": {
            "type": "object",
            "properties": {
                "v": {"type": "number", "multipleOf": 0.5},
                "kids": {"type": "array", "items": {"$ref": "#/definitions/node"}},
                "name": {"type": "string", "maxLength": 20, "pattern": "^[a-z]+$"},
            },
            "patternProperties": {"^x-(a|aa)*$": {"type": "integer"}},
            "additionalProperties": False,
        }
    },
}


@dataclass
class Target:
    """One serde under fuzz: ``decode`` takes a record's bytes (a key and a value
    for a source target), ``ids`` the schema ids variants name."""

    name: str
    decode: Callable[[bytes], Any]
    ids: list[int] = field(default_factory=list)
    seeds: list[bytes] = field(default_factory=list)


class _Letters:
    """An Output that keeps dead letters (a source target's refusals)."""

    def __init__(self) -> None:
        self.reasons: list[str] = []

    def dead_letter(self, record: Any, reason: str) -> None:
        self.reasons.append(reason)


@dataclass
class _Record:
    key: bytes | None
    value: bytes | None
    topic: str = "fuzz"
    partition: int = 0
    offset: int = 0
    timestamp: int = 1_700_000_000_000
    headers: tuple[tuple[str, bytes], ...] = ()


def build_targets(proto_dir: Path | None = None) -> list[Target]:
    """Every target, its registry's schemas registered (Protobuf's .proto compiled
    by protoc into ``proto_dir``, a temporary folder if None)."""
    registry = MemoryRegistry()
    return [
        _json_model(),
        _json(),
        *_avro(registry),
        _protobuf(registry, proto_dir or Path(tempfile.mkdtemp(prefix="eddy-fuzz-proto-"))),
        _json_schema(registry),
        *_sources(registry),
        _replay_lines(),
        _consume(),
    ]


def _json_model() -> Target:
    serde = JsonModel(Reading)
    good = Reading(sensor_id="s1", timestamp_ms=1, temperature=20.5, tags=["a"])
    seeds = [
        good.model_dump_json().encode(),
        b'{"sensor_id": "s", "timestamp_ms": 1, "temperature": NaN}',
        b'{"sensor_id": "s", "timestamp_ms": 1, "temperature": 1e400, "extra": {"a": [1]}}',
        b'{"sensor_id":"s","timestamp_ms":1,"temperature":1,"parts":[{"serial":2,"ratio":0.5}]}',
    ]
    return Target("json-model", serde.decode, seeds=seeds)


def _json() -> Target:
    seeds = [b'{"a": [1, 2.5, "x", null, true]}', b"[1e400]", b'"\\ud800"', b"[[[[[]]]]]"]
    return Target("json", Json().decode, seeds=seeds)


def _replay_lines() -> Target:
    """The replay's input reader: a file is a producer too. Its refusal is a
    ReplayInputError, which stands for a DecodeError here."""

    def read(data: bytes) -> Any:
        try:
            return list(read_records(io.BytesIO(data), max_line_bytes=REPLAY_LINE_BYTES))
        except ReplayInputError as exc:
            raise DecodeError(str(exc)) from None

    seeds = [
        b'{"topic": "t", "record": {"a": 1}}\n\n{"watermark_ms": 5}\n',
        b"x" * 5_000,
        b"[" * 2_000,
    ]
    return Target("replay-lines", read, seeds=seeds)


def _consume() -> Target:
    """``eddy consume``'s printer: any record becomes one line, JSON and text, decoded
    or raw with the reason. A reason is a refusal (DecodeError) here."""
    decoder = Decoder(JsonModel(Reading))

    def read(data: bytes) -> Any:
        key, _, value = data.partition(b"\x00")
        record = _Record(key, value, headers=(("h", value[:8]),))
        line = decoder.decode(record)
        json.dumps(line)
        text_line(line)
        if "error" in line:
            raise DecodeError(line["error"])
        return line

    good = Reading(sensor_id="s1", timestamp_ms=1, temperature=20.5, tags=["a"])
    seeds = [b"s1\x00" + good.model_dump_json().encode(), b"\xff\x00\xfe{", b"k\x00[1e400]"]
    return Target("consume", read, seeds=seeds)


def _avro_body(schema: Any, value: Any) -> bytes:
    body = io.BytesIO()
    fastavro.schemaless_writer(body, fastavro.parse_schema(schema), value)
    return body.getvalue()


def _avro(registry: MemoryRegistry) -> list[Target]:
    subject = "fuzz-avro-value"
    writers = [
        (subject, READING_AVRO),
        (subject, OLDER_AVRO),
        (subject, RECURSIVE_AVRO),
        (subject, ZERO_BYTE_AVRO),
        (subject, _deep_avro(100)),
        (subject, DECIMAL_AVRO),
        ("elsewhere-value", _record("Reading", ("sensor_id", "string"))),
    ]
    ids = [registry.register(s, json.dumps(schema), "AVRO") for s, schema in writers]
    ids.append(registry.register(subject, '{"type": "object"}', "JSON"))  # another format
    ids.append(2_147_483_000)  # no such id
    full = {
        "sensor_id": "s1",
        "timestamp_ms": 1_700_000_000_000,
        "temperature": 20.5,
        "humidity": None,
        "tags": ["a", "b"],
        "parts": [{"serial": 7, "ratio": 0.5}],
        "extra": {"k": 1, "n": None},
        "kind": "B",
        "mac": b"\x01\x02\x03\x04\x05\x06",
        "price": Decimal("12.34"),
        "id": "6f1c3a3e-8a6b-4d8f-9a8e-0c1d2e3f4a5b",
        "when": datetime(2024, 1, 1),
    }
    seeds = [
        bytes([0]) + _avro_body(READING_AVRO, full),
        bytes([1]) + _avro_body(OLDER_AVRO, {**full, "location": "attic"}),
        bytes([2]) + b"\x02a\x02\x02a\x00",
        bytes([3]) + b"\x02a" + b"\xfe\xff\xff\xff\xff\xff\xff\xff\x7f",
        bytes([5]) + b"\x02a\x08\x01\x02\x03\x04",
    ]
    with_model = Avro(READING_AVRO).bind(Binding(registry, subject, Reading))
    dicts = Avro(READING_AVRO).bind(Binding(registry, subject, None))
    return [
        Target("avro-model", with_model.decode, ids, seeds),
        Target("avro-dicts", dicts.decode, ids, seeds),
    ]


def _protobuf(registry: MemoryRegistry, folder: Path) -> Target:
    pb = _compile_proto(folder, "fuzz_reading.proto", READING_PROTO)
    subject = "fuzz-proto-value"
    ids = [
        registry.register(subject, READING_PROTO, "PROTOBUF"),
        registry.register(subject, SECOND_PROTO, "PROTOBUF"),
        registry.register(subject, NO_READING_PROTO, "PROTOBUF"),
        registry.register("elsewhere-value", READING_PROTO + "\n", "PROTOBUF"),
        registry.register(subject, _descriptor_text(pb), "PROTOBUF"),
    ]
    message = pb.Reading(
        sensor_id="s1",
        timestamp_ms=2**62,
        temperature=1.5,
        tags=["a"],
        counts={"x": -1},
        parts=[pb.Reading.Part(serial=2**64 - 1)],
        blob=b"\x00\xff",
        kind=1,
    ).SerializeToString()
    alert = pb.Alert(sensor_id="s1", text="hot").SerializeToString()
    seeds = [
        bytes([0]) + b"\x00" + message,
        bytes([0]) + b"\x02\x02" + alert,
        bytes([1]) + b"\x02\x02" + message,
        bytes([0]) + b"\x04\x00\x00" + message,
    ]
    serde = Protobuf(pb.Reading, subjects=("extra-value",)).bind(
        Binding(registry, subject, Reading)
    )
    return Target("protobuf", serde.decode, ids, seeds)


def _descriptor_text(pb: ModuleType) -> str:
    """The file as Confluent's Python serializer registers it: its descriptor, base64."""
    file = FileDescriptorProto()
    pb.Reading.DESCRIPTOR.file.CopyToProto(file)
    return base64.b64encode(file.SerializeToString()).decode()


def _compile_proto(folder: Path, name: str, text: str) -> ModuleType:
    """``text`` compiled by protoc (grpcio-tools, a dev dependency) and imported."""
    from grpc_tools import protoc  # type: ignore[import-untyped]

    (folder / name).write_text(text)
    if protoc.main(["protoc", f"-I{folder}", f"--python_out={folder}", str(folder / name)]):
        raise RuntimeError(f"protoc failed on {name}")
    sys.path.insert(0, str(folder))
    try:
        return importlib.import_module(name.removesuffix(".proto") + "_pb2")
    finally:
        sys.path.remove(str(folder))


def _json_schema(registry: MemoryRegistry) -> Target:
    subject = "fuzz-json-value"
    schemas = [Reading.model_json_schema(), REDOS, REMOTE_REF, BACKREFERENCE, BOMB, UNIQUE, TREE]
    ids = [registry.register(subject, json.dumps(s), "JSON") for s in schemas]
    good = Reading(sensor_id="s1", timestamp_ms=1, temperature=2.5)
    seeds = [
        bytes([0]) + good.model_dump_json().encode(),
        bytes([1]) + b'{"s": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab"}',
        bytes([4]) + b'"x"',
        bytes([5]) + b"[{}, [1, 1.0], {}, 3]",
        bytes([6]) + b'{"v": 1.5, "kids": [{"v": 2, "name": "ab", "x-aa": 3}]}',
    ]
    serde = JsonSchema().bind(Binding(registry, subject, None))
    return Target("json-schema", serde.decode, ids, seeds)


def _sources(registry: MemoryRegistry) -> list[Target]:
    """Whole sources: the key (plain UTF-8, keyed by a field, or by an Avro key
    serde) and the value of one record, through :meth:`Source.read`."""
    avro_string = Avro('"string"').bind(Binding(registry, "fuzz-key", None))
    avro_bytes = Avro('"bytes"').bind(Binding(registry, "fuzz-key", None))
    key_record = _record("Key", ("id", "bytes"), ("n", "long"))
    avro_record = Avro(key_record).bind(Binding(registry, "fuzz-key", None))
    key_ids = [
        avro_string.prepare(),
        avro_bytes.prepare(),
        avro_record.prepare(),
    ]
    sources = [
        Source("fuzz", Json()),
        Source("fuzz", JsonModel(Reading), record_key=lambda r: r.sensor_id),
        Source("fuzz", Json(), key_serde=avro_string),
        Source("fuzz", Json(), key_serde=avro_bytes, require_key=True),
        Source("fuzz", Json(), key_serde=avro_record),
    ]
    seeds = [
        bytes([0, 2]) + b"s1" + b'{"a": 1}',
        bytes([1, 2]) + b"s1" + b'{"sensor_id": "s1", "timestamp_ms": 1, "temperature": 1}',
        bytes([2, 7]) + wire.header(key_ids[0]) + b"\x04s1" + b"{}",
        bytes([3, 8]) + wire.header(key_ids[1]) + b"\x06\xff\xfe\x00" + b"{}",
        bytes([4, 9]) + wire.header(key_ids[2]) + b"\x04\x01\x02\x02" + b"[]",
    ]

    def read(data: bytes) -> Any:
        """``[source][key length][key][value]``: a key length of 255 is no key."""
        if len(data) < 2:
            raise DecodeError("too short for a source input")
        source = sources[data[0] % len(sources)]
        length = data[1]
        key = None if length == 255 else data[2 : 2 + length]
        value = data[2 + (0 if key is None else len(key)) :]
        letters = _Letters()
        read = source.read(_Record(key, value), letters)  # type: ignore[arg-type]
        if read is None and not letters.reasons:
            raise AssertionError("a record was dropped without a dead letter")
        if read is not None:
            for element_key, _ in read.elements:
                if element_key is not None and not isinstance(element_key, str):
                    raise AssertionError(f"a key that is not a str: {element_key!r}")
        if letters.reasons:
            raise DecodeError(letters.reasons[0])
        return read

    def decode_key(data: bytes) -> Any:
        serdes = (avro_string, avro_bytes, avro_record)
        return as_key(serdes[data[0] % 3].decode(data[1:])) if data else None

    return [
        Target("source", read, seeds=seeds),
        Target("key-serde", decode_key, seeds=[bytes([0]) + wire.header(key_ids[0]) + b"\x02a"]),
    ]


def record_of(target: Target, data: bytes) -> bytes:
    """The record a fuzz payload stands for: a header naming one of the target's
    ids (by the first byte), then the rest; or the rest as it is."""
    if not target.ids:
        return data
    if not data:
        return data
    variant = data[0]
    if variant >= RAW or variant >= len(target.ids) * 8:
        return data[1:]
    return wire.header(target.ids[variant % len(target.ids)]) + data[1:]


def run_one(targets: list[Target], data: bytes) -> tuple[str, bool]:
    """Feed one input to the target its first byte picks; the target's name, and
    whether it decoded (True) or was refused with a DecodeError (False).

    Raises:
        Exception: anything but a DecodeError: a finding.
    """
    if not data:
        return "none", False
    target = targets[data[0] % len(targets)]
    try:
        target.decode(record_of(target, data[1:]))
    except DecodeError as exc:
        if not exc.reason or "\n" in exc.reason:
            raise AssertionError(f"a reason that is not one line: {exc.reason!r}") from None
        return target.name, False
    return target.name, True


def seed_inputs(targets: list[Target]) -> list[bytes]:
    """The corpus a run starts from: each target's seeds, addressed to it."""
    return [bytes([n]) + seed for n, target in enumerate(targets) for seed in target.seeds]
