"""A team's own agent, as they would write and run it: a package in a folder
outside the repository, a worker started with ``--app`` on the real broker, its
windows read over REST (typed in the OpenAPI schema) and from its output topic,
and the same input replayed with the CLI: all three agree. The same agent
written as ``@app.agent`` with a timer gives the same results."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from eddy.settings import Settings, build
from tests.support.app_worker import AppWorker
from tests.support.kafka import produce, read_all, wait_until
from tests.support.processes import free_port
from tests.support.user_apps import write_package

pytestmark = pytest.mark.e2e

MINUTE_MS = 60_000
# Two hours ago, on the minute: the broker keeps records that recent.
BASE_MS = (time.time_ns() // 60_000_000_000 - 120) * MINUTE_MS
USERS = ["ann", "bob", "cy", "dee"]


def clicks() -> list[dict[str, Any]]:
    """Three minutes of clicks, a little out of order, two of them late, then one
    far ahead so every minute closes."""
    rows = [
        {"user": USERS[i % 4], "page": f"/p{i % 5}", "ts_ms": BASE_MS + i * 1_700 + (i % 3) * 300}
        for i in range(100)
    ]
    rows.insert(60, {"user": "ann", "page": "/late", "ts_ms": BASE_MS + 5_000})
    rows.insert(90, {"user": "bob", "page": "/late", "ts_ms": BASE_MS + 61_000})
    rows += [{"user": u, "page": "/", "ts_ms": BASE_MS + 10 * MINUTE_MS} for u in USERS]
    return rows


def user_worker(root: Path, spec: str, env: dict[str, str], log: Path) -> AppWorker:
    """``python -m eddy worker --app <spec>`` run from the user's folder."""
    return AppWorker(spec, root, {**env, "EDDY_API_PORT": str(free_port())}, log)


def user_env(tmp_path: Path, tag: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EDDY_")}
    env.update(
        EDDY_APP_ID=f"clicks-{tag}",
        EDDY_TOPIC_PREFIX=f"u{tag}-",
        EDDY_STATE_DIR=str(tmp_path / "state"),
        EDDY_PARTITIONS="3",
        EDDY_COMMIT_INTERVAL_MS="100",
    )
    return env


def windows_of(records: list[dict[str, Any]]) -> list[tuple[str, int, int]]:
    return sorted((r["user"], r["window_start_ms"], r["value"]) for r in records)


def late_of(records: list[dict[str, Any]]) -> list[tuple[str, int]]:
    return sorted((r["user"], r["ts_ms"]) for r in records)


async def test_a_users_agent_runs_queries_and_replays_alike(tmp_path: Path) -> None:
    root = write_package(tmp_path / "outside")
    tag = uuid.uuid4().hex[:8]
    env = user_env(tmp_path, tag)
    settings = build(Settings, {"topic_prefix": f"u{tag}-"})
    await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "eddy", "topics", "create", "--app", "clickstream.app:app"],
        cwd=root, env=env, check=True, capture_output=True,
    )  # fmt: skip
    rows = clicks()
    fluent = user_worker(root, "clickstream.app:app", env, tmp_path / "fluent.log")
    timers = user_worker(
        root, "clickstream.timers:app", {**env, "EDDY_APP_ID": f"timers-{tag}"},
        tmp_path / "timers.log",
    )  # fmt: skip
    try:
        await wait_until(lambda: fluent.ready() and timers.ready(), timeout_s=120)
        records = [(r["user"].encode(), orjson.dumps(r)) for r in rows]
        await produce(settings, settings.topic("clicks"), records)
        minutes = {(u, (r["ts_ms"] - BASE_MS) // MINUTE_MS) for r in rows for u in [r["user"]]}
        topic = await read_all(
            settings, settings.topic("clicks-per-minute"), min_records=len(minutes) - len(USERS)
        )
        from_topic = windows_of([orjson.loads(r.value) for r in topic])
        late_topic = late_of(
            [orjson.loads(r.value) for r in await read_all(settings, settings.topic("clicks-late"))]
        )
        from_rest = []
        async with httpx.AsyncClient(base_url=fluent.url) as client:
            for user in USERS:
                page = await client.get(f"/agents/clicks_per_minute/windows/{user}")
                assert page.status_code == 200, page.text
                from_rest += page.json()["windows"]
            schema = (await client.get("/openapi.json")).json()
        timer_topic = await read_all(
            settings, settings.topic("clicks-per-minute-timers"), min_records=len(from_topic)
        )
        timer_late = await read_all(settings, settings.topic("clicks-late-timers"))
    finally:
        fluent.stop(30)
        timers.stop(30)

    replayed = replay(root, env, tmp_path, rows)
    from_replay = windows_of([r["value"] for r in replayed if r["topic"].endswith("per-minute")])
    late_replay = late_of([r["value"] for r in replayed if r["topic"].endswith("clicks-late")])

    assert from_topic, fluent.log_path.read_text()
    assert windows_of(from_rest) == from_topic == from_replay
    assert late_topic == late_replay == [("ann", BASE_MS + 5_000), ("bob", BASE_MS + 61_000)]
    window = schema["components"]["schemas"]["ClicksPerMinuteWindow"]
    assert window["properties"]["value"]["type"] == "integer"
    assert window["properties"]["user"]["type"] == "string"
    assert windows_of([orjson.loads(r.value) for r in timer_topic]) == from_topic
    assert late_of([orjson.loads(r.value) for r in timer_late]) == late_topic


def replay(
    root: Path, env: dict[str, str], tmp_path: Path, rows: list[dict[str, Any]]
) -> list[Any]:
    """``python -m eddy replay`` over the same clicks, from the user's folder."""
    source = tmp_path / "clicks.jsonl"
    source.write_bytes(
        b"".join(orjson.dumps({"topic": "clicks", "record": r}) + b"\n" for r in rows)
    )
    done = subprocess.run(
        [sys.executable, "-m", "eddy", "replay", "--app", "clickstream.app:app",
         "--agent", "clicks_per_minute", "--input", str(source),
         # as the worker, still running, holds them: its last minutes are still open
         "--keep-open"],
        cwd=root, env={**env, "EDDY_TOPIC_PREFIX": ""}, capture_output=True, check=True,
    )  # fmt: skip
    return [orjson.loads(line) for line in done.stdout.splitlines()]
