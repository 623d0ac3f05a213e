"""The schema registry client against a fake registry (httpx's MockTransport): a
bounded cache, "not found" kept only for a while, lookups fetched concurrently
off the event loop before a batch is decoded, a registry that does not answer
backed off rather than asked per record, and the URL's credentials never shown.
The real registry (Apicurio) is in tests/integration/test_schema_registry.py."""

from __future__ import annotations

import asyncio
import io
import json
import threading
import time
from collections import Counter
from typing import Any

import fastavro
import httpx
import pytest

from eddy import Avro, DecodeError
from eddy.pipeline.source import Source, prefetch_schemas
from eddy.schemas import wire
from eddy.schemas.base import Binding
from eddy.schemas.registry import RegistryUnavailable, SchemaRegistry

READING = {
    "type": "record",
    "name": "Reading",
    "fields": [{"name": "sensor_id", "type": "string"}, {"name": "temperature", "type": "double"}],
}
SUBJECT = "readings-value"


class FakeClock:
    def __init__(self) -> None:
        self.now_s = 1_000.0

    def __call__(self) -> float:
        return self.now_s

    def advance(self, ms: int) -> None:
        self.now_s += ms / 1000


class FakeRegistryServer:
    """Answers /schemas/ids/{id} and its /versions for the ids it holds (404 for
    others), counting requests; ``delay_s`` slows every answer, ``down`` refuses
    connections."""

    def __init__(self, schemas: dict[int, str], delay_s: float = 0.0) -> None:
        self.schemas = schemas
        self.delay_s = delay_s
        self.down = False
        self.requests: Counter[str] = Counter()
        self.threads: set[str] = set()
        self._lock = threading.Lock()

    def handle(self, request: httpx.Request) -> httpx.Response:
        path = "/schemas/" + request.url.path.split("/schemas/", 1)[1]  # after the base URL
        with self._lock:
            self.requests[path] += 1
            self.threads.add(threading.current_thread().name)
        if self.down:
            raise httpx.ConnectError("connection refused", request=request)
        if self.delay_s:
            time.sleep(self.delay_s)
        schema_id = int(path.split("/")[3])  # /schemas/ids/<id>[/versions]
        if schema_id not in self.schemas:
            return httpx.Response(404, json={"error_code": 40403, "message": "not found"})
        if path.endswith("/versions"):
            return httpx.Response(200, json=[{"subject": SUBJECT, "version": 1}])
        return httpx.Response(200, json={"schema": self.schemas[schema_id]})

    def client(self, url: str = "http://registry.test", **options: Any) -> SchemaRegistry:
        return SchemaRegistry(url, transport=httpx.MockTransport(self.handle), **options)

    def asked(self, schema_id: int) -> int:
        return self.requests[f"/schemas/ids/{schema_id}"]


def avro_record(schema_id: int, sensor: str = "s1") -> bytes:
    body = io.BytesIO()
    fastavro.schemaless_writer(body, READING, {"sensor_id": sensor, "temperature": 1.5})
    return wire.header(schema_id) + body.getvalue()


def test_a_schema_is_asked_for_once_with_the_subjects_it_is_a_version_of() -> None:
    server = FakeRegistryServer({1: json.dumps(READING)})
    registry = server.client()
    found = registry.schema(1)
    assert found is not None
    assert registry.schema(1) is found
    assert found.subjects == frozenset({SUBJECT})
    assert server.requests == {"/schemas/ids/1": 1, "/schemas/ids/1/versions": 1}


def test_an_unknown_id_stays_unknown_only_for_the_not_found_ttl() -> None:
    server, clock = FakeRegistryServer({}), FakeClock()
    registry = server.client(not_found_ttl_ms=30_000, clock=clock)
    assert registry.schema(7) is None
    clock.advance(29_999)
    assert registry.schema(7) is None
    assert server.asked(7) == 1
    server.schemas[7] = json.dumps(READING)  # issued since
    clock.advance(2)
    assert registry.schema(7) is not None
    assert server.asked(7) == 2


def test_the_cache_keeps_the_most_recently_used_schemas_up_to_its_size() -> None:
    server = FakeRegistryServer({i: json.dumps(READING) for i in range(1, 5)})
    registry = server.client(cache_size=2)
    for schema_id in (1, 2, 1, 3):  # 2 is the least recently used when 3 comes
        registry.schema(schema_id)
    assert (registry.known(1), registry.known(2), registry.known(3)) == (True, False, True)
    registry.schema(2)
    assert server.asked(2) == 2
    assert server.asked(1) == 1


async def test_a_batch_fetches_its_new_ids_concurrently_while_the_event_loop_runs_on() -> None:
    server = FakeRegistryServer({i: json.dumps(READING) for i in range(1, 9)}, delay_s=0.2)
    registry = server.client()
    ticks = 0

    async def heartbeat() -> None:  # what the Kafka consumer's heartbeats need: a free loop
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    beating = asyncio.create_task(heartbeat())
    started = time.monotonic()
    await registry.prefetch(range(1, 9))
    took_s = time.monotonic() - started
    beating.cancel()
    # 8 ids x 2 requests x 0.2 s would take 3.2 s one at a time.
    assert took_s < 1.5
    assert ticks >= 0.5 * took_s / 0.01, "the event loop was blocked while fetching"
    assert all(name.startswith("schema-registry") for name in server.threads)
    requests = sum(server.requests.values())
    assert [registry.schema(i) is not None for i in range(1, 9)] == [True] * 8
    assert sum(server.requests.values()) == requests, "decoding asked the registry again"


