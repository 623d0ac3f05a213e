"""No secret of the configuration is ever shown, by a real worker on the real broker.

One ``eddy worker`` (a query process and an ingest process) runs the reference
app's sensor_averages and sensor_rooms on Avro readings, with a credential in
every place one can be set:

* the schema registry's URL (``http://user:password@127.0.0.1:8081/...``;
  Apicurio ignores basic auth, so the worker works);
* the S3 snapshot and savepoint roots (``s3://KEY:SECRET@bucket/...``) on a real
  S3-compatible server (moto's), and a root with its keys in the query;
* the room lookup service's URL (``http://rooms:password@...``, sent as basic auth);
* the API token and a PostgreSQL DSN; an advertised API URL with a password,
  which is refused next to the token.

Records that fail are sent so that reasons are produced, two of them making the
registry client speak (a schema id it does not know, one of another subject).
Then every place a user reads is collected: each log file (the worker's, the room
service's, the S3 server's, and that of a worker refused at start because of the
root with keys in its query), each dead letter's headers, ``eddy config``,
``eddy status``, ``eddy snapshot create``/``list``, ``eddy savepoint list``, the
refused commands' errors, ``/metrics``, the dashboard (its HTML and script, and
every JSON document it loads), ``/jobs``, ``/snapshots``, and the body of every
4xx answer to a bad request. No secret may appear in any of them: neither as set
nor URL-encoded (nor, for the basic-auth ones, base64-encoded as an Authorization
header carries them).
"""

from __future__ import annotations

import base64
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import httpx
import orjson
import pytest

from eddy.settings import Settings
from tests.support.kafka import (
    HOUR_AGO_MS,
    create_topics,
    produce,
    read_all,
    readings_topic,
    unique_settings,
)
from tests.support.processes import WorkerProcess, settings_env
from tests.support.registry import registry_url  # noqa: F401 (fixture)
from tests.support.rooms import RoomService
from tests.support.s3 import s3_server  # noqa: F401 (fixture)
from tools.s3 import LocalS3
from tools.s3.server import REGION
from tools.simulator.generator import SimulationConfig
from tools.simulator.producer import produce as simulate

pytestmark = pytest.mark.e2e

# Each secret holds characters that URL-encoding changes, so its encoded form differs.
REGISTRY_USER, REGISTRY_SECRET = "eddy-registry", "Reg1stry/Pa55+word"
SNAPSHOT_KEY, SNAPSHOT_SECRET = "AKIDSNAPSHOTKEY1", "Snap/S3cret+Key1"
SAVEPOINT_KEY, SAVEPOINT_SECRET = "AKIDSAVEPOINTKEY", "Save/S3cret+Key2"
QUERY_SECRET = "Query/S3cret+Key3"
ROOMS_USER, ROOMS_SECRET = "rooms", "R00m:pa55@word/4"
TOKEN = "Api-T0ken-6f1c2b9e"
ADVERTISED_SECRET = "Adv3rt:ised+pw/5"
DSN_SECRET = "Dsn/S3cret+pw6"
SECRETS = [
    REGISTRY_SECRET,
    SNAPSHOT_SECRET,
    SAVEPOINT_SECRET,
    QUERY_SECRET,
    ROOMS_SECRET,
    TOKEN,
    ADVERTISED_SECRET,
    DSN_SECRET,
]
BASIC_AUTH = {REGISTRY_USER: REGISTRY_SECRET, ROOMS_USER: ROOMS_SECRET}
# S3 access key ids are not secrets by themselves, but nothing needs to show them.
KEY_IDS = [SNAPSHOT_KEY, SAVEPOINT_KEY]
READINGS = 600
UNKNOWN_SCHEMA_ID = 2_000_000_007


def enc(secret: str) -> str:
    return quote(secret, safe="")


def forms_of_every_secret() -> set[str]:
    found = set(KEY_IDS)
    for secret in SECRETS:
        found |= {secret, quote(secret, safe=""), quote_plus(secret), quote(secret)}
    for user, secret in BASIC_AUTH.items():
        found.add(base64.b64encode(f"{user}:{secret}".encode()).decode())
    return found


