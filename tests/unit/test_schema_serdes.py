"""The schema-registry serdes against an in-memory registry: the wire format's
errors, Avro's resolution rules, JSON Schema and Protobuf evolution, output
registration, and the settings a worker needs. The real registry is in
tests/integration/test_schema_registry.py."""

from __future__ import annotations

import io
import json
from typing import Any

import fastavro
import pytest
from pydantic import BaseModel, ConfigDict

from eddy import Avro, ConfigError, DecodeError, EncodeError, JsonSchema, Protobuf, Topic
from eddy.pipeline.source import as_key
from eddy.schemas import wire
from eddy.schemas.base import Binding
from eddy.schemas.binder import SchemaBinder
from eddy.schemas.registry import RegisteredSchema, SchemaRejected
from eddy.schemas.settings import RegistrySettings
from tests.support.registry import compile_proto


class FakeRegistry:
    """What a bound serde asks of :class:`eddy.schemas.registry.SchemaRegistry`."""

    url = "http://registry.test"

    def __init__(self) -> None:
        self.schemas: dict[int, RegisteredSchema] = {}
        self.subjects: dict[str, list[int]] = {}
        self.refuse: set[str] = set()
        self.asked: list[int] = []

    def add(self, text: str, schema_type: str = "AVRO", subject: str = "readings-value") -> int:
        """``text``'s id (one per text, as a registry gives), a version of ``subject``."""
        found = next((s for s in self.schemas.values() if s.text == text), None)
        schema_id = len(self.schemas) + 1 if found is None else found.schema_id
        subjects = frozenset({subject}) | (found.subjects if found else frozenset())
        self.schemas[schema_id] = RegisteredSchema(schema_id, schema_type, text, subjects)
        return schema_id

    def schema(self, schema_id: int) -> RegisteredSchema | None:
        self.asked.append(schema_id)
        return self.schemas.get(schema_id)

    def known(self, schema_id: int) -> bool:
        return True

    def forget(self, schema_id: int) -> None:
        pass

    async def prefetch(self, schema_ids: Any) -> None:
        pass

    def register(self, subject: str, text: str, schema_type: str) -> int:
        if subject in self.refuse:
            raise SchemaRejected(f"the schema registry refused the schema of subject {subject}")
        schema_id = self.add(text, schema_type, subject)
        self.subjects.setdefault(subject, []).append(schema_id)
        return schema_id

    def lookup(self, subject: str, text: str, schema_type: str) -> int | None:
        ids = self.subjects.get(subject, [])
        return next((i for i in ids if self.schemas[i].text == text), None)


class Reading(BaseModel):
    sensor_id: str
    temperature: float
    humidity: float | None = None


V1 = {
    "type": "record",
    "name": "Reading",
    "fields": [
        {"name": "sensor_id", "type": "string"},
        {"name": "temperature", "type": "float"},
        {"name": "location", "type": "string", "default": ""},
    ],
}
V2 = {
    "type": "record",
    "name": "Reading",
    "fields": [
        {"name": "sensor_id", "type": "string"},
        {"name": "temperature", "type": "double"},
        {"name": "humidity", "type": ["null", "double"], "default": None},
    ],
}


def avro_record(
    registry: FakeRegistry,
    schema: dict[str, Any],
    value: dict[str, Any],
    subject: str = "readings-value",
) -> bytes:
    """A record as a Confluent serializer writes it: header, then the Avro body."""
    schema_id = registry.add(json.dumps(schema), subject=subject)
    body = io.BytesIO()
    fastavro.schemaless_writer(body, fastavro.parse_schema(schema), value)
    return wire.header(schema_id) + body.getvalue()


def bind(serde: Any, registry: FakeRegistry, model: Any = Reading, auto: bool = True) -> Any:
    return serde.bind(Binding(registry, "readings-value", model, auto))  # type: ignore[arg-type]


@pytest.fixture
def registry() -> FakeRegistry:
    return FakeRegistry()


