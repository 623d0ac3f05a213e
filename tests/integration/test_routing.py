"""Any worker answers any key: a query for a key another worker owns is forwarded
to the owner; while the owner restarts the answer is 503 with Retry-After, never a
wrong or empty 200."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from eddy.app.queries import partition_for
from eddy.settings import Settings
from eddy.worker import Worker
from tests.support.kafka import produce, read_all, readings_topic, sensor_settings, wait_until
from tests.support.oracle import expected_windows

pytestmark = pytest.mark.integration

BASE_MS = (time.time_ns() // 3_600_000_000_000 - 1) * 3_600_000
SENSORS = [f"sensor_{i}" for i in range(1, 13)]
PIPELINE = "sensor_averages"


def reading(sensor: str, ts: int, temp: float) -> tuple[bytes, bytes]:
    body = {"sensor_id": sensor, "timestamp_ms": ts, "temperature": temp}
    return sensor.encode(), orjson.dumps(body)


def owned(worker: Worker) -> set[int]:
    runtime = worker.runtimes[PIPELINE]
    return set(runtime.tasks) - runtime.restoring


async def split_between(a: Worker, b: Worker, partitions: int) -> None:
    def settled() -> bool:
        mine, theirs = owned(a), owned(b)
        return bool(mine) and bool(theirs) and len(mine | theirs) == partitions

    await wait_until(settled, timeout_s=90)


async def ask(client: httpx.AsyncClient, worker: Worker, sensor: str) -> httpx.Response:
    return await client.get(f"http://127.0.0.1:{worker.api_port}/sensors/{sensor}/windows")


def summary(windows: list[dict[str, Any]]) -> list[tuple[int, int, float, float]]:
    return [(w["window_start_ms"], w["count"], w["min"], w["max"]) for w in windows]


async def windows_of(
    settings: Settings, steps: int
) -> dict[str, list[tuple[int, int, float, float]]]:
    """Produce ``steps`` readings of every sensor (and one closing all windows); every
    sensor's closed windows, once the workers' output has them all."""
    data = [
        (sensor, BASE_MS + step * 100, float(step % 50 + i))
        for step in range(steps)
        for i, sensor in enumerate(SENSORS)
    ]
    closing = [(s, BASE_MS + 600_000, 50.0) for s in SENSORS]
    await produce(settings, readings_topic(settings), [reading(*r) for r in data + closing])
    expected = expected_windows(
        data + closing,
        size_ms=sensor_settings().window_size_ms,
        bound_ms=sensor_settings().watermark_bound_ms,
        partitions=settings.partitions,
    )
    await read_all(settings, settings.topic("sensor-averages"), min_records=len(expected.windows))
    want: dict[str, list[tuple[int, int, float, float]]] = {}
    fields: dict[str, Any]
    for sensor, start in sorted(expected.windows):
        fields = dict(expected.summary((sensor, start)))
        row = (start, int(fields["count"]), float(fields["min"]), float(fields["max"]))
        want.setdefault(sensor, []).append(row)
    return want


async def top_hashtags_cover_both_workers(settings: Settings, a: Worker) -> None:
    """Top-N of a window ranks every partition's hashtags, not just the asked worker's."""
    tags = [f"tag{i}" for i in range(30)]
    tweets = [
        {"tweet_id": f"t{i}", "user": f"u{i % 11}", "text": f"#{tags[i % 30]} #{tags[i % 7]}"}
        | {"timestamp_ms": BASE_MS + i * 100}
        for i in range(400)
    ]
    closing = [
        {"tweet_id": f"c{u}", "user": f"u{u}", "text": "", "timestamp_ms": BASE_MS + 600_000}
        for u in range(11)
    ]
    topic = settings.topic("tweets")
    await produce(
        settings, topic, [(t["user"].encode(), orjson.dumps(t)) for t in tweets + closing]
    )
    counts: dict[str, int] = {}
    for t in tweets:
        for tag in dict.fromkeys(w[1:] for w in str(t["text"]).split()):
            counts[tag] = counts.get(tag, 0) + 1
    want = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
    await read_all(settings, settings.topic("hashtag-counts"), min_records=len(counts))
    async with httpx.AsyncClient(timeout=10) as client:
        url = f"http://127.0.0.1:{a.api_port}/hashtags/top"
        params = {"window_start_ms": BASE_MS, "order_by": "count", "limit": 5}
        top = (await client.get(url, params=params)).json()
    ranked = sorted(top["results"], key=lambda r: (-r["count"], r["hashtag"]))
    assert [(r["hashtag"], r["count"]) for r in ranked] == want
    assert top["partitions"] == list(range(settings.partitions))


async def test_a_key_owned_by_another_worker_is_forwarded_and_restarts_give_503(
    settings: Settings, tmp_path: Path
) -> None:
    settings = settings.model_copy(update={"agents": ("sensor_averages", "hashtag_counts")})
    settings_b = settings.model_copy(
        update={"state_dir": tmp_path / "state-b", "worker_id": f"{settings.worker_id}-b"}
    )
    a, b = Worker(settings), Worker(settings_b)
    await a.start()
    await b.start()
    restarted: Worker | None = None
    try:
        await split_between(a, b, settings.partitions)
        want_all = await windows_of(settings, steps=200)

        await top_hashtags_cover_both_workers(settings, a)

        sensor = next(s for s in SENSORS if partition_for(s, settings.partitions) in owned(b))
        want = want_all[sensor]
        async with httpx.AsyncClient(timeout=10) as client:
            answer = await ask(client, a, sensor)
            assert answer.status_code == 200, answer.text
            body = answer.json()
            assert summary(body["windows"]) == want
            assert body["freshness"]["served_by"] == b.worker_id  # forwarded, not local

            # B restarts while A keeps being asked: 503s, then the right answer again.
            seen: list[tuple[int, Any]] = []

            async def poll_until(done: Any) -> None:
                deadline = time.monotonic() + 90
                while time.monotonic() < deadline:
                    r = await ask(client, a, sensor)
                    seen.append((r.status_code, r))
                    if r.status_code == 200 and done(r.json()):
                        return
                    await asyncio.sleep(0.05)
                raise AssertionError(f"no answer after the restart: {seen[-1][1].text}")

            stopping = asyncio.create_task(b.stop())
            await poll_until(lambda body: body["freshness"]["served_by"] == a.worker_id)
            await stopping
            restarted = Worker(settings_b)
            await restarted.start()
            await split_between(a, restarted, settings.partitions)
            await poll_until(lambda body: True)

        statuses = {status for status, _ in seen}
        assert statuses <= {200, 503}, [r.text for s, r in seen if s not in (200, 503)]
        assert 503 in statuses
        for status, r in seen:
            if status == 503:
                assert r.headers["retry-after"]
                assert r.headers["content-type"] == "application/problem+json"
                assert r.json()["partition"] == partition_for(sensor, settings.partitions)
            else:
                assert summary(r.json()["windows"]) == want
    finally:
        await a.stop()
        await (restarted or b).stop()