async def test_a_flood_of_unknown_ids_is_answered_from_the_cache_without_stalling() -> None:
    server = FakeRegistryServer({1: json.dumps(READING)}, delay_s=0.001)
    registry = server.client()
    serde = Avro(READING).bind(Binding(registry, SUBJECT, None))
    source = Source("readings", serde)
    flood = [Record(avro_record(schema_id)) for schema_id in range(1_000, 3_000)]
    started = time.monotonic()
    await prefetch_schemas(Stage(source), "readings", flood)
    fetched_s = time.monotonic() - started
    started = time.monotonic()
    reasons = set()
    for record in flood:
        with pytest.raises(DecodeError) as refused:
            serde.decode(record.value)
        reasons.add(refused.value.reason.split(":")[0])
    decoded_s = time.monotonic() - started
    assert reasons == {f"unknown schema id {i}" for i in range(1_000, 3_000)}
    assert sum(server.requests.values()) == 2_000, "each unknown id is asked for once"
    assert fetched_s < 5.0
    assert decoded_s < 1.0, "decoding waited on the registry"


async def test_an_id_still_being_fetched_fails_its_record_as_unavailable_not_unknown() -> None:
    server = FakeRegistryServer({1: json.dumps(READING)}, delay_s=0.5)
    registry = server.client(timeout_ms=100)
    serde = Avro(READING).bind(Binding(registry, SUBJECT, None))
    started = time.monotonic()
    await registry.prefetch([1])
    assert time.monotonic() - started < 0.4, "the batch waited past its budget"
    with pytest.raises(RegistryUnavailable, match="did not answer about schema id 1 within 100 ms"):
        serde.decode(avro_record(1))  # retried by the restart policy, not dead-lettered
    await asyncio.sleep(1.2)  # the fetch goes on, and its answer is kept
    assert serde.decode(avro_record(1)) == {"sensor_id": "s1", "temperature": 1.5}
    assert server.asked(1) == 1


def test_a_registry_that_does_not_answer_is_backed_off_not_asked_per_record() -> None:
    server, clock = FakeRegistryServer({1: json.dumps(READING)}), FakeClock()
    registry = server.client(clock=clock)
    server.down = True
    with pytest.raises(RegistryUnavailable, match="did not answer GET /schemas/ids/1"):
        registry.schema(1)
    with pytest.raises(RegistryUnavailable, match="asking again in 100 ms"):
        registry.schema(2)
    assert sum(server.requests.values()) == 1
    clock.advance(150)
    with pytest.raises(RegistryUnavailable):
        registry.schema(1)  # asked again: still down; the next wait doubles
    with pytest.raises(RegistryUnavailable, match="asking again in 200 ms"):
        registry.schema(1)
    server.down = False
    clock.advance(250)
    assert registry.schema(1) is not None


async def test_prefetch_waits_for_nothing_while_the_registry_is_backed_off() -> None:
    server = FakeRegistryServer({1: json.dumps(READING)}, delay_s=0.05)
    registry = server.client()
    server.down = True
    await registry.prefetch([1])
    asked = sum(server.requests.values())
    await registry.prefetch([1, 2, 3])
    assert sum(server.requests.values()) == asked
    with pytest.raises(RegistryUnavailable, match="asking again in"):
        registry.schema(2)


def test_the_registry_urls_credentials_are_never_shown() -> None:
    server = FakeRegistryServer({})
    registry = server.client("http://eddy:s3cret-pw@registry.test/apis/ccompat/v7")
    serde = Avro(READING).bind(Binding(registry, SUBJECT, None))
    with pytest.raises(DecodeError) as unknown:
        serde.decode(avro_record(9))
    server.down = True
    with pytest.raises(RegistryUnavailable) as down:
        registry.schema(10)
    for message in (unknown.value.reason, str(down.value)):
        assert "s3cret-pw" not in message
        assert "registry.test" in message


async def test_a_batch_asks_only_for_the_ids_its_serdes_do_not_know() -> None:
    server = FakeRegistryServer({1: json.dumps(READING), 2: json.dumps(READING)})
    registry = server.client()
    serde = Avro(READING).bind(Binding(registry, SUBJECT, None))
    key_serde = Avro('"string"').bind(Binding(registry, "readings-key", None))
    source = Source("readings", serde, key_serde=key_serde)
    batch = [
        Record(avro_record(1)),
        Record(avro_record(1), key=b"\x00\x00\x00\x00\x02\x04s1"),
        Record(avro_record(2)),
        Record(b'{"not": "avro"}'),
        Record(None),  # a tombstone
        Record(b"\x00\x01"),  # shorter than a header
    ]
    await prefetch_schemas(Stage(source), "readings", batch)
    assert {path for path in server.requests if not path.endswith("versions")} == {
        "/schemas/ids/1",
        "/schemas/ids/2",
    }
    serde.decode(batch[0].value)
    await prefetch_schemas(Stage(source), "readings", batch)
    await prefetch_schemas(Stage(source), "other-topic", [Record(avro_record(3))])
    assert server.asked(1) == 1
    assert server.asked(3) == 0


class Record:
    def __init__(self, value: bytes | None, key: bytes | None = None) -> None:
        self.value, self.key = value, key
        self.topic, self.partition, self.offset, self.timestamp, self.headers = "t", 0, 0, 0, ()


class Stage:
    """A stage with one input, as the runtime's stateless and keyed stages have."""

    def __init__(self, source: Source) -> None:
        self.source = source