# -- the wire format -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (None, "empty value (tombstone)"),
        (b'{"a": 1}', "magic byte 0x7b, expected 0x00"),
        (b"\x00\x00\x01", "truncated: 3 bytes, shorter than the schema registry's 5-byte header"),
    ],
)
def test_a_record_not_in_the_wire_format_is_refused_with_the_reason(
    registry: FakeRegistry, raw: bytes | None, reason: str
) -> None:
    with pytest.raises(DecodeError) as refused:
        bind(Avro(V2), registry).decode(raw)
    assert reason in refused.value.reason


def test_an_unknown_schema_id_is_refused_naming_it(registry: FakeRegistry) -> None:
    with pytest.raises(DecodeError, match="unknown schema id 42: the schema registry"):
        bind(Avro(V2), registry).decode(wire.header(42) + b"\x02a")


def test_each_writer_schema_is_asked_for_once(registry: FakeRegistry) -> None:
    serde = bind(Avro(V2), registry)
    record = avro_record(registry, V2, {"sensor_id": "s1", "temperature": 1.0, "humidity": None})
    for _ in range(3):
        serde.decode(record)
    assert registry.asked == [1]


def test_protobuf_message_indexes_round_trip() -> None:
    for indexes in ([0], [1], [2, 0, 5], [300]):
        payload = memoryview(wire.write_indexes(indexes) + b"rest")
        read, start = wire.read_indexes(payload)
        assert (read, bytes(payload[start:])) == (indexes, b"rest")
    assert wire.write_indexes([0]) == b"\x00"


# -- Avro --------------------------------------------------------------------------------


def test_avro_reads_an_older_and_a_newer_schema_into_the_model(registry: FakeRegistry) -> None:
    serde = bind(Avro(V2), registry)
    old = avro_record(registry, V1, {"sensor_id": "s1", "temperature": 20.5, "location": "attic"})
    new = avro_record(registry, V2, {"sensor_id": "s2", "temperature": 21.5, "humidity": 0.4})
    assert serde.decode(old) == Reading(sensor_id="s1", temperature=20.5)  # float -> double
    assert serde.decode(new) == Reading(sensor_id="s2", temperature=21.5, humidity=0.4)


def test_an_avro_schema_that_cannot_be_resolved_is_refused_never_half_read(
    registry: FakeRegistry,
) -> None:
    renamed = {"type": "record", "name": "Reading", "fields": [{"name": "id", "type": "string"}]}
    record = avro_record(registry, renamed, {"id": "s1"})
    with pytest.raises(DecodeError) as refused:
        bind(Avro(V2), registry).decode(record)
    assert refused.value.reason.startswith("schema id 1 cannot be read as subject readings-value")
    assert "sensor_id" in refused.value.reason


def test_a_truncated_or_overlong_avro_body_is_refused(registry: FakeRegistry) -> None:
    serde = bind(Avro(V2), registry)
    record = avro_record(registry, V2, {"sensor_id": "s1", "temperature": 1.0, "humidity": None})
    with pytest.raises(DecodeError, match="truncated or corrupt"):
        serde.decode(record[:8])
    with pytest.raises(DecodeError, match="3 bytes after the record"):
        serde.decode(record + b"xyz")


def test_a_value_that_breaks_the_model_is_refused_naming_the_field(registry: FakeRegistry) -> None:
    class Strict(BaseModel):
        sensor_id: str
        temperature: float
        humidity: float  # required here, null in the record

    record = avro_record(registry, V2, {"sensor_id": "s1", "temperature": 1.0, "humidity": None})
    with pytest.raises(DecodeError, match=r"schema id 1: humidity: Input should be a valid number"):
        bind(Avro(V2), registry, Strict).decode(record)


def test_avro_output_registers_its_schema_on_first_use(registry: FakeRegistry) -> None:
    serde = bind(Avro(V2), registry)
    encoded = serde.encode(Reading(sensor_id="s1", temperature=2.0))
    assert registry.subjects == {"readings-value": [1]}
    assert encoded[:5] == wire.header(1)
    assert serde.decode(encoded) == Reading(sensor_id="s1", temperature=2.0)
    with pytest.raises(EncodeError, match="cannot write"):
        serde.encode({"sensor_id": "s1", "temperature": "warm"})


