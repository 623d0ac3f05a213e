"""Writer schemas and records that must not stop a worker: each is refused with a
one-line reason (its records dead-lettered), quickly, whatever the bytes say.
Recursive or too deep Avro, arrays of items that take no bytes, oversized
decimals and records; JSON Schema's catastrophic patterns, remote references
and reference bombs; Protobuf records of another message; schemas of another
subject."""

from __future__ import annotations

import base64
import io
import json
import time
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import fastavro
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from eddy import Avro, ConfigError, DecodeError, JsonSchema, Protobuf, Topic
from eddy.schemas import wire
from eddy.schemas.base import Binding, Limits
from eddy.schemas.memory import MemoryRegistry
from tests.support.registry import compile_proto

SUBJECT = "readings-value"


def record(name: str, *fields: tuple[str, Any]) -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": [{"name": n, "type": t} for n, t in fields]}


READING = record("Reading", ("sensor_id", "string"), ("temperature", "double"))
RECURSIVE = record("Reading", ("sensor_id", "string"), ("next", ["null", "Reading"]))
NULLS = record("Reading", ("sensor_id", "string"), ("marks", {"type": "array", "items": "null"}))
EMPTIES = record(
    "Reading", ("sensor_id", "string"), ("marks", {"type": "array", "items": record("E")})
)
FIXED_ZERO = record(
    "Reading",
    ("sensor_id", "string"),
    ("marks", {"type": "array", "items": {"type": "fixed", "name": "Z", "size": 0}}),
)
PRICED = record(
    "Reading",
    ("sensor_id", "string"),
    ("price", {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}),
)


def zigzag(n: int) -> bytes:
    return wire.write_indexes([n])[1:]  # the count's byte, then n's


def deep(levels: int) -> dict[str, Any]:
    schema: Any = "long"
    for level in range(levels):
        schema = record(f"L{level}", ("x", schema))
    return schema  # type: ignore[no-any-return]


@pytest.fixture
def registry() -> MemoryRegistry:
    return MemoryRegistry()


def avro(registry: MemoryRegistry, reader: Any = READING, **options: Any) -> Any:
    limits = Limits(**options)
    return Avro(reader).bind(Binding(registry, SUBJECT, None, limits=limits))


def registered(
    registry: MemoryRegistry, schema: Any, kind: str = "AVRO", subject: str = SUBJECT
) -> int:
    text = schema if isinstance(schema, str) else json.dumps(schema)
    return registry.register(subject, text, kind)


@pytest.fixture
def quickly() -> Iterator[None]:
    started = time.process_time()
    yield
    assert time.process_time() - started < 0.5, "took too long to refuse"


# -- Avro ---------------------------------------------------------------------------------


@pytest.mark.usefixtures("quickly")
def test_a_recursive_writer_schema_is_refused_before_any_record_is_read(
    registry: MemoryRegistry,
) -> None:
    schema_id = registered(registry, RECURSIVE)
    nested = b"\x02a" + b"\x02\x02a" * 50_000 + b"\x00"  # 150 KB: once enough to crash
    with pytest.raises(DecodeError) as refused:
        avro(registry).decode(wire.header(schema_id) + nested)
    assert refused.value.reason == (
        f"schema id {schema_id} is refused: recursive (Reading -> Reading): a record could "
        "nest without bound"
    )


def test_a_recursive_declared_schema_stops_the_app_from_building(registry: MemoryRegistry) -> None:
    with pytest.raises(ConfigError, match=r"refused: recursive \(Reading -> Reading\)"):
        Avro(RECURSIVE).bind(Binding(registry, SUBJECT, None))


@pytest.mark.parametrize(
    ("schema", "items"), [(NULLS, "null"), (EMPTIES, "record E"), (FIXED_ZERO, "fixed Z")]
)
@pytest.mark.usefixtures("quickly")
def test_an_array_of_items_that_take_no_bytes_is_refused(
    registry: MemoryRegistry, schema: dict[str, Any], items: str
) -> None:
    schema_id = registered(registry, schema)
    claims_2_62 = b"\x02a" + b"\xfe\xff\xff\xff\xff\xff\xff\xff\x7f"  # 11 bytes
    with pytest.raises(DecodeError) as refused:
        avro(registry).decode(wire.header(schema_id) + claims_2_62)
    assert refused.value.reason == (
        f"schema id {schema_id} is refused: an array of {items}, whose items take no bytes: "
        "a record of a few bytes could claim 2^62 of them"
    )


