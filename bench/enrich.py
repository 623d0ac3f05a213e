"""``python -m bench.enrich``: enriched records/s through ``sensor_rooms``.

One pre-loaded topic of readings (6 partitions), the room service started with a
fixed answer latency, one worker (exactly-once, 100 ms commits) per variant; the
rate is the drain rate of its committed offsets (:mod:`bench.drain`). The variants,
measured in the same run so their ratios hold on a noisy machine:

* ``0ms``: the service answers at once (the cost of the HTTP round trip itself);
* ``10ms-ordered`` and ``10ms-unordered``: the issue's line, 10 ms per answer,
  capacity 100 per partition.

The ceiling that latency and capacity set is ``capacity x partitions / latency``
per worker (60,000/s here); what stays below it is the per-record cost of the
client, the service and the worker sharing two cores.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console

from bench.contenders import ROOT, Contender, Input, Launched, eddy_env, eddy_prefix, input_topic
from bench.drain import drain
from bench.kafkaio import Kafka
from bench.machine import write_result
from bench.procs import Proc
from bench.run import free_port
from bench.workload import base_ms, preload, shape_for
from eddy.paths import eddy_home
from tools import localkafka

BOOTSTRAP = "127.0.0.1:9092"  # eddy's local broker (make bench starts it)
PARTITIONS = 6
CAPACITY = 100
VARIANTS = {  # name: (latency ms, ordered)
    "0ms-ordered": (0, True),
    "10ms-ordered": (10, True),
    "10ms-unordered": (10, False),
}


def start_rooms(latency_ms: int, log: Path) -> tuple[Proc, str]:
    port = free_port()
    argv = [sys.executable, "-m", "tools", "rooms", "--port", str(port)]
    proc = Proc("rooms", [*argv, "--latency-ms", str(latency_ms)], log, None, ROOT)
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        proc.check_alive()
        try:
            httpx.get(f"{url}/healthz", timeout=1)
            return proc, url
        except httpx.HTTPError:
            time.sleep(0.2)
    raise SystemExit(f"the room service did not start; see {log}")


def worker(inp: Input, app_id: str, run_dir: Path, url: str, ordered: bool) -> Proc:
    contender = Contender(app_id, "eddy", "exactly_once", 100)
    env = eddy_env(contender, inp, app_id, run_dir / f"{app_id}-state", free_port(), BOOTSTRAP)
    env.update(
        EDDY_AGENTS="sensor_rooms",
        EDDY_ROOM_SERVICE_URL=url,
        EDDY_LOOKUP_CAPACITY=str(CAPACITY),
        EDDY_LOOKUP_ORDERED=str(ordered).lower(),
    )
    argv = [sys.executable, "-m", "eddy", "worker"]
    return Proc(app_id, argv, run_dir / f"{app_id}.log", env, ROOT)


def measure(kafka: Kafka, inp: Input, run_dir: Path, name: str, cap_s: float) -> dict[str, Any]:
    latency_ms, ordered = VARIANTS[name]
    rooms, url = start_rooms(latency_ms, run_dir / f"rooms-{name}.log")
    app_id = f"bench-enrich-{uuid.uuid4().hex[:6]}"
    proc = worker(inp, app_id, run_dir, url, ordered)
    try:
        contender = Contender(name, "eddy", "exactly_once", 100)
        launched = Launched(contender, proc, f"{app_id}.sensor_rooms", None)
        result = drain(kafka, launched, inp, cap_s=cap_s)
        requests = httpx.get(f"{url}/stats", timeout=5).json()["requests"]
    finally:
        proc.stop()
        rooms.stop()
        kafka.delete_prefixed(app_id)
    return {**result.to_json(), "latency_ms": latency_ms, "ordered": ordered, "lookups": requests}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.enrich", description=__doc__)
    parser.add_argument("--readings", type=int, default=100_000)
    parser.add_argument("--cap-s", type=float, default=300.0)
    parser.add_argument("--results", type=Path, default=Path("bench/results/enrich.json"))
    args = parser.parse_args(argv)
    console = Console(highlight=False)
    localkafka.ensure_running()
    kafka = Kafka(BOOTSTRAP)
    run_dir = eddy_home() / "bench" / f"enrich-{time.strftime('%Y%m%d-%H%M%S')}"
    run_dir.mkdir(parents=True, exist_ok=True)
    topic = input_topic(f"bench-enrich-input-{uuid.uuid4().hex[:6]}-")
    kafka.create(topic, PARTITIONS)
    shape = shape_for(args.readings)
    preload(BOOTSTRAP, topic, PARTITIONS, shape, base_ms())
    inp = Input(topic, PARTITIONS, shape.total)
    results: dict[str, Any] = {}
    try:
        for name in VARIANTS:
            with console.status(f"{name}: draining {shape.total:,} readings..."):
                results[name] = measure(kafka, inp, run_dir, name, args.cap_s)
            console.print(
                f"{name:<16} {results[name]['events_per_s']:>8,} enriched records/s  "
                f"({results[name]['lookups']:,} lookups, "
                f"{results[name]['cpu_s_per_million']:.0f} CPU s per million)"
            )
    finally:
        kafka.delete_prefixed(eddy_prefix(inp))  # the input, the rooms and dead letters
        kafka.close()
    base = results["0ms-ordered"]["events_per_s"] or 1
    for name in VARIANTS:
        results[name]["vs_0ms"] = round(results[name]["events_per_s"] / base, 3)
    summary = {
        "readings": shape.total,
        "partitions": PARTITIONS,
        "capacity_per_partition": CAPACITY,
        "ceiling_at_10ms_per_s": CAPACITY * PARTITIONS * 100,
        "variants": results,
    }
    write_result(args.results, summary)
    console.print(f"written {args.results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