def test_without_auto_registration_a_missing_subject_is_a_config_error(
    registry: FakeRegistry,
) -> None:
    serde = bind(Avro(V2), registry, auto=False)
    with pytest.raises(ConfigError, match="EDDY_SCHEMA_REGISTRY_AUTO_REGISTER is false"):
        serde.prepare()
    registry.register("readings-value", serde.text, "AVRO")
    assert serde.prepare() == 1


def test_a_refused_output_schema_says_so(registry: FakeRegistry) -> None:
    registry.refuse.add("readings-value")
    with pytest.raises(SchemaRejected, match="refused the schema of subject readings-value"):
        bind(Avro(V2), registry).prepare()


def test_a_schema_id_of_another_format_is_refused(registry: FakeRegistry) -> None:
    schema_id = registry.add('{"type": "object"}', "JSON")
    with pytest.raises(DecodeError, match="is a JSON schema; subject readings-value is read as"):
        bind(Avro(V2), registry).decode(wire.header(schema_id) + b"{}")


# -- JSON Schema ---------------------------------------------------------------------------


def test_json_schema_reads_additions_and_refuses_what_the_writer_schema_forbids(
    registry: FakeRegistry,
) -> None:
    newer = Reading.model_json_schema()
    newer["properties"]["battery"] = {"type": "number"}
    schema_id = registry.add(json.dumps(newer), "JSON")
    serde = bind(JsonSchema(), registry)
    record = {"sensor_id": "s1", "temperature": 3.0, "battery": 0.9}
    assert serde.decode(wire.header(schema_id) + json.dumps(record).encode()) == Reading(
        sensor_id="s1", temperature=3.0
    )
    with pytest.raises(DecodeError, match="schema id 1: temperature: 'hot' is not of type"):
        serde.decode(wire.header(schema_id) + b'{"sensor_id": "s1", "temperature": "hot"}')


def test_json_schema_output_registers_the_models_schema(registry: FakeRegistry) -> None:
    encoded = bind(JsonSchema(), registry).encode(Reading(sensor_id="s1", temperature=1.0))
    assert json.loads(registry.schemas[1].text) == Reading.model_json_schema()
    assert json.loads(encoded[5:]) == {"sensor_id": "s1", "temperature": 1.0, "humidity": None}


# -- Protobuf --------------------------------------------------------------------------------

PROTO_V1 = """syntax = "proto3";
package unit.v1;
message Reading {
  string sensor_id = 1;
  double temperature = 2;
}
"""
PROTO_V2 = PROTO_V1.replace("unit.v1", "unit.v2").replace(
    "double temperature = 2;", "double temperature = 2;\n  double battery = 7;"
)


def test_protobuf_reads_a_newer_message_ignoring_its_unknown_fields(
    registry: FakeRegistry, tmp_path: Any
) -> None:
    v1 = compile_proto(tmp_path, "unit_reading_v1.proto", PROTO_V1)
    v2 = compile_proto(tmp_path, "unit_reading_v2.proto", PROTO_V2)
    schema_id = registry.add(PROTO_V2, "PROTOBUF")
    newer = v2.Reading(sensor_id="s1", temperature=4.5, battery=0.9).SerializeToString()
    serde = bind(Protobuf(v1.Reading, schema=PROTO_V1), registry)
    assert serde.decode(wire.header(schema_id) + b"\x00" + newer) == Reading(
        sensor_id="s1", temperature=4.5
    )
    with pytest.raises(DecodeError, match=r"not a unit\.v1\.Reading"):
        serde.decode(wire.header(schema_id) + b"\x00\x0a\x09s1")
    encoded = serde.encode({"sensor_id": "s2", "temperature": 1.0})
    assert serde.decode(encoded) == Reading(sensor_id="s2", temperature=1.0)
    with pytest.raises(EncodeError, match="has no field named"):
        serde.encode(Reading(sensor_id="s2", temperature=1.0, humidity=0.5))


PROTO_WIDE = """syntax = "proto3";
package unit.wide;
message Part {
  uint64 serial = 1;
}
message Batch {
  int64 timestamp_ms = 1;
  repeated sint64 offsets_ms = 2;
  map<int64, int64> counts = 3;
  Part part = 4;
  repeated Part parts = 5;
  int32 small = 6;
}
"""