def leaks(shown: dict[str, str]) -> list[str]:
    forms = forms_of_every_secret()
    return sorted(
        f"{where}: {form!r}" for where, text in shown.items() for form in forms if form in text
    )


def avro_record(schema_id: int, body: bytes) -> bytes:
    """The Confluent wire format: magic byte 0, the schema id, the Avro body."""
    return b"\x00" + schema_id.to_bytes(4, "big") + body


def register_other_subject(registry: str, settings: Settings) -> int:
    """A schema under a subject that is not the readings topic's: its id is real,
    but it is no reading."""
    schema = {"type": "record", "name": "Other", "fields": [{"name": "x", "type": "long"}]}
    answer = httpx.post(
        f"{registry}/subjects/{settings.app_id}-other-value/versions",
        json={"schema": json.dumps(schema)},
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
        timeout=10,
    )
    answer.raise_for_status()
    schema_id: int = answer.json()["id"]
    return schema_id


def bad_records(other_id: int) -> list[tuple[bytes, bytes]]:
    return [
        (b"sensor_1", avro_record(UNKNOWN_SCHEMA_ID, b"\x02\x00")),  # the registry says 404
        (b"sensor_2", avro_record(other_id, b"\x0e")),  # another subject's schema
        (b"sensor_3", b'{"sensor_id": "sensor_3"}'),  # not the wire format at all
    ]


