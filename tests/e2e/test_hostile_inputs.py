"""Hostile and unlucky records against one real worker, on the real broker and the
real schema registry: a team's agents read Avro, Protobuf and JSON Schema topics,
and a producer they do not control sends, between good records, every record a
decoder has been known to choke on. Each bad one is dead-lettered with its reason
within a second, the worker's ingest process never dies, nothing reaches the
network, and every good record's result is written exactly once."""

from __future__ import annotations

import http.server
import json
import struct
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from eddy.schemas.wire import header, write_indexes
from eddy.settings import Settings
from tests.support.kafka import produce, read_all, wait_until
from tests.support.registry import compile_proto, registry_url  # noqa: F401
from tests.support.team_apps import DeadLetters, Worker, user_app

pytestmark = pytest.mark.e2e

MINUTE_MS = 60_000
BASE_MS = (time.time_ns() // 60_000_000_000 - 120) * MINUTE_MS  # two hours ago, on the minute
PACKAGE = "hostile"

READING_AVRO = {
    "type": "record",
    "name": "Reading",
    "namespace": "hostile",
    "fields": [
        {"name": "sensor_id", "type": "string"},
        {"name": "timestamp_ms", "type": "long"},
        {"name": "temperature", "type": "double"},
    ],
}
# Two messages in one file: a record of the second, under the topic of the first,
# parses as the first (the fields' numbers and types agree) unless its index is read.
PROTO = """syntax = "proto3";
package hostile;

message Reading {
  string sensor_id = 1;
  int64 timestamp_ms = 2;
  double temperature = 3;
}

message Calibration {
  string sensor_id = 1;
  int64 timestamp_ms = 2;
  double temperature = 3;
}
"""

APP = """\
from pydantic import BaseModel

from eddy import (
    App, Avro, BoundedOutOfOrderness, JsonSchema, Protobuf, Sum, Topic, Tumbling,
)

from hostile import readings_pb2
from hostile.schemas import READING_AVRO


class Reading(BaseModel):
    sensor_id: str
    timestamp_ms: int
    temperature: float


class Seen(BaseModel):
    sensor_id: str
    timestamp_ms: int
    source: str


def seen(source):
    def tag(reading):
        return Seen(sensor_id=reading.sensor_id, timestamp_ms=reading.timestamp_ms, source=source)

    return tag


app = App("hostile")
out = Topic("seen", Seen)
avro_in = Topic(
    "avro-in", Reading, serde=Avro(READING_AVRO), key="sensor_id", timestamp="timestamp_ms"
)
proto_in = Topic("proto-in", Reading, serde=Protobuf(readings_pb2.Reading))
json_in = Topic("json-in", Reading, serde=JsonSchema())
keyed_in = Topic("keyed-in", Reading, timestamp="timestamp_ms")
sums = Topic("sums")

app.stream(avro_in, name="from_avro").map(seen("avro")).to(out)
app.stream(proto_in, name="from_proto").map(seen("protobuf")).to(out)
app.stream(json_in, name="from_json").map(seen("json_schema")).to(out)
app.stream(keyed_in, name="from_keyed").map(seen("keyed")).to(out)
(
    app.stream(avro_in, name="sums", watermark=BoundedOutOfOrderness(bound_ms=0))
    .window(Tumbling(size_ms=60_000))
    .aggregate(Sum("temperature"))
    .to(sums)
)
"""


class CountingServer:
    """A local HTTP server that counts the requests it gets: the worker must make none."""

    def __init__(self) -> None:
        self.requests = 0
        counter = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                counter.requests += 1
                body = b'{"type": "object"}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Registry:
    """Registers schemas the way a producer's tooling would (Confluent's REST API)."""

    def __init__(self, url: str) -> None:
        self.http = httpx.Client(base_url=url, timeout=10)

    def register(self, subject: str, schema: Any, schema_type: str = "AVRO") -> int:
        text = schema if isinstance(schema, str) else json.dumps(schema)
        body: dict[str, Any] = {"schema": text}
        if schema_type != "AVRO":
            body["schemaType"] = schema_type
        answer = self.http.post(
            f"/subjects/{subject}/versions",
            json=body,
            headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
        )
        assert answer.status_code == 200, answer.text
        return int(answer.json()["id"])


def avro_long(n: int) -> bytes:
    """Avro's zigzag varint."""
    value = (n << 1) ^ (n >> 63)
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def avro_reading(schema_id: int, sensor: str, ts_ms: int, temperature: float) -> bytes:
    text = sensor.encode()
    return (
        header(schema_id)
        + avro_long(len(text))
        + text
        + avro_long(ts_ms)
        + struct.pack("<d", temperature)
    )


def avro_nested(schema_id: int, depth: int) -> bytes:
    """A ``Node`` whose ``next`` is a ``Node``... ``depth`` times, then null."""
    return header(schema_id) + b"\x02" * depth + b"\x00"


NODE = {
    "type": "record",
    "name": "Node",
    "fields": [{"name": "next", "type": ["null", "Node"]}],
}
NULLS = {"type": "array", "items": "null"}
DRAFT_7 = "http://json-schema.org/draft-07/schema#"
READING_JSON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "sensor_id": {"type": "string"},
        "timestamp_ms": {"type": "integer"},
        "temperature": {"type": "number"},
    },
    "required": ["sensor_id", "timestamp_ms", "temperature"],
}
# A pattern that backtracks exponentially in Python's re on a near-match.
REDOS_SCHEMA = {
    **READING_JSON_SCHEMA,
    "properties": {
        **READING_JSON_SCHEMA["properties"],
        "sensor_id": {"type": "string", "pattern": "^(a+)+$"},
    },
}


