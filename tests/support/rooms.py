"""The room lookup service as a process (``python -m tools rooms``), for tests."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import orjson

from tests.support.kafka import HOUR_AGO_MS
from tests.support.processes import free_port

SENSORS = [f"sensor_{n}" for n in range(1, 31)]  # sensor_13 and sensor_26 have no room


def readings(count: int) -> list[tuple[bytes, bytes]]:
    """``count`` readings of the sensors in turn, 10 ms of event time apart."""
    rows = []
    for i in range(count):
        sensor = SENSORS[i % len(SENSORS)]
        body = {"sensor_id": sensor, "timestamp_ms": HOUR_AGO_MS + i * 10, "temperature": 20.0}
        rows.append((sensor.encode(), orjson.dumps(body)))
    return rows


class RoomService:
    def __init__(self, log_path: Path, *, latency_ms: int, jitter_ms: int = 0) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._log = log_path.open("ab")
        args = ["--port", str(self.port), "--latency-ms", str(latency_ms)]
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tools", "rooms", *args, "--jitter-ms", str(jitter_ms)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"room service exited: {log_path.read_text()[-2_000:]}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.2)
        raise AssertionError("room service not up after 60 s")

    def stats(self) -> dict[str, Any]:
        body: dict[str, Any] = httpx.get(f"{self.url}/stats", timeout=5).json()
        return body

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)
        self._log.close()
