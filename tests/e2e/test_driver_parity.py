"""The test driver and a worker on the real broker give identical outputs, headers
included: the README's click counter and every agent of
``docs/examples/replay/agents``, each fed the same records both ways.

The replay agents run in a few workers, each holding agents that read no topic
in common (``EDDY_AGENTS``), so every agent sees exactly its example's records;
the driver runs each such group too.

Both run one partition (``EDDY_PARTITIONS=1``: the driver runs partition 0), with
the same app id, topic prefix and dead-letter topic, so the topics and the headers
that name them are the same. Repartitioned agents wait for no idle upstream
(``EDDY_UPSTREAM_IDLE_TIMEOUT_MS=0``), so their clock is the records' in both.
Every output topic and the dead-letter topic are read back whole and compared as
multisets of (key, value, timestamp, headers) per topic.

One thing cannot be equal and is checked instead: a record sent without a
timestamp (a dead letter) is stamped by the producer's clock, the wall clock in a
worker and processing time in the driver; the worker's must fall within the test.
``sensor_alerts``'s "rising" alert fires on a processing-time timer, one second of
the worker's wall clock after the reading: the test waits 2 s around each
threshold (a broadcast record, read by a consumer of its own) and moves the
driver's processing time on by as much, and the alert's time, the worker's wall
clock, is checked to be within the test.
"""

from __future__ import annotations

import asyncio
import importlib
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiokafka import AIOKafkaProducer

