"""A reading two days ahead (a sensor's clock bug) on the real broker: the worker's
REST API still answers every other sensor's windows after it has been processed
and checkpointed, and they go only when their retention has passed by the
worker's own clock, on a partition that receives nothing more."""

from __future__ import annotations

import asyncio
import time
from functools import partial
from pathlib import Path

import httpx
import orjson
import pytest

from eddy.worker import Worker
from tests.support.kafka import produce, readings_topic, unique_settings, wait_until

pytestmark = pytest.mark.integration

DAY_MS = 86_400_000
RETENTION_S = 30
# An hour ago, on the hour: recent enough for the broker's retention.
BASE_MS = (time.time_ns() // 3_600_000_000_000 - 1) * 3_600_000
SENSORS = [f"sensor_{i}" for i in range(5)]
AHEAD = "sensor_clock_bug"


def reading(sensor: str, ts_ms: int) -> tuple[bytes, bytes]:
    body = {"sensor_id": sensor, "timestamp_ms": ts_ms, "temperature": 21.5}
    return sensor.encode(), orjson.dumps(body)


class Api:
    """sensor_averages' windows over the worker's REST API (uvicorn)."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client

    async def page(self, sensor: str) -> httpx.Response:
        return await self.client.get(f"/agents/sensor_averages/windows/{sensor}")

    async def starts(self, sensor: str) -> list[int]:
        """The sensor's window starts, from the data's first millisecond."""
        answer = await self.page(sensor)
        assert answer.status_code == 200, answer.text
        return [w["window_start_ms"] - BASE_MS for w in answer.json()["windows"]]

    async def watermark_ms(self) -> int | None:
        answer = await self.page(SENSORS[0])
        return answer.json()["freshness"]["watermark_ms"] if answer.is_success else None


async def test_a_reading_two_days_ahead_leaves_every_other_sensor_s_windows(
    tmp_path: Path,
) -> None:
    # One partition: the reading ahead moves the watermark every sensor's windows see.
    settings = unique_settings(tmp_path, partitions=1, results_retention_ms=RETENTION_S * 1_000)
    worker = Worker(settings)
    await worker.start()
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{worker.api_port}") as client:
            api = Api(client)

            async def watermark_reached(offset_ms: int) -> bool:
                watermark = await api.watermark_ms()
                return watermark is not None and watermark >= BASE_MS + offset_ms

            async def all_fired() -> bool:  # the last window fired by the reading ahead
                return all(len(starts) == 4 for starts in [await api.starts(s) for s in SENSORS])

            async def all_expired() -> bool:
                return all(a.status_code == 404 for a in [await api.page(s) for s in SENSORS])

            first_write_s = time.monotonic()  # no result was written before this
            data = [reading(s, BASE_MS + n * 1_000) for n in range(20) for s in SENSORS]
            await produce(settings, readings_topic(settings), data)
            await wait_until(partial(watermark_reached, 15_000), timeout_s=60)
            last_write_s = time.monotonic()  # the last windows are written after this
            await produce(
                settings, readings_topic(settings), [reading(AHEAD, BASE_MS + 2 * DAY_MS)]
            )
            await wait_until(partial(watermark_reached, 2 * DAY_MS - 2_000), timeout_s=30)
            await wait_until(all_fired, timeout_s=15)
            await asyncio.sleep(1.0)  # ten checkpoints (every 100 ms) since
            for sensor in SENSORS:
                assert await api.starts(sensor) == [0, 5_000, 10_000, 15_000]
            # Under event-time retention the reading ahead would have deleted them
            # all by now; none of them had reached its retention by the clock yet.
            assert time.monotonic() - first_write_s < RETENTION_S

            await wait_until(all_expired, timeout_s=RETENTION_S + 30, every_s=1.0)
            assert time.monotonic() - last_write_s >= RETENTION_S - 1
            answer = await api.page(SENSORS[0])
            assert answer.json()["detail"] == "no data for key 'sensor_0'"
    finally:
        await worker.stop()