def eddy(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "eddy", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def worker_env(
    settings: Settings, registry: str, s3: LocalS3, rooms: RoomService
) -> dict[str, str]:
    host = registry.removeprefix("http://")
    return {
        "EDDY_READINGS_FORMAT": "avro",
        "EDDY_SCHEMA_REGISTRY_URL": f"http://{REGISTRY_USER}:{enc(REGISTRY_SECRET)}@{host}",
        "EDDY_SNAPSHOT_ROOT": f"s3://{SNAPSHOT_KEY}:{enc(SNAPSHOT_SECRET)}@{s3.bucket}/"
        f"{settings.app_id}",
        "EDDY_SAVEPOINT_ROOT": f"s3://{SAVEPOINT_KEY}:{enc(SAVEPOINT_SECRET)}@{s3.bucket}/"
        f"{settings.app_id}-savepoints",
        "EDDY_ROOM_SERVICE_URL": rooms.url.replace("://", f"://{ROOMS_USER}:{enc(ROOMS_SECRET)}@"),
        "EDDY_API_TOKEN": TOKEN,
        "EDDY_POSTGRES_DSN": f"postgresql://eddy:{enc(DSN_SECRET)}@127.0.0.1:5433/eddy",
        # The S3 server, but no keys in the environment: the roots' own keys are used.
        "AWS_ENDPOINT_URL": s3.endpoint,
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_EC2_METADATA_DISABLED": "true",
    }


class Api:
    """The worker's REST API, as the dashboard and a user's scripts call it."""

    def __init__(self, base: str) -> None:
        self.client = httpx.Client(
            base_url=base, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10
        )
        self.shown: dict[str, str] = {}
        self.keys_drawn = 0

    def get(self, path: str, **params: Any) -> httpx.Response:
        answer = self.client.get(path, params=params)
        self.shown[f"GET {answer.request.url.raw_path.decode()}"] = answer.text
        return answer

    def error(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        answer = self.client.request(method, path, **kwargs)
        assert answer.status_code >= 400, (method, path, answer.status_code, answer.text)
        self.shown[f"{method} {path} -> {answer.status_code}"] = answer.text
        return answer

    def dashboard(self) -> None:
        """What the dashboard loads, in the order dashboard.js loads it."""
        page = self.get("/dashboard")
        assert page.status_code == 200
        assert "default-src 'self'" in page.headers["content-security-policy"]
        self.get("/dashboard.js")
        self.get("/status")
        agents = self.get("/agents").json()["agents"]
        assert {a["name"] for a in agents} == {"sensor_averages", "sensor_rooms"}
        for agent in agents:
            for view in agent["views"]:
                listing = self.get(f"/agents/{agent['name']}/keys", view=view["name"], limit=8)
                for key in listing.json()["keys"] if listing.status_code == 200 else []:
                    self.keys_drawn += 1
                    path = view["path"].replace("{key}", quote(key, safe=""))
                    if view["kind"] == "windows":
                        self.get(path, limit=1000)
                    else:
                        self.get(path)
            self.get(f"/agents/{agent['name']}/windows", limit=10)
        self.get("/watermarks")

    def bad_requests(self) -> None:
        """A 4xx for each kind of mistake a client makes."""
        anonymous = httpx.Client(base_url=str(self.client.base_url), timeout=10)
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            answer = anonymous.get("/status", headers=headers)
            assert answer.status_code == 401
            self.shown[f"GET /status {headers} -> 401"] = answer.text
        self.error("GET", "/agents/no_such_agent/windows")
        self.error("GET", "/agents/sensor_averages/windows", params={"limit": "many"})
        self.error("GET", "/agents/sensor_averages/windows", params={"limit": 10**9})
        self.error("GET", "/sensors/sensor_1/windows", params={"from_ms": 9, "to_ms": 1})
        self.error("GET", "/no/such/route")
        self.error("POST", "/status")
        self.error("GET", "/snapshots/20300101T000000000Z")
        self.error("GET", "/snapshots/..%2F..%2Fetc")
        self.error("GET", "/savepoints/20300101T000000000Z")


def test_no_secret_is_shown_anywhere(
    tmp_path: Path,
    registry_url: str,  # noqa: F811 (the fixture)
    s3_server: LocalS3,  # noqa: F811 (the fixture)
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started = time.monotonic()
    settings = unique_settings(tmp_path, agents=("sensor_averages", "sensor_rooms"))
    rooms = RoomService(tmp_path / "rooms.log", latency_ms=0)
    shown: dict[str, str] = {}
    try:
        extra = worker_env(settings, registry_url, s3_server, rooms)
        produce_input(settings, registry_url, monkeypatch)
        worker = WorkerProcess(settings, tmp_path / "worker.log", **extra)
        env = settings_env(settings, EDDY_API_PORT=str(worker.port), **extra)  # for eddy ...
        try:
            worker.wait_ready()
            shown |= run_and_collect(settings, env, worker)
        finally:
            worker.stop(signal.SIGTERM)
    finally:
        rooms.stop()
    for log in [tmp_path / "worker.log", tmp_path / "rooms.log", s3_server.log]:
        shown[f"log {log.name}"] = log.read_text(errors="replace")
    assert leaks(shown) == []
    assert time.monotonic() - started < 150


def produce_input(settings: Settings, registry: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Avro readings from the simulator (the schema registered under the readings
    topic's subject), then the records that fail."""
    import asyncio

    async def produce_all() -> None:
        await create_topics(settings)
        with monkeypatch.context() as patched:
            patched.setenv("EDDY_READINGS_FORMAT", "avro")
            patched.setenv("EDDY_SCHEMA_REGISTRY_URL", registry)
            config = SimulationConfig(
                rate_per_s=20,  # 30 s of event time: windows close, the dashboard draws them
                seed=29,
                start_ms=HOUR_AGO_MS,
                sensors=4,
                count=READINGS,
                outage_probability=0.0,
                disorder_ms=0,
            )
            await simulate(config, settings, pace=False, duration_s=None, progress=False)
        await produce(
            settings,
            readings_topic(settings),
            bad_records(register_other_subject(registry, settings)),
        )

    asyncio.run(produce_all())


def s3_bucket(env: dict[str, str]) -> str:
    return env["EDDY_SNAPSHOT_ROOT"].split("@", 1)[1].split("/", 1)[0]


def run_and_collect(
    settings: Settings, env: dict[str, str], worker: WorkerProcess
) -> dict[str, str]:
    import asyncio

    shown: dict[str, str] = {}
    # Every reading enriched (rooms looked up with basic auth), every bad one dead-lettered
    # by each of the two agents, with a reason.
    enriched = asyncio.run(
        read_all(settings, settings.topic("sensor-rooms"), min_records=READINGS, timeout_s=90)
    )
    assert len(enriched) == READINGS, worker.log()
    assert {orjson.loads(r.value)["room"] for r in enriched} >= {"room_1"}
    dead = asyncio.run(read_all(settings, settings.dead_letters, min_records=6, timeout_s=60))
    reasons = [dict(r.headers)["eddy.reason"].decode() for r in dead]
    assert len(dead) == 6, reasons
    assert sum(str(UNKNOWN_SCHEMA_ID) in r for r in reasons) == 2, reasons
    for n, record in enumerate(dead):
        shown[f"dead letter {n} headers"] = repr(record.headers)

    api = Api(worker.base)
    created = eddy(env, "snapshot", "create", "--url", worker.base)
    assert created.returncode == 0, created.stdout + created.stderr
    shown["eddy snapshot create"] = created.stdout + created.stderr
    api.dashboard()
    assert api.keys_drawn >= 4, api.shown  # each sensor's windows, as the dashboard draws them
    api.bad_requests()
    api.get("/metrics")
    api.get("/jobs")
    api.get("/snapshots")
    shown |= api.shown
    assert "eddy_dead_letters_total" in shown["GET /metrics"]

    for args in (
        ["config"],
        ["config", "--json"],
        ["status", "--url", worker.base],
        ["snapshot", "list"],
        ["savepoint", "list"],  # none yet: "no complete savepoint ... under <the root>"
    ):
        done = eddy(env, *args)
        assert done.returncode == 0, done.stdout + done.stderr
        shown[f"eddy {' '.join(args)}"] = done.stdout + done.stderr
    assert f"EDDY_SNAPSHOT_ROOT=s3://***@{s3_bucket(env)}/" in shown["eddy config"]
    assert "EDDY_ROOM_SERVICE_URL=http://***@127.0.0.1:" in shown["eddy config"]
    assert "EDDY_API_TOKEN=**********" in shown["eddy config"]
    # A root with its keys in the query: pyarrow refuses it, and the error says so
    # without them.
    query_root = f"s3://{settings.app_id}/x?access_key=AKIDQUERY&secret_key={enc(QUERY_SECRET)}"
    refused = eddy({**env, "EDDY_SNAPSHOT_ROOT": query_root}, "snapshot", "list")
    assert refused.returncode == 2
    assert refused.stderr.startswith("eddy: "), refused.stderr
    assert refused.stderr.count("\n") == 1, refused.stderr
    shown["eddy snapshot list (keys in the query)"] = refused.stdout + refused.stderr
    listed = eddy({**env, "EDDY_SNAPSHOT_ROOT": query_root}, "config")
    shown["eddy config (keys in the query)"] = listed.stdout + listed.stderr
    # A worker given that root stops at start, and its log says why.
    log = settings.state_dir.parent / "refused-worker.log"
    with log.open("wb") as out:
        stopped = subprocess.run(
            [sys.executable, "-m", "eddy", "worker"],
            env={**env, "EDDY_SNAPSHOT_ROOT": query_root, "EDDY_API_PORT": "0"},
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=60,
            check=False,
        )
    said = log.read_text(errors="replace")
    assert stopped.returncode != 0, said
    assert "cannot open snapshot root 's3://" in said, said
    shown["log refused-worker.log"] = said
    # Peers send each other the token: an advertised URL with a password is refused
    # next to one, with the variable named and the password not.
    advertised = f"http://peer:{enc(ADVERTISED_SECRET)}@127.0.0.1:{worker.port}"
    done = eddy({**env, "EDDY_API_ADVERTISED_URL": advertised}, "config")
    assert done.returncode == 2
    assert "EDDY_API_ADVERTISED_URL has a user:password@" in done.stderr
    shown["eddy config (advertised URL with a password)"] = done.stdout + done.stderr
    return shown
