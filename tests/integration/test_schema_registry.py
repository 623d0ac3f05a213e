"""Schema-registry topics on the real broker and a real registry (Apicurio, serving
Confluent's API): records written by confluent-kafka's registry-aware serializers
(an independent implementation of the wire format) are read by an agent as its
model, its Avro output is read back by confluent-kafka's deserializer, schemas
evolve under the registry's compatibility rule, and bad payloads are dead-lettered
with the reason."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable, Iterator
from copy import deepcopy
from types import ModuleType
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from pydantic import BaseModel

from eddy import App, Avro, ConfigError, JsonSchema, Protobuf, Topic
from eddy.schemas.registry import SchemaRejected
from eddy.settings import Settings
from eddy.worker import Worker
from tests.support.kafka import HOUR_AGO_MS, read_all, unique_settings
from tests.support.registry import reading_pb2, registry_env, registry_url  # noqa: F401

pytestmark = pytest.mark.integration


class Reading(BaseModel):
    sensor_id: str
    timestamp_ms: int
    temperature: float


class Tagged(BaseModel):
    """What the agent writes: which format a reading came in, and whether the
    agent's function was handed a ``Reading``."""

    sensor_id: str
    temperature: float
    source: str
    typed: bool


def avro_record(name: str, *fields: dict[str, Any]) -> dict[str, Any]:
    """An Avro record schema in ``eddy.test``: the schemas below differ in their
    name and fields only. The fields are copies, as if each schema were written
    out: a library that annotates a schema in place cannot change another."""
    fields_copy = deepcopy(list(fields))
    return {"type": "record", "name": name, "namespace": "eddy.test", "fields": fields_copy}


SENSOR_ID = {"name": "sensor_id", "type": "string"}
TIMESTAMP_MS = {"name": "timestamp_ms", "type": "long"}
TEMPERATURE = {"name": "temperature", "type": "double"}

READING_AVRO = avro_record("Reading", SENSOR_ID, TIMESTAMP_MS, TEMPERATURE)
TAGGED_AVRO = avro_record(
    "Tagged",
    SENSOR_ID,
    TEMPERATURE,
    {"name": "source", "type": "string"},
    {"name": "typed", "type": "boolean"},
)
STRING_KEY = '"string"'
ALIEN = avro_record("Reading", {"name": "id", "type": "string"}, {"name": "celsius", "type": "int"})


def tagger(source: str) -> Callable[[Any], Tagged]:
    def tag(reading: Any) -> Tagged:
        typed = type(reading) is Reading
        return Tagged(
            sensor_id=reading.sensor_id,
            temperature=reading.temperature,
            source=source,
            typed=typed,
        )

    return tag


@pytest.fixture
def sr(registry_url: str) -> SchemaRegistryClient:  # noqa: F811
    return SchemaRegistryClient({"url": registry_url})


def producer(settings: Settings) -> Producer:
    return Producer({"bootstrap.servers": settings.bootstrap_servers, "linger.ms": 5})


def send_all(p: Producer, topic: str, records: list[tuple[bytes | None, bytes]]) -> None:
    for key, value in records:
        p.produce(topic, value=value, key=key)
    assert p.flush(30) == 0