def test_schema_nesting_is_bounded_by_max_depth(registry: MemoryRegistry) -> None:
    shallow, deeper = registered(registry, deep(8)), registered(registry, deep(9))
    serde = avro(registry, deep(8), max_depth=8)
    assert serde.decode(wire.header(shallow) + b"\x02") == {"x": {"x": {"x": {"x": {"x": {
        "x": {"x": {"x": 1}}}}}}}}  # fmt: skip
    with pytest.raises(DecodeError, match=r"refused: nested deeper than 8 levels"):
        serde.decode(wire.header(deeper) + b"\x02")


def test_a_decimal_longer_than_its_precision_allows_is_refused_before_it_is_built(
    registry: MemoryRegistry,
) -> None:
    serde = avro(registry, PRICED)
    schema_id = registered(registry, PRICED)
    cents = (1234).to_bytes(2, "big", signed=True)
    decoded = serde.decode(wire.header(schema_id) + b"\x02a" + zigzag(2) + cents)
    assert decoded["price"] == Decimal("12.34")
    started = time.process_time()
    with pytest.raises(DecodeError) as refused:
        serde.decode(wire.header(schema_id) + b"\x02a" + b"\xc0\x9a\x0c" + b"\x7f" * 100_000)
    assert time.process_time() - started < 0.1  # building it took a second
    assert refused.value.reason == (
        f"schema id {schema_id}: a decimal of 100000 bytes, more than precision 9 allows "
        "(5 bytes, at most 1000 digits)"
    )


def test_a_record_larger_than_max_record_bytes_is_refused(registry: MemoryRegistry) -> None:
    schema_id = registered(registry, READING)
    big = wire.header(schema_id) + b"\x02a" + b"\x00" * 2_000
    with pytest.raises(DecodeError) as refused:
        avro(registry, max_record_bytes=1_024).decode(big)
    assert refused.value.reason == (
        "2007 bytes, more than EDDY_SCHEMA_REGISTRY_MAX_RECORD_BYTES=1024"
    )


# -- subjects -----------------------------------------------------------------------------


def body(schema: Any, value: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), value)
    return out.getvalue()


def test_a_schema_of_another_subject_is_refused_unless_the_serde_names_it(
    registry: MemoryRegistry,
) -> None:
    schema_id = registered(registry, READING, subject="elsewhere-value")
    raw = wire.header(schema_id) + body(READING, {"sensor_id": "s1", "temperature": 2.0})
    with pytest.raises(DecodeError) as refused:
        avro(registry).decode(raw)
    assert refused.value.reason == (
        f"schema id {schema_id} is not a version of subject {SUBJECT} (its subjects: "
        "elsewhere-value): a record must be written with a schema of its topic's subject, "
        "or of a subject the topic's serde names in subjects="
    )
    named = Avro(READING, subjects=["elsewhere-value"]).bind(Binding(registry, SUBJECT, None))
    assert named.decode(raw) == {"sensor_id": "s1", "temperature": 2.0}


