"""CPU of one REST point query in the query process, without HTTP and without load.

Run ``python -m bench.querycost`` (``--requests N``, ``--repeat R``). The query
process's API (``eddy.api.app.create_app`` over ``eddy.plane``'s backend) reads real
RocksDB stores, written and reported as ingest processes write and report them,
through secondary instances; the requests are ASGI calls of
``GET /sensors/{key}/windows?limit=10`` (10 windows of 20 per key), so the figure
is the application's CPU per request: routing, parameters, the read, the answer.
HTTP parsing and socket I/O come on top (the full benchmark's REST extra
measures the whole). Two variants take turns in each round, the best round of
each counts: ``fastapi`` (every request through FastAPI) and ``fast-path`` (what
``eddy worker`` runs, api/fastpath.py). ``--catch-up-every N`` also publishes a
checkpoint every N requests, so that a share of requests pays a secondary's
catch-up. Results go to ``bench/results/querycost.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from eddy.plane.stages import Secondaries
from tests.support.queryhost import Host, commit, query_api, query_plane, sensor_in

RESULTS = Path(__file__).resolve().parent / "results"
PARTITIONS_READ = (0, 1, 2, 3)  # the ones the hand-written host serves


async def _call(api: Any, path: str) -> int:
    """One GET through the ASGI app; its status."""
    sent: list[dict[str, Any]] = []
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"limit=10",
        "root_path": "",
        "headers": [(b"host", b"eddy")],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 8000),
    }

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await api(scope, receive, send)
    return int(sent[0]["status"])


async def _round(api: Any, host: Host, requests: int, catch_up_every: int) -> float:
    """CPU µs per request over ``requests`` requests."""
    sensors = [sensor_in(p) for p in PARTITIONS_READ]
    started = time.process_time()
    for n in range(requests):
        if catch_up_every and n % catch_up_every == 0:
            p = n // catch_up_every % len(sensors)
            # Written by the "ingest process": not the query's CPU, but counted here.
            commit(host.stores[p], sensors[p], [200_000 + n * 5], 100 + n)
            host.publish()
        status = await _call(api, f"/sensors/{sensors[n % len(sensors)]}/windows")
        assert status == 200, status
    return (time.process_time() - started) * 1e6 / requests


async def measure(requests: int, repeat: int, catch_up_every: int) -> dict[str, float]:
    root = Path(tempfile.mkdtemp(prefix="eddy-querycost-"))
    host = Host(root)
    secondaries = Secondaries(root / "secondary")
    plane = query_plane(host, root, secondaries)
    apis = {"fastapi": query_api(plane, fast=False), "fast-path": query_api(plane)}
    for partition in PARTITIONS_READ:
        sensor = sensor_in(partition)
        commit(host.stores[partition], sensor, [i * 5_000 for i in range(20)], 1)
    host.publish()
    best = dict.fromkeys(apis, float("inf"))
    try:
        for _ in range(repeat):
            for name, api in apis.items():
                best[name] = min(best[name], await _round(api, host, requests, catch_up_every))
    finally:
        secondaries.close()
        host.close()
    return {name: round(us, 1) for name, us in best.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.querycost", description=__doc__)
    parser.add_argument("--requests", type=int, default=3_000, help="requests per round")
    parser.add_argument("--repeat", type=int, default=5, help="rounds; the best counts")
    parser.add_argument("--catch-up-every", type=int, default=0, help="0: no new checkpoints")
    parser.add_argument("--results-dir", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    found = asyncio.run(measure(args.requests, args.repeat, args.catch_up_every))
    for name, us in found.items():
        print(f"{name:>10}: {us:7.1f} CPU µs per point query")
    ratio = found["fastapi"] / found["fast-path"]
    print(f"fast path: {ratio:.2f}x less CPU per query")
    row = {"requests": args.requests, "repeat": args.repeat,
           "catch_up_every": args.catch_up_every, "cpu_us_per_query": found,
           "ratio": round(ratio, 2)}  # fmt: skip
    args.results_dir.mkdir(parents=True, exist_ok=True)
    (args.results_dir / "querycost.json").write_text(json.dumps(row, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
