"""REST point queries at a fixed rate, open loop, on keep-alive connections.

A minimal HTTP/1.1 client on asyncio streams: a general client (httpx) spends
about a millisecond of CPU per request, which at 500 requests/s would take a
quarter of this two-core machine away from the worker being measured. Requests
are due at fixed times; latency counts from when a request was due, so a slow
answer delays (and is charged to) the requests queued behind it.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field

from bench.background import Background

# Enough connections that a slow answer on one does not hold up the schedule: a
# client pool of this size is what a dashboard backend would keep.
CONNECTIONS = 32


@dataclass
class RestLoad(Background):
    thread_name = "bench-rest"
    port: int
    rate_per_s: int
    sensors: int
    latencies_us: list[int] = field(default_factory=list)
    statuses: dict[int, int] = field(default_factory=dict)
    errors: int = 0

    def _run(self) -> None:
        asyncio.run(self._requests())

    async def _requests(self) -> None:
        queue: asyncio.Queue[float] = asyncio.Queue()
        workers = [asyncio.create_task(self._connection(queue)) for _ in range(CONNECTIONS)]
        started = time.monotonic()
        sent = 0
        while not self._stop.is_set():
            due = int((time.monotonic() - started) * self.rate_per_s)
            for n in range(sent, due):
                queue.put_nowait(started + n / self.rate_per_s)
            sent = max(sent, due)
            await asyncio.sleep(0.002)
        for w in workers:
            w.cancel()
        await asyncio.gather(*workers, return_exceptions=True)

    async def _connection(self, queue: asyncio.Queue[float]) -> None:
        rng = random.Random()
        reader: asyncio.StreamReader | None = None
        writer: asyncio.StreamWriter | None = None
        while True:
            due = await queue.get()
            sensor = f"sensor_{rng.randint(1, self.sensors)}"
            request = (
                f"GET /sensors/{sensor}/windows?limit=10 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
            ).encode()
            try:
                if writer is None or reader is None:
                    reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
                writer.write(request)
                status = await _response(reader)
            except (OSError, asyncio.IncompleteReadError, ValueError):
                self.errors += 1
                writer = reader = None
                continue
            self.latencies_us.append(int((time.monotonic() - due) * 1_000_000))
            self.statuses[status] = self.statuses.get(status, 0) + 1


async def _response(reader: asyncio.StreamReader) -> int:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.lower() == "content-length":
            length = int(value)
    if length:
        await reader.readexactly(length)
    return status


async def _probe(port: int, sensors: int, requests: int, fresh: bool) -> list[int]:
    """Closed loop, one request at a time: the service time without any queueing."""
    rng = random.Random(1)
    out: list[int] = []
    reader = writer = None
    for _ in range(requests):
        started = time.monotonic()
        if writer is None or reader is None or fresh:
            if writer is not None:
                writer.close()
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        sensor = f"sensor_{rng.randint(1, sensors)}"
        writer.write(f"GET /sensors/{sensor}/windows?limit=10 HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        await _response(reader)
        out.append(int((time.monotonic() - started) * 1_000_000))
    if writer is not None:
        writer.close()
    return out


def probe(port: int, sensors: int, requests: int = 200, fresh: bool = False) -> list[int]:
    """Latencies (us) of ``requests`` sequential queries, each on a new connection if
    ``fresh``, else all on one kept-alive connection."""
    return asyncio.run(_probe(port, sensors, requests, fresh))
