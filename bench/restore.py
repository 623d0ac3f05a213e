"""Restore from a changelog, alone: ``python -m bench.restore``.

Writes a changelog like the one ``sensor_averages`` leaves after the full drain
(``--records`` window, timer and result records over ``--partitions`` partitions,
committed in transactions of ``--per-commit`` records by one transactional
producer per partition, as a worker's checkpoints do), then rebuilds every
partition's store from it with the worker's own code
(:func:`eddy.runtime.restore.restore_partition`, all partitions at once in one
event loop, as a worker opening them does), ``--repeat`` times into fresh
directories. The rate is changelog records over the wall time of the slowest
partition; ``--profile`` writes a pyinstrument report of one restore instead.
The full benchmark's restore figure also counts a worker's start-up; this one
isolates the changelog read and the local writes. After each restore, every
partition is opened again on its now current state, as a restart or a rebalance
that keeps the state directory does, and that is timed too (``reopen_ms``:
nothing to apply, so it is the fixed cost of opening a partition).

Needs the local broker (``make kafka-start``); the topic is deleted afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaProducer, TopicPartition

from bench.errors import BenchError
from bench.kafkaio import Kafka
from eddy.eventtime import Timer, TimeWindow
from eddy.runtime.restore import restore_partition
from eddy.runtime.stores import LocalStores
from eddy.settings import Settings, build
from eddy.tables.codecs import encode_timer, encode_window_first, encode_window_key

RESULTS = Path(__file__).resolve().parent / "results"


def changelog_record(rng: random.Random, n: int) -> tuple[bytes, bytes | None]:
    """One record shaped like a ``sensor_averages`` changelog record: mostly open
    windows (``[accumulator, fired, trigger, state]``), some timers and results."""
    sensor = f"sensor_{rng.randrange(1_000)}"
    start = 1_764_000_000_000 + (n // 1_000) * 5_000
    window = TimeWindow(start, start + 5_000)
    kind = n % 8
    if kind < 5:
        value = [[rng.randrange(50), rng.uniform(1e3, 4e3), 20.5, 89.5], False, {}, {}]
        return b"\x07windows" + encode_window_key((sensor, window)), json.dumps(value).encode()
    if kind < 7:
        timer = Timer(start + 4_999, "window.1.cleanup", sensor, start, start + 5_000)
        return b"\x06timers" + encode_timer(timer), None if kind == 6 else b""
    result = {"sensor_id": sensor, "window_start_ms": start, "count": 50, "avg": 55.5}
    return b"\x11results.by_window" + encode_window_first((window, sensor)), json.dumps(
        result
    ).encode()


async def write_changelog(
    settings: Settings, topic: str, partitions: int, records: int, per_commit: int
) -> None:
    async def one(partition: int) -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=settings.bootstrap_servers,
            transactional_id=f"{topic}-{partition}",
            enable_idempotence=True,
            acks="all",
            linger_ms=5,
        )
        await producer.start()
        rng = random.Random(partition)
        try:
            for first in range(0, records // partitions, per_commit):
                await producer.begin_transaction()
                batch = producer.create_batch()
                for n in range(first, min(first + per_commit, records // partitions)):
                    key, value = changelog_record(rng, n)
                    if batch.append(key=key, value=value, timestamp=None) is None:
                        batch.close()
                        await producer.send_batch(batch, topic, partition=partition)
                        batch = producer.create_batch()
                        batch.append(key=key, value=value, timestamp=None)
                batch.close()
                await producer.send_batch(batch, topic, partition=partition)
                await producer.commit_transaction()
        finally:
            await producer.stop()

    await asyncio.gather(*(one(p) for p in range(partitions)))


async def restore_all(settings: Settings, topic: str, partitions: int, root: Path) -> int:
    stores = LocalStores(root)
    try:
        applied = await asyncio.gather(
            *(
                restore_partition(settings, stores, p, TopicPartition(topic, p))
                for p in range(partitions)
            )
        )
    finally:
        stores.close_all()
    return sum(applied)


def reopen_ms(settings: Settings, topic: str, partitions: int, root: Path) -> float:
    """How long opening every partition again takes when its local state is current
    (a restart or rebalance that keeps the state directory): nothing to apply."""
    started = time.monotonic()
    applied = asyncio.run(restore_all(settings, topic, partitions, root))
    if applied:
        raise BenchError(f"a reopen of current state applied {applied} records")
    return (time.monotonic() - started) * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.restore", description=__doc__)
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--records", type=int, default=360_000)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--per-commit", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", type=Path, help="write a pyinstrument report of one restore")
    parser.add_argument("--label", default="")
    parser.add_argument("--output", type=Path, default=RESULTS / "restore.json")
    args = parser.parse_args(argv)

    tag = uuid.uuid4().hex[:6]
    topic = f"bench-restore-{tag}-changelog"
    settings = build(
        Settings,
        {"bootstrap_servers": args.bootstrap, "app_id": f"bench-restore-{tag}", "api_port": 0},
    )
    kafka = Kafka(args.bootstrap)
    kafka.create(topic, args.partitions, {"cleanup.policy": "compact"})
    try:
        started = time.monotonic()
        asyncio.run(
            write_changelog(settings, topic, args.partitions, args.records, args.per_commit)
        )
        print(f"wrote {args.records:,} changelog records in {time.monotonic() - started:.1f} s")
        rates: list[float] = []
        reopens_ms: list[float] = []
        for _ in range(1 if args.profile else args.repeat):
            with tempfile.TemporaryDirectory(prefix="eddy-restore-") as tmp:
                profiler: Any = None
                if args.profile:
                    from pyinstrument import Profiler

                    profiler = Profiler(interval=0.0005)
                    profiler.start()
                started = time.monotonic()
                applied = asyncio.run(restore_all(settings, topic, args.partitions, Path(tmp)))
                elapsed = time.monotonic() - started
                if profiler is not None:
                    profiler.stop()
                    args.profile.write_text(profiler.output_text(unicode=True, color=False))
                    print(f"profile: {args.profile}")
                reopens_ms.append(reopen_ms(settings, topic, args.partitions, Path(tmp)))
            rates.append(applied / elapsed)
            print(
                f"restored {applied:,} records in {elapsed:.2f} s = {applied / elapsed:,.0f}/s; "
                f"reopened them in {reopens_ms[-1]:.0f} ms"
            )
    finally:
        kafka.delete([topic])
        kafka.close()
    if not args.profile:
        report = {
            "label": args.label,
            "records": args.records,
            "partitions": args.partitions,
            "per_commit": args.per_commit,
            "rates_per_s": [round(r) for r in rates],
            "best_per_s": round(max(rates)),
            "reopen_ms": [round(ms) for ms in reopens_ms],
        }
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(report, indent=2) + "\n")
        print(f"best {max(rates):,.0f} records/s; wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