def consume(settings: Settings, topic: str, count: int, timeout_s: float = 60.0) -> Iterator[Any]:
    """``count`` committed records of ``topic`` read by confluent-kafka's consumer."""
    consumer = Consumer(
        {
            "bootstrap.servers": settings.bootstrap_servers,
            "group.id": f"check-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    got: list[Any] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(got) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message)
    finally:
        consumer.close()
    return iter(got)


def readings(n: int, sensor: str = "s1") -> list[dict[str, Any]]:
    return [
        {"sensor_id": sensor, "timestamp_ms": HOUR_AGO_MS + i, "temperature": 20.0 + i}
        for i in range(n)
    ]


def formats_app(pb2: ModuleType) -> App:
    app = App("formats")
    out = Topic("tagged", Tagged, serde=Avro(TAGGED_AVRO), key_serde=Avro(STRING_KEY))
    avro_in = Topic("avro-in", Reading, serde=Avro(READING_AVRO), key_serde=Avro(STRING_KEY))
    proto_in = Topic("proto-in", Reading, serde=Protobuf(pb2.Reading))
    json_in = Topic("json-in", Reading, serde=JsonSchema())
    app.stream(avro_in, name="from_avro").map(tagger("avro")).to(out)
    app.stream(proto_in, name="from_proto").map(tagger("protobuf")).to(out)
    app.stream(json_in, name="from_json").map(tagger("json_schema")).to(out)
    return app


async def test_an_agent_reads_avro_protobuf_and_json_schema_and_writes_avro(
    tmp_path: Any,
    registry_env: str,  # noqa: F811
    sr: SchemaRegistryClient,
    reading_pb2: ModuleType,  # noqa: F811
) -> None:
    settings = unique_settings(tmp_path, agents=("from_avro", "from_proto", "from_json"))
    worker = Worker(settings, formats_app(reading_pb2).build(settings))
    await worker.start()
    try:
        topic = settings.topic
        avro = AvroSerializer(sr, json.dumps(READING_AVRO))
        avro_key = AvroSerializer(sr, STRING_KEY)
        proto = ProtobufSerializer(reading_pb2.Reading, sr, {"use.deprecated.format": False})
        json_schema = JSONSerializer(json.dumps(Reading.model_json_schema()), sr)
        p = producer(settings)

        def ctx(name: str, field: str = MessageField.VALUE) -> SerializationContext:
            return SerializationContext(topic(name), field)

        send_all(
            p,
            topic("avro-in"),
            [
                (
                    avro_key(r["sensor_id"], ctx("avro-in", MessageField.KEY)),
                    avro(r, ctx("avro-in")),
                )
                for r in readings(5, "a1")
            ],
        )
        send_all(
            p,
            topic("proto-in"),
            [(b"p1", proto(reading_pb2.Reading(**r), ctx("proto-in"))) for r in readings(5, "p1")],
        )
        send_all(
            p,
            topic("json-in"),
            [(b"j1", json_schema(r, ctx("json-in"))) for r in readings(5, "j1")],
        )
        messages = await asyncio.to_thread(lambda: list(consume(settings, topic("tagged"), 15)))
    finally:
        await worker.stop()

    decode_value = AvroDeserializer(sr)
    decode_key = AvroDeserializer(sr)
    out_ctx = SerializationContext(settings.topic("tagged"), MessageField.VALUE)
    key_ctx = SerializationContext(settings.topic("tagged"), MessageField.KEY)
    got = [decode_value(m.value(), out_ctx) for m in messages]
    keys = {(m.key() and decode_key(m.key(), key_ctx)) for m in messages}
    assert sorted((g["source"], g["sensor_id"], g["temperature"]) for g in got) == sorted(
        (source, r["sensor_id"], r["temperature"])
        for source, sensor in (("avro", "a1"), ("protobuf", "p1"), ("json_schema", "j1"))
        for r in readings(5, sensor)
    )
    assert all(g["typed"] for g in got), "the agent was handed something else than a Reading"
    assert keys == {"a1", "p1", "j1"}
    # Eddy registered its output's schema under the topic's subject.
    registered = sr.get_latest_version(f"{settings.topic('tagged')}-value")
    assert json.loads(registered.schema.schema_str)["name"] == "Tagged"


V1 = avro_record(
    "Reading",
    SENSOR_ID,
    TIMESTAMP_MS,
    TEMPERATURE,
    {"name": "location", "type": "string", "default": ""},
)
# v2: a new optional field, and location removed (backward compatible).
V2 = avro_record(
    "Reading",
    SENSOR_ID,
    TIMESTAMP_MS,
    TEMPERATURE,
    {"name": "humidity", "type": ["null", "double"], "default": None},
)
# Incompatible with v2 under BACKWARD: temperature a string cannot read doubles.
V3 = avro_record("Reading", SENSOR_ID, TIMESTAMP_MS, {"name": "temperature", "type": "string"})


class ReadingV2(BaseModel):
    sensor_id: str
    timestamp_ms: int
    temperature: float
    humidity: float | None = None


class Seen(BaseModel):
    sensor_id: str
    temperature: float
    humidity: float | None


async def test_records_of_an_evolved_avro_schema_are_read_and_an_incompatible_one_refused(
    tmp_path: Any,
    registry_env: str,  # noqa: F811
    sr: SchemaRegistryClient,
) -> None:
    settings = unique_settings(tmp_path, agents=("evolving",))
    subject = f"{settings.topic('evolving-in')}-value"
    sr.set_compatibility(subject, "BACKWARD")
    app = App("evolution")
    app.stream(Topic("evolving-in", ReadingV2, serde=Avro(V2)), name="evolving").map(
        lambda r: Seen(sensor_id=r.sensor_id, temperature=r.temperature, humidity=r.humidity)
    ).to(Topic("seen", Seen))
    worker = Worker(settings, app.build(settings))
    await worker.start()
    try:
        p = producer(settings)
        ctx = SerializationContext(settings.topic("evolving-in"), MessageField.VALUE)
        old = AvroSerializer(sr, json.dumps(V1))
        new = AvroSerializer(sr, json.dumps(V2))
        send_all(
            p,
            settings.topic("evolving-in"),
            [(b"s1", old({**r, "location": "attic"}, ctx)) for r in readings(3)],
        )
        send_all(
            p,
            settings.topic("evolving-in"),
            [(b"s1", new({**r, "humidity": 0.5}, ctx)) for r in readings(3)],
        )
        with pytest.raises(SchemaRegistryError) as refused:
            AvroSerializer(sr, json.dumps(V3))(readings(1)[0] | {"temperature": "hot"}, ctx)
        seen = await read_all(settings, settings.topic("seen"), min_records=6)
    finally:
        await worker.stop()

    got = [Seen.model_validate_json(r.value) for r in seen]
    assert [(s.temperature, s.humidity) for s in got] == [
        (20.0, None),
        (21.0, None),
        (22.0, None),
        (20.0, 0.5),
        (21.0, 0.5),
        (22.0, 0.5),
    ]
    assert "incompatible" in str(refused.value).lower()
    versions = sr.get_versions(subject)
    assert len(versions) == 2, "the incompatible schema became a version"


async def test_an_output_schema_the_registry_refuses_stops_the_worker_saying_why(
    tmp_path: Any,
    registry_env: str,  # noqa: F811
    sr: SchemaRegistryClient,
) -> None:
    settings = unique_settings(tmp_path, agents=("refused",))
    subject = f"{settings.topic('refused-out')}-value"
    sr.set_compatibility(subject, "BACKWARD")
    from confluent_kafka.schema_registry import Schema

    sr.register_schema(subject, Schema(json.dumps(V2), "AVRO"))
    app = App("refusal")
    app.stream(Topic("refused-in", ReadingV2), name="refused").to(
        Topic("refused-out", ReadingV2, serde=Avro(V3))
    )
    worker = Worker(settings, app.build(settings))
    with pytest.raises(SchemaRejected) as refused:
        await worker.start()
    await worker.stop()
    message = str(refused.value)
    assert subject in message
    assert "temperature" in message.lower() or "incompatible" in message.lower()


async def test_a_missing_output_subject_stops_the_worker_when_auto_registration_is_off(
    tmp_path: Any,
    registry_env: str,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("EDDY_SCHEMA_REGISTRY_AUTO_REGISTER", "false")
    settings = unique_settings(tmp_path, agents=("unregistered",))
    app = App("manual")
    app.stream(Topic("manual-in", ReadingV2), name="unregistered").to(
        Topic("manual-out", ReadingV2, serde=Avro(V2))
    )
    worker = Worker(settings, app.build(settings))
    with pytest.raises(ConfigError, match="EDDY_SCHEMA_REGISTRY_AUTO_REGISTER"):
        await worker.start()
    await worker.stop()


async def test_bad_payloads_are_dead_lettered_with_the_reason_and_nothing_is_lost(
    tmp_path: Any,
    registry_env: str,  # noqa: F811
    sr: SchemaRegistryClient,
) -> None:
    settings = unique_settings(tmp_path, agents=("checked",))
    app = App("bad")
    app.stream(Topic("checked-in", Reading, serde=Avro(READING_AVRO)), name="checked").to(
        Topic("checked-out", Reading)
    )
    worker = Worker(settings, app.build(settings))
    await worker.start()
    try:
        ctx = SerializationContext(settings.topic("checked-in"), MessageField.VALUE)
        good = [AvroSerializer(sr, json.dumps(READING_AVRO))(r, ctx) for r in readings(4)]
        # Registered under another topic's subject, then written here: a schema
        # that is not one of this topic's.
        other = SerializationContext(settings.topic("elsewhere"), MessageField.VALUE)
        alien = AvroSerializer(sr, json.dumps(ALIEN))({"id": "s1", "celsius": 3}, other)
        bad = [
            b'{"sensor_id": "s1"}',  # JSON: magic byte 0x7b
            b"\x00\x7f\xff\xff\xf0" + good[0][5:],  # a schema id the registry never issued
            b"\x00\x00",  # shorter than the header
            good[1][:7],  # the header, then half a record
            alien,
        ]
        interleaved = [good[0], bad[0], good[1], bad[1], bad[2], good[2], bad[3], bad[4], good[3]]
        send_all(
            producer(settings), settings.topic("checked-in"), [(b"s1", v) for v in interleaved]
        )
        outputs = await read_all(settings, settings.topic("checked-out"), min_records=4)
        dead = await read_all(settings, settings.dead_letters, min_records=5)
    finally:
        await worker.stop()

    assert [Reading.model_validate_json(r.value).temperature for r in outputs] == [
        20.0,
        21.0,
        22.0,
        23.0,
    ]
    assert [r.value for r in dead] == bad, "a dead letter must carry the record's own bytes"
    reasons = [dict(r.headers)["eddy.reason"].decode() for r in dead]
    assert "magic byte 0x7b" in reasons[0]
    assert "unknown schema id 2147483632" in reasons[1]
    assert "truncated" in reasons[2]
    assert "truncated or corrupt" in reasons[3]
    # Its subjects: the other topic's, and the same schema's in earlier runs on this registry.
    assert f"is not a version of subject {settings.topic('checked-in')}-value (its " in reasons[4]


def test_the_client_reads_each_ids_subjects_and_unknown_ids_from_the_real_registry(
    registry_url: str,  # noqa: F811
    sr: SchemaRegistryClient,
) -> None:
    from confluent_kafka.schema_registry import Schema

    from eddy.schemas.registry import SchemaRegistry

    suffix = uuid.uuid4().hex[:8]
    text = json.dumps(avro_record(f"Probe{suffix}", SENSOR_ID))
    schema_id = sr.register_schema(f"probe-{suffix}-value", Schema(text, "AVRO"))
    assert sr.register_schema(f"shared-{suffix}-value", Schema(text, "AVRO")) == schema_id
    client = SchemaRegistry(registry_url)
    try:
        found = client.schema(schema_id)
        assert found is not None
        assert found.subjects == {f"probe-{suffix}-value", f"shared-{suffix}-value"}
        assert json.loads(found.text)["name"] == f"Probe{suffix}"
        assert client.schema(2_147_483_000) is None
        assert client.known(2_147_483_000)
        flood = range(2_000_000_000, 2_000_000_500)

        async def prefetch() -> float:
            started = time.monotonic()
            await client.prefetch(flood)
            return time.monotonic() - started

        took_s = asyncio.run(prefetch())
        assert all(client.known(i) for i in flood)
        assert all(client.schema(i) is None for i in flood)
        assert took_s < 10, f"500 unknown ids took {took_s:.1f} s"
    finally:
        client.close()


NODE = avro_record("Node", SENSOR_ID, {"name": "next", "type": ["null", "eddy.test.Node"]})
MARKS = avro_record(
    "Marks", SENSOR_ID, {"name": "marks", "type": {"type": "array", "items": "null"}}
)


async def test_unsafe_schemas_foreign_keys_and_a_flood_of_unknown_ids_are_dead_lettered(
    tmp_path: Any,
    registry_env: str,  # noqa: F811
    sr: SchemaRegistryClient,
) -> None:
    from confluent_kafka.schema_registry import Schema

    settings = unique_settings(tmp_path, agents=("guarded",))
    subject = f"{settings.topic('guarded-in')}-value"
    app = App("guarded")
    app.stream(
        Topic("guarded-in", Reading, serde=Avro(READING_AVRO), kafka_key=True), name="guarded"
    ).to(Topic("guarded-out", Reading))
    worker = Worker(settings, app.build(settings))
    await worker.start()
    try:
        ctx = SerializationContext(settings.topic("guarded-in"), MessageField.VALUE)
        good = [AvroSerializer(sr, json.dumps(READING_AVRO))(r, ctx) for r in readings(3)]
        sr.set_compatibility(subject, "NONE")  # the unsafe schemas become versions too
        recursive = sr.register_schema(subject, Schema(json.dumps(NODE), "AVRO"))
        marks = sr.register_schema(subject, Schema(json.dumps(MARKS), "AVRO"))
        nested = b"\x02a" + b"\x02\x02a" * 40_000 + b"\x00"  # 120 KB of nesting
        unsafe = [
            (b"s1", b"\x00" + recursive.to_bytes(4, "big") + nested),
            (
                b"s1",
                b"\x00" + marks.to_bytes(4, "big") + b"\x02a\xfe\xff\xff\xff\xff\xff\xff\xff\x7f",
            ),
            (b"s1\xff", good[0]),
        ]
        flood = [
            (b"s1", b"\x00" + (2_100_000_000 + i).to_bytes(4, "big") + b"\x02a") for i in range(300)
        ]
        started = time.monotonic()
        send_all(
            producer(settings),
            settings.topic("guarded-in"),
            [(b"s1", good[0]), *unsafe, (b"s1", good[1]), *flood, (b"s1", good[2])],
        )
        outputs = await read_all(settings, settings.topic("guarded-out"), min_records=3)
        dead = await read_all(settings, settings.dead_letters, min_records=303)
        took_s = time.monotonic() - started
    finally:
        await worker.stop()

    assert [Reading.model_validate_json(r.value).temperature for r in outputs] == [
        20.0,
        21.0,
        22.0,
    ]
    # The key b"s1\xff" is in another partition than b"s1": its dead letter's place may vary.
    keyed = [r for r in dead if r.key == b"s1\xff"]
    assert [dict(r.headers)["eddy.reason"].decode()[:59] for r in keyed] == [
        "key: not UTF-8 text (invalid start byte at byte 2: b'\\xff')"
    ]
    reasons = [dict(r.headers)["eddy.reason"].decode() for r in dead if r.key == b"s1"]
    assert reasons[0] == (
        f"schema id {recursive} is refused: recursive (eddy.test.Node -> eddy.test.Node): a "
        "record could nest without bound"
    )
    assert reasons[1] == (
        f"schema id {marks} is refused: an array of null, whose items take no bytes: a record "
        "of a few bytes could claim 2^62 of them"
    )
    assert reasons[2:] == [
        f"unknown schema id {2_100_000_000 + i}: the schema registry {registry_env} has no "
        "schema with that id"
        for i in range(300)
    ]
    assert took_s < 60