def test_a_refused_id_is_checked_again_after_the_not_found_ttl(
    registry: MemoryRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [100.0]
    monkeypatch.setattr("eddy.schemas.base.time.monotonic", lambda: now[0])
    schema_id = registered(registry, READING, subject="elsewhere-value")
    raw = wire.header(schema_id) + body(READING, {"sensor_id": "s1", "temperature": 2.0})
    serde = avro(registry, not_found_ttl_ms=5_000)
    with pytest.raises(DecodeError, match="is not a version of subject"):
        serde.decode(raw)
    registered(registry, READING)  # now a version of the topic's subject too
    now[0] += 4.9
    with pytest.raises(DecodeError, match="is not a version of subject"):
        serde.decode(raw)
    now[0] += 0.2
    assert serde.decode(raw) == {"sensor_id": "s1", "temperature": 2.0}


# -- JSON Schema ----------------------------------------------------------------------------


def json_schema(registry: MemoryRegistry, schema: dict[str, Any]) -> tuple[Any, int]:
    schema_id = registered(registry, schema, "JSON")
    return JsonSchema().bind(Binding(registry, SUBJECT, None)), schema_id


@pytest.mark.usefixtures("quickly")
def test_a_catastrophic_pattern_runs_in_linear_time(registry: MemoryRegistry) -> None:
    redos = {"type": "object", "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}}}
    serde, schema_id = json_schema(registry, redos)
    evil = json.dumps({"s": "a" * 5_000 + "b"}).encode()  # 49 bytes took 18 s on re
    with pytest.raises(
        DecodeError, match=r"s: 'a{40}'\.\.\. \(5001 characters\) does not match '\^\(a\+\)\+\$'"
    ):
        serde.decode(wire.header(schema_id) + evil)
    assert serde.decode(wire.header(schema_id) + b'{"s": "aaa"}') == {"s": "aaa"}


@pytest.mark.usefixtures("quickly")
def test_pattern_properties_and_additional_properties_run_in_linear_time(
    registry: MemoryRegistry,
) -> None:
    schema = {"patternProperties": {"^(a+)+$": {"type": "integer"}}, "additionalProperties": False}
    serde, schema_id = json_schema(registry, schema)
    with pytest.raises(DecodeError, match="Additional properties are not allowed"):
        serde.decode(wire.header(schema_id) + json.dumps({"a" * 5_000 + "b": 1}).encode())
    with pytest.raises(DecodeError, match="'x' is not of type 'integer'"):
        serde.decode(wire.header(schema_id) + b'{"aaa": "x"}')


def test_a_pattern_re2_cannot_run_refuses_the_schema(registry: MemoryRegistry) -> None:
    backreference = {"properties": {"s": {"pattern": "^(a)\\1$"}}}
    serde, schema_id = json_schema(registry, backreference)
    with pytest.raises(DecodeError) as refused:
        serde.decode(wire.header(schema_id) + b'{"s": "aa"}')
    assert refused.value.reason.startswith(
        f"schema id {schema_id} is refused: pattern '^(a)\\\\1$' is not one RE2 runs "
        "(invalid escape sequence: \\1)"
    )


@pytest.mark.parametrize(
    "ref", ["http://127.0.0.1:9/reading.json", "other.json#/x", "file:///etc/passwd"]
)
def test_a_reference_outside_the_schema_is_refused_and_never_fetched(
    registry: MemoryRegistry, ref: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_network(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the worker opened a URL")

    monkeypatch.setattr("urllib.request.urlopen", no_network)
    schema = {"$id": "https://schemas.test/root.json", "properties": {"s": {"$ref": ref}}}
    serde, schema_id = json_schema(registry, schema)
    with pytest.raises(DecodeError) as refused:
        serde.decode(wire.header(schema_id) + b'{"s": 1}')
    assert refused.value.reason == (
        f"schema id {schema_id} is refused: $ref {ref!r} points outside the schema: Eddy "
        "resolves references only inside the schema and never fetches a URL"
    )


def test_references_inside_the_schema_and_to_a_metaschema_resolve(
    registry: MemoryRegistry,
) -> None:
    schema = {
        "$id": "https://schemas.test/root.json",
        "properties": {
            "n": {"$ref": "#/$defs/n"},
            "m": {"$ref": "root.json#/$defs/n"},
            "meta": {"$ref": "https://json-schema.org/draft/2020-12/schema"},
        },
        "$defs": {"n": {"type": "integer"}},
    }
    serde, schema_id = json_schema(registry, schema)
    good = {"n": 1, "m": 2, "meta": {"type": "string"}}
    assert serde.decode(wire.header(schema_id) + json.dumps(good).encode()) == good
    with pytest.raises(DecodeError, match="meta/type: 'nope' is not valid"):
        serde.decode(wire.header(schema_id) + b'{"meta": {"type": "nope"}}')


@pytest.mark.usefixtures("quickly")
def test_references_that_multiply_the_work_on_one_value_are_refused(
    registry: MemoryRegistry,
) -> None:
    levels = {f"a{i}": {"anyOf": [{"$ref": f"#/$defs/a{i + 1}"}] * 2} for i in range(30)}
    bomb = {"$defs": {**levels, "a30": {"type": "string"}}, "$ref": "#/$defs/a0"}
    serde, schema_id = json_schema(registry, bomb)
    with pytest.raises(DecodeError) as refused:
        serde.decode(wire.header(schema_id) + b"1")
    assert refused.value.reason == (
        f"schema id {schema_id} is refused: one value would be checked against more than 256 "
        "subschemas: its references and anyOf/oneOf/allOf branches multiply the work"
    )


def test_a_reference_loop_on_one_value_is_refused(registry: MemoryRegistry) -> None:
    serde, schema_id = json_schema(registry, {"$defs": {"a": {"$ref": "#"}}, "$ref": "#/$defs/a"})
    with pytest.raises(DecodeError, match="come back to the same value without going into it"):
        serde.decode(wire.header(schema_id) + b"1")


def test_a_recursive_schema_of_nested_values_is_read(registry: MemoryRegistry) -> None:
    tree = {
        "$ref": "#/$defs/node",
        "$defs": {
            "node": {
                "type": "object",
                "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
            }
        },
    }
    serde, schema_id = json_schema(registry, tree)
    value: dict[str, Any] = {"kids": [{"kids": [{"kids": []}]}, {}]}
    assert serde.decode(wire.header(schema_id) + json.dumps(value).encode()) == value
    too_deep = b'{"kids": [' * 500 + b"{}" + b"]}" * 500  # within orjson's 1,024 levels
    with pytest.raises(DecodeError, match="nested too deeply to validate"):
        serde.decode(wire.header(schema_id) + too_deep)


@pytest.mark.usefixtures("quickly")
def test_unique_items_is_checked_in_linear_time_with_json_equality(
    registry: MemoryRegistry,
) -> None:
    serde, schema_id = json_schema(registry, {"type": "array", "uniqueItems": True})
    objects = b"[" + b",".join(b'{"a": %d}' % i for i in range(20_000)) + b"]"
    assert len(serde.decode(wire.header(schema_id) + objects)) == 20_000
    for same in (b"[1, 1.0]", b'[{"a": 1, "b": 2}, {"b": 2, "a": 1}]', b"[[1], [1]]"):
        with pytest.raises(DecodeError, match="has non-unique elements"):
            serde.decode(wire.header(schema_id) + same)
    assert serde.decode(wire.header(schema_id) + b"[1, true, 0, false]") == [1, True, 0, False]


def test_a_json_schema_record_of_nan_or_an_overflow_is_refused(registry: MemoryRegistry) -> None:
    serde, schema_id = json_schema(registry, {"type": "object"})
    for raw in (b'{"t": NaN}', b'{"t": 1e400}'):
        with pytest.raises(DecodeError, match="not JSON"):
            serde.decode(wire.header(schema_id) + raw)


def test_a_declared_json_schema_with_a_remote_reference_stops_the_app_from_building(
    registry: MemoryRegistry,
) -> None:
    declared = JsonSchema({"properties": {"s": {"$ref": "https://schemas.test/s.json"}}})
    with pytest.raises(ConfigError, match="points outside the schema"):
        declared.bind(Binding(registry, SUBJECT, None))


# -- Protobuf -------------------------------------------------------------------------------

PROTO = """syntax = "proto3";
package safety.v1;
// message Decoy { }  (a comment: not a message)
message Reading {
  string sensor_id = 1;
  double temperature = 2;
  message Part { string name = 1; }
}
enum Unit { C = 0; }
message Alert {
  string sensor_id = 1;
  string text = 2;
}
"""


class Reading(BaseModel):
    sensor_id: str
    temperature: float


@pytest.fixture(scope="module")
def pb(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return compile_proto(tmp_path_factory.mktemp("proto"), "safety_reading.proto", PROTO)


def test_a_protobuf_record_of_another_message_is_refused(registry: MemoryRegistry, pb: Any) -> None:
    serde = Protobuf(pb.Reading).bind(Binding(registry, SUBJECT, Reading))
    schema_id = registered(registry, PROTO, "PROTOBUF")
    alert = pb.Alert(sensor_id="s1", text="hot").SerializeToString()
    reading = pb.Reading(sensor_id="s1", temperature=2.5).SerializeToString()
    assert serde.decode(wire.header(schema_id) + b"\x00" + reading) == Reading(
        sensor_id="s1", temperature=2.5
    )
    with pytest.raises(DecodeError) as refused:
        serde.decode(wire.header(schema_id) + wire.write_indexes([1]) + alert)
    assert refused.value.reason == (
        f"schema id {schema_id}: the record is Alert (message indexes [1]), not Reading: "
        "the topic is read as safety.v1.Reading"
    )
    with pytest.raises(DecodeError, match=r"the record is a message nested in Reading"):
        serde.decode(wire.header(schema_id) + wire.write_indexes([0, 0]) + b"\x0a\x01x")
    with pytest.raises(DecodeError, match=r"the record is no message \(index 7\)"):
        serde.decode(wire.header(schema_id) + wire.write_indexes([7]) + reading)


def test_protobuf_indexes_select_the_message_in_the_writers_schema(
    registry: MemoryRegistry, pb: Any
) -> None:
    # A newer version of the file, in another package, with a message before Reading.
    newer = PROTO.replace("safety.v1", "safety.v2").replace("// message", "message First {}\n//")
    schema_id = registered(registry, newer, "PROTOBUF")
    serde = Protobuf(pb.Reading).bind(Binding(registry, SUBJECT, Reading))
    reading = pb.Reading(sensor_id="s1", temperature=2.5).SerializeToString()
    assert serde.decode(wire.header(schema_id) + wire.write_indexes([1]) + reading) == Reading(
        sensor_id="s1", temperature=2.5
    )
    with pytest.raises(DecodeError, match=r"the record is First \(message indexes \[0\]\)"):
        serde.decode(wire.header(schema_id) + b"\x00" + reading)
    other = registered(registry, "syntax = 'proto3';\nmessage Other {}\n", "PROTOBUF")
    with pytest.raises(
        DecodeError, match=r"has no message Reading at its top level \(it has Other\)"
    ):
        serde.decode(wire.header(other) + b"\x00")


def test_a_writer_schema_registered_as_a_base64_descriptor_selects_by_name(
    registry: MemoryRegistry, pb: Any
) -> None:
    # Confluent's Python serializer registers the file's descriptor, not its text.
    from google.protobuf.descriptor_pb2 import FileDescriptorProto

    file = FileDescriptorProto()
    pb.Reading.DESCRIPTOR.file.CopyToProto(file)
    schema_id = registered(
        registry, base64.b64encode(file.SerializeToString()).decode(), "PROTOBUF"
    )
    serde = Protobuf(pb.Reading).bind(Binding(registry, SUBJECT, Reading))
    reading = pb.Reading(sensor_id="s1", temperature=2.5).SerializeToString()
    assert serde.decode(wire.header(schema_id) + b"\x00" + reading) == Reading(
        sensor_id="s1", temperature=2.5
    )
    with pytest.raises(DecodeError, match=r"the record is Alert \(message indexes \[1\]\)"):
        serde.decode(wire.header(schema_id) + wire.write_indexes([1]) + reading)


# -- any bytes ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def adversarial(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[Any, list[int]]]:
    """Serdes bound to a registry of good and adversarial schemas, with their ids."""
    registry = MemoryRegistry()
    avro_ids = [
        registered(registry, s)
        for s in (READING, RECURSIVE, NULLS, EMPTIES, PRICED, deep(100), record("R"))
    ]
    avro_ids.append(registered(registry, READING, subject="elsewhere-value"))
    json_ids = [
        registered(registry, s, "JSON")
        for s in (
            Reading.model_json_schema(),
            {"properties": {"s": {"pattern": "^(a+)+$"}}},
            {"type": "array", "uniqueItems": True},
            {"$ref": "http://127.0.0.1:9/x"},
        )
    ]
    pb = compile_proto(tmp_path_factory.mktemp("proto"), "safety_reading.proto", PROTO)
    proto_ids = [registered(registry, PROTO, "PROTOBUF")]
    binding = Binding(registry, SUBJECT, Reading)
    return [
        (Avro(READING).bind(binding), avro_ids),
        (Avro(PRICED).bind(Binding(registry, SUBJECT, None)), avro_ids),
        (JsonSchema().bind(binding), json_ids),
        (Protobuf(pb.Reading).bind(binding), proto_ids),
    ]


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(which=st.integers(0, 3), pick=st.integers(0, 50), payload=st.binary(max_size=200))
def test_any_bytes_under_any_schema_decode_or_are_refused_with_a_one_line_reason(
    adversarial: list[tuple[Any, list[int]]], which: int, pick: int, payload: bytes
) -> None:
    serde, ids = adversarial[which]
    raw = wire.header(ids[pick % len(ids)]) + payload if pick < 45 else payload
    started = time.process_time()
    reason = "decoded"
    try:
        serde.decode(raw)
    except DecodeError as exc:
        reason = exc.reason
    assert reason
    assert "\n" not in reason
    assert time.process_time() - started < 0.1


def test_a_topic_with_a_recursive_avro_schema_does_not_build(tmp_path: Any) -> None:
    from eddy import App
    from eddy.settings import Settings, build

    app = App("recursive")
    app.stream(Topic("in", None, serde=Avro(RECURSIVE)), name="copy").to(Topic("out"))
    settings = build(Settings, {"agents": ("copy",), "state_dir": tmp_path})
    from eddy.schemas.binder import SchemaBinder
    from eddy.schemas.settings import RegistrySettings

    binder = SchemaBinder(RegistrySettings(url="http://registry.test"))
    with pytest.raises(ConfigError, match="the Avro schema declared for it is refused: recursive"):
        app.build(settings, schemas=binder)