from eddy import App, TestDriver, examples
from eddy.kafka_clients import connection_kwargs
from eddy.serde import DecodeError
from eddy.settings import Settings, build
from tests.support.app_worker import AppWorker
from tests.support.kafka import TEST_AGENT_SETTINGS, read_all, wait_until
from tests.support.team_apps import app_env
from tests.support.user_apps import write_package

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
AGENTS_DIR = REPO / "docs" / "examples" / "replay" / "agents"
AGENTS = sorted(p.name.removesuffix(".input.jsonl") for p in AGENTS_DIR.glob("*.input.jsonl"))
# Event time two hours ago, on the hour (every window size divides an hour): the
# broker deletes segments older than its retention, and records from 1970 would
# roll a segment each and could vanish in the middle of the test.
BASE_MS = (time.time_ns() // 3_600_000_000_000 - 2) * 3_600_000
TIME_FIELDS = ("timestamp_ms", "ts", "ts_ms")
# The processing-time timer of sensor_alerts' "rising" alert (agents/sensor_alerts.py).
RISE_MS = 1_000
Line = tuple[str, dict[str, Any] | bytes]  # (topic, record or raw bytes)


# Broadcast (control) records are read by a consumer of their own, beside the
# records: the readings before one are let through first, and it is let through
# before the readings after it, as the example's lines mean.
CONTROL_TOPIC = "sensor-thresholds"
SETTLE_MS = 2_000


def start_worker(case: Case, log: Path) -> AppWorker:
    """``python -m eddy worker --app <spec>``, one ingest process."""
    return AppWorker(case.spec, case.cwd, case.env, log)


@dataclass
class Case:
    name: str
    app: App
    spec: str
    cwd: Path
    agents: list[str] | None
    lines: list[Line]
    env: dict[str, str] = field(default_factory=dict)
    worker: AppWorker | None = None

    @property
    def settings(self) -> Settings:
        return build(
            Settings,
            {
                "app_id": self.env["EDDY_APP_ID"],
                "topic_prefix": self.env["EDDY_TOPIC_PREFIX"],
                "dead_letter_topic": self.env["EDDY_DEAD_LETTER_TOPIC"],
                "upstream_idle_timeout_ms": 0,
                "partitions": 1,
            },
        )


def _shifted(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` ``BASE_MS`` later (a time that is not a number stays: it is bad input)."""
    return {k: v + BASE_MS if k in TIME_FIELDS and type(v) is int else v for k, v in record.items()}


def _agent_lines(name: str) -> list[Line]:
    """The example's records, shifted in time; its processing-time and watermark
    lines have no meaning for a worker (its clock is the wall clock)."""
    lines: list[Line] = []
    for raw in (AGENTS_DIR / f"{name}.input.jsonl").read_bytes().splitlines():
        item = orjson.loads(raw)
        if "topic" not in item:
            continue
        value = item["raw"].encode() if "raw" in item else _shifted(item["record"])
        lines.append((item["topic"], value))
    return lines


def _readme_lines() -> list[Line]:
    """Clicks of four users over three minutes, a little out of order, two late,
    one that is not JSON, and one far ahead so every minute closes."""
    users = ["ann", "bob", "cy", "dee"]
    rows: list[Line] = [
        ("clicks", {"user": users[i % 4], "page": f"/p{i % 5}", "ts_ms": i * 1_700 + (i % 3) * 300})
        for i in range(100)
    ]
    rows.insert(60, ("clicks", {"user": "ann", "page": "/late", "ts_ms": 5_000}))
    rows.insert(90, ("clicks", {"user": "bob", "page": "/late", "ts_ms": 61_000}))
    rows.insert(30, ("clicks", b'{"user": "eve", "page'))
    rows.append(("clicks", {"user": "ann", "page": "/", "ts_ms": 10 * 60_000}))
    return [(t, v if isinstance(v, bytes) else _shifted(v)) for t, v in rows]


def _agent_groups() -> list[list[str]]:
    """The replay agents in as few workers as can hold them while each agent sees
    exactly its own example's records: no two agents of a worker read a topic in
    common, or are fed one (a worker process costs seconds to start)."""
    built = examples.app.build(build(Settings, {}), AGENTS, TEST_AGENT_SETTINGS)
    internal = {i.name for a in built.agents.values() for i in a.internal}
    reads = {
        name: {t for s in built.agents[name].stages for t in s.sources if t not in internal}
        | {topic for topic, _ in _agent_lines(name)}
        for name in AGENTS
    }
    groups: list[tuple[list[str], set[str]]] = []
    for name in AGENTS:
        fits = next((g for g in groups if not g[1] & reads[name]), None)
        if fits is None:
            groups.append(([name], set(reads[name])))
        else:
            fits[0].append(name)
            fits[1].update(reads[name])
    return [names for names, _ in groups]


def _cases(tmp_path: Path) -> list[Case]:
    root = write_package(tmp_path / "outside")
    sys.path.insert(0, str(root))
    clickstream = importlib.import_module("clickstream.app")

    cases = [Case("readme", clickstream.app, "clickstream.app:app", root, None, _readme_lines())]
    for group in _agent_groups():
        lines = [line for name in group for line in _agent_lines(name)]
        cases.append(Case("+".join(group), examples.app, "eddy.examples:app", root, group, lines))
    for case in cases:
        tag = uuid.uuid4().hex[:8]
        case.env = app_env(tmp_path / case.name, tag)
        case.env.update(
            EDDY_PARTITIONS="1",
            EDDY_UPSTREAM_IDLE_TIMEOUT_MS="0",
            EDDY_NUM_STANDBY_REPLICAS="0",
            EDDY_APP_ID=f"parity-{tag}",
        )
        if case.agents is not None:
            case.env["EDDY_AGENTS"] = ",".join(case.agents)
    return cases


def _key_of(driver: TestDriver, topic: str, value: Any) -> str | None:
    """The key the topic declares for ``value`` (None for bytes that are not one)."""
    declared = {t.name: t for a in driver.built.agents.values() for t in a.topics}.get(topic)
    if declared is None or declared.key_of is None or isinstance(value, bytes):
        return None
    try:
        key = declared.key_of(declared.codec.decode(orjson.dumps(value)))
    except DecodeError:
        return None  # a record the agent dead-letters: sent without a key
    return key if isinstance(key, str) else None


def _topic_timestamp(value: Any) -> int:
    """The Kafka timestamp both paths give an input: its event time, or the base."""
    if isinstance(value, dict):
        for name in TIME_FIELDS:
            if type(value.get(name)) is int:
                return int(value[name])
    return BASE_MS


Record = tuple[bytes | None, bytes | None, int | None, tuple[tuple[str, bytes], ...]]


async def _run_driver(
    case: Case,
) -> tuple[dict[str, Counter[Record]], list[tuple[str, str | None, bytes, int]]]:
    """The case in the driver: each output topic's records, and the input as sent."""
    settings = case.settings
    values = {
        "app_id": settings.app_id,
        "topic_prefix": settings.topic_prefix,
        "dead_letter_topic": settings.dead_letter_topic,
        "upstream_idle_timeout_ms": 0,
        "partitions": 1,
        "num_standby_replicas": 0,
    }
    sent: list[tuple[str, str | None, bytes, int]] = []
    async with TestDriver(
        case.app, agents=case.agents, settings=values, agent_settings=TEST_AGENT_SETTINGS
    ) as driver:
        for topic, value in case.lines:
            raw = value if isinstance(value, bytes) else orjson.dumps(value)
            key = _key_of(driver, topic, value)
            stamp = _topic_timestamp(value)
            full = settings.topic(topic)
            control = topic == CONTROL_TOPIC
            if control:  # the worker's clock moves on while the test waits
                await driver.aadvance_time(SETTLE_MS)
            await driver.asend(full, raw, key=key, timestamp_ms=stamp)
            if control:
                await driver.aadvance_time(SETTLE_MS)
            sent.append((full, key, raw, stamp))
        if "sensor_alerts" in (case.agents or ()):
            await driver.aadvance_time(RISE_MS)  # the worker's clock moves on by itself
        internal = set(driver.internal_topics)
        # Every topic the agents may write, read back even if the driver wrote none.
        outputs: dict[str, Counter[Record]] = {settings.dead_letters: Counter()}
        for stage in driver.built.stages:
            outputs.update({t: Counter() for t in stage.output_topics if t not in internal})
        for s in driver.sent:
            if s.topic in internal or s.is_marker:
                continue
            record = (s.key, s.value, s.timestamp_ms, tuple(s.headers))
            outputs.setdefault(s.topic, Counter())[record] += 1
    return outputs, sent


async def _produce(settings: Settings, sent: list[tuple[str, str | None, bytes, int]]) -> None:
    producer = AIOKafkaProducer(**connection_kwargs(settings), enable_idempotence=True)
    await producer.start()
    try:
        for topic, key, raw, stamp in sent:  # one at a time: the order of the input
            control = topic == settings.topic(CONTROL_TOPIC)
            if control:
                await asyncio.sleep(SETTLE_MS / 1000)
            encoded = None if key is None else key.encode()
            await (await producer.send(topic, raw, key=encoded, timestamp_ms=stamp))
            if control:
                await asyncio.sleep(SETTLE_MS / 1000)
    finally:
        await producer.stop()


async def _read_worker(
    settings: Settings, expected: dict[str, Counter[Record]]
) -> dict[str, Counter[Record]]:
    """Every topic read at once: each waits for its own quiet spell, so reading
    them one after another would add those spells up."""

    async def read(topic: str, records: Counter[Record]) -> Counter[Record]:
        got = await read_all(settings, topic, min_records=sum(records.values()), timeout_s=60)
        return Counter((r.key, r.value, r.timestamp, tuple(r.headers)) for r in got)

    found = await asyncio.gather(*(read(t, r) for t, r in expected.items()))
    return dict(zip(expected, found, strict=True))


def _settle_clocks(
    case: Case, worker: dict[str, Counter[Record]], started_ms: int, ended_ms: int
) -> dict[str, Counter[Record]]:
    """A record the stage sent without a timestamp (a dead letter) carries the
    worker's wall clock: check it is within the test, then drop it as the driver
    has none. The "rising" alert's time is processing time: checked the same way."""
    settled: dict[str, Counter[Record]] = {}
    for topic, records in worker.items():
        out: Counter[Record] = Counter()
        for (key, value, stamp, headers), n in records.items():
            wall = topic == case.settings.dead_letters or b'"kind":"rising"' in (value or b"")
            if wall:
                assert started_ms <= (stamp or 0) <= ended_ms, (topic, value)
                stamp = None
            out[(key, value, stamp, headers)] += n
        settled[topic] = out
    return settled


def _drop_rising_time(outputs: dict[str, Counter[Record]]) -> dict[str, Counter[Record]]:
    return {
        topic: Counter(
            {
                (k, v, None if b'"kind":"rising"' in (v or b"") else t, h): n
                for (k, v, t, h), n in records.items()
            }
        )
        for topic, records in outputs.items()
    }


class _Phases:
    """How long each phase took, printed with ``-s``: what to cut when it is slow."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._last = time.monotonic()

    def done(self, name: str) -> None:
        now = time.monotonic()
        self.seconds[name] = round(now - self._last, 1)
        self._last = now


async def test_the_driver_and_a_worker_give_identical_outputs(tmp_path: Path) -> None:
    cases = _cases(tmp_path)
    started_ms = time.time_ns() // 1_000_000
    phases = _Phases()
    try:
        # The workers start while the driver runs here: both take seconds.
        for case in cases:
            case.worker = start_worker(case, tmp_path / f"{case.name}.log")
        runs = {case.name: await _run_driver(case) for case in cases}
        phases.done("driver")
        for case in cases:
            assert runs[case.name][0], f"{case.name}: the driver produced nothing to compare"
            assert case.worker is not None
            await wait_until(case.worker.ready, timeout_s=120)
        phases.done("workers ready")
        # The apps share no topic (each has a prefix of its own): their inputs go
        # at once, each app's in its order.
        await asyncio.gather(*(_produce(c.settings, runs[c.name][1]) for c in cases))
        phases.done("produce")
        read = [_read_worker(c.settings, runs[c.name][0]) for c in cases]
        results = dict(zip([c.name for c in cases], await asyncio.gather(*read), strict=True))
        phases.done("read back")
    finally:
        for case in cases:
            if case.worker is not None:
                case.worker.stop()
    ended_ms = time.time_ns() // 1_000_000
    differing = {}
    for case in cases:
        expected = runs[case.name][0]
        if "sensor_alerts" in (case.agents or ()):
            expected = _drop_rising_time(expected)
        got = _settle_clocks(case, results[case.name], started_ms, ended_ms)
        for topic in sorted(set(expected) | set(got)):
            driver_only = expected.get(topic, Counter()) - got.get(topic, Counter())
            worker_only = got.get(topic, Counter()) - expected.get(topic, Counter())
            if driver_only or worker_only:
                differing[f"{case.name} {topic}"] = (sorted(driver_only), sorted(worker_only))
    compared = {c.name: sum(sum(r.values()) for r in runs[c.name][0].values()) for c in cases}
    print(f"records compared per app: {compared}")
    print(f"phases (s): {phases.seconds}")
    assert differing == {}