def remote_schema(url: str) -> dict[str, Any]:
    """The reading's schema, its sensor id's described at ``url``."""
    properties = {**READING_JSON_SCHEMA["properties"], "sensor_id": {"$ref": f"{url}/id.json"}}
    return {"$schema": DRAFT_7, **READING_JSON_SCHEMA, "properties": properties}


def reading(sensor: str, ts_ms: int, temperature: float = 1.0) -> dict[str, Any]:
    return {"sensor_id": sensor, "timestamp_ms": ts_ms, "temperature": temperature}


def sensor_key(row: dict[str, Any]) -> bytes:
    return str(row["sensor_id"]).encode()


class Inputs:
    """What the producer sends: every record, whether it is good, and for a bad one
    the words its dead letter's reason must hold."""

    def __init__(self) -> None:
        self.records: dict[str, list[tuple[bytes | None, bytes]]] = {}
        self.bad: list[tuple[str, bytes, str]] = []  # topic, value, reason words
        self.seen: Counter[tuple[str, str, int]] = Counter()  # good: (source, sensor, ts)

    def good(self, topic: str, source: str, key: bytes | None, value: bytes, row: Any) -> None:
        self.records.setdefault(topic, []).append((key, value))
        self.seen[(source, row["sensor_id"], row["timestamp_ms"])] += 1

    def hostile(self, topic: str, key: bytes | None, value: bytes, reason: str) -> None:
        self.records.setdefault(topic, []).append((key, value))
        self.bad.append((topic, value, reason))


def hostile_inputs(
    settings: Settings, registry: Registry, server: CountingServer, pb2: Any
) -> Inputs:
    """Good records of every topic, with the bad ones between them."""
    topic = settings.topic
    avro_subject, json_subject = f"{topic('avro-in')}-value", f"{topic('json-in')}-value"
    avro_id = registry.register(avro_subject, READING_AVRO)
    # Registered by someone else, under a subject of their own.
    recursive_id = registry.register(f"{topic('elsewhere')}-value", NODE)
    nulls_id = registry.register(avro_subject, NULLS)
    json_id = registry.register(json_subject, READING_JSON_SCHEMA, "JSON")
    redos_id = registry.register(json_subject, REDOS_SCHEMA, "JSON")
    remote_id = registry.register(json_subject, remote_schema(server.url), "JSON")
    proto_id = registry.register(f"{topic('proto-in')}-value", PROTO, "PROTOBUF")
    inputs = Inputs()

    def avro(row: dict[str, Any]) -> bytes:
        return avro_reading(avro_id, row["sensor_id"], row["timestamp_ms"], row["temperature"])

    def proto(row: dict[str, Any], index: int = 0, message: Any = None) -> bytes:
        body: bytes = (message or pb2.Reading)(**row).SerializeToString()
        return header(proto_id) + write_indexes([index]) + body

    def json_value(row: dict[str, Any], schema_id: int = json_id) -> bytes:
        return header(schema_id) + orjson.dumps(row)

    for i in range(10):
        row = reading("s1", BASE_MS + i * 1_000, float(i))
        inputs.good(topic("avro-in"), "avro", sensor_key(row), avro(row), row)
        for name, source, value in (
            ("proto-in", "protobuf", proto(row)),
            ("json-in", "json_schema", json_value(row)),
            ("keyed-in", "keyed", orjson.dumps(row)),
        ):
            inputs.good(topic(name), source, b"s1", value, row)
        if i == 2:
            inputs.hostile(
                topic("avro-in"),
                b"s1",
                avro_nested(recursive_id, 100_000),
                "not a version of subject",
            )
            big = 1 << 62  # items of a type that takes no bytes: a loop without reading
            inputs.hostile(
                topic("avro-in"), b"s1", header(nulls_id) + avro_long(big) + b"\x00", "no bytes"
            )
        if i == 4:
            near_match = reading("a" * 40 + "!", BASE_MS + i * 1_000)
            inputs.hostile(
                topic("json-in"), b"a", json_value(near_match, redos_id), "does not match"
            )
            remote = json_value(reading("s1", BASE_MS + i * 1_000), remote_id)
            inputs.hostile(topic("json-in"), b"s1", remote, "outside the schema")
            calibration = proto(reading("s1", BASE_MS), 1, pb2.Calibration)
            inputs.hostile(topic("proto-in"), b"s1", calibration, "Calibration")
        if i == 6:
            row = reading("s1", BASE_MS + i * 1_000)
            for key in (b"k\xff", b"k\xfe"):  # one byte apart: would have merged as "k\ufffd"
                inputs.hostile(topic("keyed-in"), key, orjson.dumps(row), "not UTF-8")
            nan = json_value(reading("s1", BASE_MS), json_id).replace(b"1.0", b"NaN")
            inputs.hostile(topic("json-in"), b"s1", nan, "JSON")
        if i == 8:
            # Two valid readings whose sum is infinity, and a NaN: the sums agent's state.
            for temperature in (1e308, 1e308):
                row = reading("big", BASE_MS + i * 1_000, temperature)
                inputs.good(topic("avro-in"), "avro", sensor_key(row), avro(row), row)
            row = reading("nan", BASE_MS + i * 1_000, float("nan"))
            inputs.good(topic("avro-in"), "avro", sensor_key(row), avro(row), row)
    closing = reading("s1", BASE_MS + 10 * MINUTE_MS)  # closes the first minute
    inputs.good(topic("avro-in"), "avro", b"s1", avro(closing), closing)
    return inputs