class Part(BaseModel):
    model_config = ConfigDict(strict=True)
    serial: int


class Batch(BaseModel):
    model_config = ConfigDict(strict=True)
    timestamp_ms: int
    offsets_ms: list[int]
    counts: dict[int, int]
    part: Part
    parts: list[Part]
    small: int


def test_protobuf_64_bit_integers_reach_a_strict_model_as_integers(
    registry: FakeRegistry, tmp_path: Any
) -> None:
    # Protobuf's JSON form has them as strings: a strict model refused every record.
    pb = compile_proto(tmp_path, "unit_wide.proto", PROTO_WIDE)
    big = 2**62 + 1
    message = pb.Batch(
        timestamp_ms=1_700_000_000_000,
        offsets_ms=[-big, 5],
        counts={big: big, -1: 2},
        part=pb.Part(serial=2**64 - 1),
        parts=[pb.Part(serial=1), pb.Part(serial=big)],
        small=-7,
    )
    schema_id = registry.add(PROTO_WIDE, "PROTOBUF")
    serde = bind(Protobuf(pb.Batch, schema=PROTO_WIDE), registry, model=Batch)
    raw = wire.header(schema_id) + b"\x02\x02" + message.SerializeToString()  # Batch: index 1
    assert serde.decode(raw) == Batch(
        timestamp_ms=1_700_000_000_000,
        offsets_ms=[-big, 5],
        counts={big: big, -1: 2},
        part=Part(serial=2**64 - 1),
        parts=[Part(serial=1), Part(serial=big)],
        small=-7,
    )


# -- keys, settings ---------------------------------------------------------------------------


def test_a_decoded_key_is_a_str_or_its_canonical_json() -> None:
    assert as_key("s1") == "s1"
    assert as_key({"b": 1, "a": "x"}) == '{"a":"x","b":1}'


def test_a_registry_serde_without_a_registry_url_fails_at_build_saying_what_to_set() -> None:
    binder = SchemaBinder(RegistrySettings(url=None))
    with pytest.raises(ConfigError, match="declared Avro: set EDDY_SCHEMA_REGISTRY_URL"):
        binder.bind(Avro(V2), "readings-value", Reading)


def test_an_app_with_a_registry_topic_and_no_url_does_not_build(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from eddy import App
    from eddy.settings import Settings, build

    monkeypatch.delenv("EDDY_SCHEMA_REGISTRY_URL", raising=False)
    app = App("avro")
    app.stream(Topic("in", Reading, serde=Avro(V2)), name="copy").to(Topic("out", Reading))
    settings = build(Settings, {"agents": ("copy",), "state_dir": tmp_path})
    with pytest.raises(ConfigError, match="EDDY_SCHEMA_REGISTRY_URL"):
        app.build(settings)


def test_an_unbound_serde_says_it_needs_the_app_built() -> None:
    with pytest.raises(TypeError, match="bound to a schema registry when the app builds"):
        Avro(V2).decode(b"\x00\x00\x00\x00\x01")


# -- the test driver ------------------------------------------------------------------------


def test_the_test_driver_runs_registry_topics_through_their_serdes() -> None:
    from eddy import App, TestDriver

    app = App("avro")
    readings = Topic(
        "readings", Reading, key="sensor_id", serde=Avro(V2), key_serde=Avro('"string"')
    )
    doubled = Topic("doubled", Reading, serde=Avro(V2), key_serde=Avro('"string"'))
    app.stream(readings, name="double").map(
        lambda r: r.model_copy(update={"temperature": r.temperature * 2})
    ).to(doubled)
    with TestDriver(app) as driver:
        driver.send(readings, Reading(sensor_id="s1", temperature=1.5))
        driver.send(readings, b'{"sensor_id": "s1"}')
        got = driver.read(doubled)
        reasons = [letter.reason for letter in driver.dead_letters()]
    assert [(o.key, o.value) for o in got] == [("s1", Reading(sensor_id="s1", temperature=3.0))]
    assert reasons == ["not in the schema registry's wire format: magic byte 0x7b, expected 0x00"]
