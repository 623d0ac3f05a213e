"""Stop with a savepoint while windows are open and timers pending, resume from it
(the same app; a new app id; twice the input partitions), and the outputs are
those of an uninterrupted run, each exactly once.

Two agents, as users run them (``python -m eddy worker`` processes, the
``stop`` and ``--from-savepoint`` commands): sensor_averages (5 s windows, one
open across the stop, with its event-time timer pending) and eos_checker (a
running aggregate per key, emitted per record: any state lost or doubled by the
savepoint shows as a wrong aggregate or a sequence alert). The expected outputs
are computed here from the input alone.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiokafka.admin import NewPartitions

from eddy.examples.eos_checker import checker_topics
from eddy.examples.settings import CheckerSettings
from eddy.settings import Settings
from eddy.topics import TopicSpec, admin_client, ensure_topics
from tests.support.kafka import (
    end_offsets,
    produce,
    read_all,
    readings_topic,
    unique_settings,
    wait_until,
)
from tests.support.processes import WorkerProcess, settings_env

pytestmark = pytest.mark.e2e

SENSORS = 12
KEYS = 10
STEP_MS = 250
# An hour ago, on a window boundary: results carry their window's time as Kafka
# timestamp, and the broker's retention deletes records older than a week.
BASE_MS = (int(time.time()) // 3_600 - 1) * 3_600_000
FIRST_STEPS = range(70)  # ends 2.5 s into the window [15 s, 20 s)
SECOND_STEPS = range(70, 160)
WINDOW_MS = 5_000


def readings(steps: range) -> list[tuple[bytes, bytes]]:
    rows = []
    for i in steps:
        for s in range(SENSORS):
            body = {
                "sensor_id": f"s{s}",
                "timestamp_ms": BASE_MS + i * STEP_MS,
                "temperature": float((i * 7 + s * 3) % 50),
            }
            rows.append((f"s{s}".encode(), orjson.dumps(body)))
    return rows


def closers() -> list[tuple[bytes, bytes]]:
    """A reading per sensor a minute later: the watermark closes every earlier window."""
    at_ms = BASE_MS + SECOND_STEPS.stop * STEP_MS + 60_000
    return [
        (
            f"s{s}".encode(),
            orjson.dumps({"sensor_id": f"s{s}", "timestamp_ms": at_ms, "temperature": 0.0}),
        )
        for s in range(SENSORS)
    ]


def checker_topic(settings: Settings, name: str) -> str:
    """eos_checker's topic ``name`` (input, agg, alerts) on the broker: its default
    prefix (CheckerSettings), ``EDDY_TOPIC_PREFIX`` in front."""
    prefix = CheckerSettings.model_fields["checker_topic_prefix"].default
    return settings.topic(checker_topics(prefix)[name].name)


def checker_rows(seqs: range) -> list[tuple[bytes, bytes]]:
    rows = []
    for seq in seqs:
        for k in range(KEYS):
            body = {"id": seq * KEYS + k, "key": f"k{k}", "seq": seq, "amount": (seq * 31 + k) % 97}
            rows.append((f"k{k}".encode(), orjson.dumps(body)))
    return rows


def expected_windows() -> dict[tuple[str, int], dict[str, float]]:
    temps: dict[tuple[str, int], list[float]] = defaultdict(list)
    for _, value in readings(range(FIRST_STEPS.start, SECOND_STEPS.stop)):
        r = orjson.loads(value)
        start = r["timestamp_ms"] - r["timestamp_ms"] % WINDOW_MS
        temps[(r["sensor_id"], start)].append(r["temperature"])
    return {
        key: {"count": len(t), "avg": sum(t) / len(t), "min": min(t), "max": max(t)}
        for key, t in temps.items()
    }


def expected_aggregates(seqs: int) -> dict[tuple[str, int], dict[str, int]]:
    out = {}
    for k in range(KEYS):
        amounts = [(seq * 31 + k) % 97 for seq in range(seqs)]
        for seq in range(seqs):
            upto = amounts[: seq + 1]
            out[(f"k{k}", seq)] = {
                "count": seq + 1,
                "sum": sum(upto),
                "min": min(upto),
                "last_seq": seq,
            }
    return out


async def _lag(settings: Settings, agent: str, topic: str) -> int:
    """Records of ``topic`` that ``agent``'s consumer group has not committed."""
    admin = admin_client(settings)
    await admin.start()
    try:
        committed = await admin.list_consumer_group_offsets(f"{settings.app_id}.{agent}")
    finally:
        await admin.close()
    ends = await end_offsets(settings, topic)
    done = {tp.partition: meta.offset for tp, meta in committed.items() if tp.topic == topic}
    return sum(end - done.get(p, 0) for p, end in ends.items())


async def _grow(settings: Settings, topics: list[str], partitions: int) -> None:
    admin = admin_client(settings)
    await admin.start()
    try:
        await admin.create_partitions({t: NewPartitions(total_count=partitions) for t in topics})
    finally:
        await admin.close()