@pytest.mark.timeout(300)
async def test_hostile_records_are_dead_lettered_within_a_second_and_good_ones_written_once(
    tmp_path: Path,
    registry_url: str,  # noqa: F811
) -> None:
    server = CountingServer()
    (tmp_path / "proto").mkdir()
    pb2 = compile_proto(tmp_path / "proto", "readings.proto", PROTO)
    files = {
        "schemas.py": f"READING_AVRO = {READING_AVRO!r}\n",
        "readings_pb2.py": (tmp_path / "proto" / "readings_pb2.py").read_text(),
    }
    root, env, settings = await user_app(
        tmp_path, PACKAGE, APP, files, EDDY_SCHEMA_REGISTRY_URL=registry_url, EDDY_PARTITIONS="1"
    )
    inputs = hostile_inputs(settings, Registry(registry_url), server, pb2)
    before = server.requests  # the registry may dereference a schema when it registers it
    worker = Worker(root, env, tmp_path / "worker.log", package=PACKAGE)
    dead = DeadLetters(settings)
    try:
        await wait_until(worker.ready, timeout_s=120)
        await dead.start()
        sent_at: dict[bytes | None, float] = {}
        for topic, records in inputs.records.items():
            for key, value in records:
                sent_at.setdefault(value, time.monotonic())
                await produce(settings, topic, [(key, value)])
        # Bad Avro records fail both stages that read the topic; the sums agent also
        # refuses the reading that overflows its sum and the NaN (its state's fault).
        avro_bad = sum(1 for topic, _, _ in inputs.bad if topic == settings.topic("avro-in"))
        want_dead = len(inputs.bad) + avro_bad + 2
        await wait_until(lambda: len(dead.seen) >= want_dead, timeout_s=60, every_s=0.02)
        seen = await read_all(
            settings, settings.topic("seen"), min_records=sum(inputs.seen.values())
        )
        sums = await read_all(settings, settings.topic("sums"), min_records=1)
        assert worker.process.poll() is None, "the worker exited"
        log = worker.log()
    finally:
        await dead.stop()
        code = worker.stop()
        server.close()
    assert code == 0, worker.log()[-3_000:]
    assert log.count("ingest process 0 started") == 1, log[-3_000:]
    assert server.requests == before == 0

    delays: list[tuple[str, float]] = []  # each dead letter's reason, seconds after its send
    for topic, value, words in inputs.bad:
        letters = [
            (at, h) for at, h, v in dead.seen if v == value and h["eddy.source.topic"] == topic
        ]
        assert letters, f"no dead letter for {words!r} on {topic}"
        for at, headers in letters:
            assert words in headers["eddy.reason"], headers["eddy.reason"]
            delays.append((headers["eddy.reason"], at - sent_at[value]))
    unwritable = [(h["eddy.reason"], at - sent_at[v]) for at, h, v in dead.of("sums")]
    unwritable = [(reason, s) for reason, s in unwritable if "cannot be written" in reason]
    assert len(unwritable) == 2, dead.seen
    delays += unwritable
    for reason, seconds in sorted(set(delays)):
        print(f"\n{seconds:.3f} s  {reason[:150]}", end="")
    slowest = max(delays, key=lambda delay: delay[1])
    print(
        f"\n{len(delays)} dead letters, the slowest {slowest[1]:.3f} s after its send: {slowest[0]}"
    )
    # Within a second here (printed above); asserted with room for this shared host's
    # stalls. A restart would show as a second "started" line (checked above).
    assert slowest[1] < 3.0
    assert len(dead.seen) == want_dead, dead.seen

    got = Counter((r["source"], r["sensor_id"], r["timestamp_ms"]) for r in values(seen))
    assert got == inputs.seen
    windows = Counter((r["sensor_id"], r["window_start_ms"], r["value"]) for r in values(sums))
    # The overflowing reading and the NaN left the state as it was before them.
    want = {("s1", BASE_MS, float(sum(range(10)))): 1, ("big", BASE_MS, 1e308): 1}
    assert windows == Counter(want)


def values(records: list[Any]) -> list[Any]:
    return [orjson.loads(record.value) for record in records]