def _run_cli(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "eddy", *args],
        env=settings_env(settings),
        capture_output=True,
        text=True,
        timeout=180,
    )


@pytest.mark.parametrize("mode", ["same_app", "two_workers", "new_app", "doubled_partitions"])
async def test_stop_with_savepoint_and_resume_equals_an_uninterrupted_run(
    tmp_path: Path, mode: str
) -> None:
    settings = unique_settings(
        tmp_path, agents=("sensor_averages", "eos_checker"), partitions=3, commit_interval_ms=200
    )
    checker_in = checker_topic(settings, "input")
    inputs = [readings_topic(settings), checker_in]
    await ensure_topics(settings, [TopicSpec(t, 3) for t in inputs])
    first = readings(FIRST_STEPS)
    await produce(settings, inputs[0], first)
    await produce(settings, checker_in, checker_rows(range(40)))

    count = 2 if mode == "two_workers" else 1
    # Workers on one machine each need their own state directory (RocksDB locks it).
    workers = [
        WorkerProcess(settings, tmp_path / f"first-{n}.log", EDDY_STATE_DIR=str(tmp_path / f"s{n}"))
        for n in range(count)
    ]
    try:
        for worker in workers:
            worker.wait_ready()

        def settled() -> bool:
            owned = [w.status()["stages"]["eos_checker"]["partitions"] for w in workers]
            return all(owned) and sum(map(len, owned)) == 3

        await wait_until(settled, timeout_s=120)

        async def caught_up() -> bool:
            lags = [await _lag(settings, "sensor_averages", inputs[0])]
            lags.append(await _lag(settings, "eos_checker", inputs[1]))
            return lags == [0, 0]

        await wait_until(caught_up, timeout_s=120, every_s=0.5)
        stopped = await asyncio.to_thread(
            _run_cli, settings, "stop", "--savepoint", "--url", workers[0].base
        )
        assert stopped.returncode == 0, stopped.stderr
        match = re.search(r"savepoint (\d{8}T\d{9}Z): (\d+) rows", stopped.stdout)
        assert match, stopped.stdout
        savepoint_id = match.group(1)
        assert f"stopping {count} worker(s)" in stopped.stdout
        for worker in workers:  # each stopped by itself
            assert await asyncio.to_thread(worker.process.wait, 60) == 0
    finally:
        for worker in workers:
            worker.stop()

    # The savepoint holds the open window's readings and its pending timer.
    shown = await asyncio.to_thread(_run_cli, settings, "savepoint", "show", savepoint_id, "--json")
    assert shown.returncode == 0, shown.stderr
    tables = orjson.loads(shown.stdout)["stages"]["sensor_averages"]["tables"]
    assert tables["windows"]["rows"] == SENSORS  # [15 s, 20 s) of every sensor
    assert tables["timers"]["rows"] >= SENSORS

    env: dict[str, str] = {}
    reference = savepoint_id
    if mode == "same_app":
        # Stopped with a savepoint: a plain start (a pod restarting) is refused.
        plain = await asyncio.to_thread(_run_cli, settings, "worker")
        assert plain.returncode == 2
        assert f"--from-savepoint {savepoint_id}" in plain.stderr
        assert "Traceback" not in plain.stderr
    if mode == "new_app":
        env["EDDY_APP_ID"] = f"{settings.app_id}-b"
        reference = f"{settings.app_id}/{savepoint_id}"
    elif mode == "doubled_partitions":
        await _grow(settings, inputs, 6)

    await produce(settings, inputs[0], readings(SECOND_STEPS) + closers())
    await produce(settings, checker_in, checker_rows(range(40, 80)))
    resumed = WorkerProcess(settings, tmp_path / "second.log", "--from-savepoint", reference, **env)
    try:
        resumed.wait_ready()
        want_windows = expected_windows()
        averages_topic = settings.topic("sensor-averages")
        averages = await read_all(
            settings, averages_topic, min_records=len(want_windows), timeout_s=120
        )
        aggs = await read_all(
            settings, checker_topic(settings, "agg"), min_records=80 * KEYS, timeout_s=120
        )
        alerts = await read_all(settings, checker_topic(settings, "alerts"), quiet_s=1)
        if mode == "doubled_partitions":
            assert len(resumed.status()["stages"]["eos_checker"]["partitions"]) == 6
    finally:
        resumed.stop()

    got_windows: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for record in averages:
        r = orjson.loads(record.value)
        got_windows[(r["sensor_id"], r["window_start_ms"])].append(r)
    assert sorted(got_windows) == sorted(want_windows)
    for key, want in want_windows.items():
        (got,) = got_windows[key]  # exactly once
        assert {k: got[k] for k in want} == pytest.approx(want), key

    got_aggs: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for record in aggs:
        r = orjson.loads(record.value)
        got_aggs[(r["key"], r["seq"])].append(r)
    want_aggs = expected_aggregates(80)
    assert sorted(got_aggs) == sorted(want_aggs)
    for key, want in want_aggs.items():
        (got,) = got_aggs[key]
        assert {k: got[k] for k in want} == want, key
    assert alerts == []
