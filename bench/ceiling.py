"""The Python ceiling: a bare aiokafka ``getmany`` loop over the input.

``python -m bench.ceiling --mode consume|json ...`` consumes the topic the way
Eddy's runtime does (a group consumer, ``read_committed``, ``getmany`` of up to
10,000 records with a 100 ms timeout) and does nothing else with the records
(``consume``), or also parses every value with orjson, the fastest JSON parser
Python has (``json``). It commits offsets every ``--commit-interval-ms`` like a
stream processor, so the harness measures it exactly as it measures every
contender (committed offsets reaching the end), and it exits at the end of the
input. Nothing a stream processor does per record can be cheaper than this.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition


async def run(args: argparse.Namespace) -> dict[str, float]:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        client_id=args.group,
        enable_auto_commit=False,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
    )
    await consumer.start()
    try:
        tps = [TopicPartition(args.topic, p) for p in range(args.partitions)]
        # The input is written without transactions: its end offsets count its records.
        total = sum((await consumer.end_offsets(tps)).values())
        consumer.subscribe([args.topic])
        decode = args.mode == "json"
        count = 0
        fields = 0
        interval_s = args.commit_interval_ms / 1000
        last_commit = time.monotonic()
        first = 0.0
        while count < total:
            batch = await consumer.getmany(timeout_ms=100, max_records=10_000)
            for records in batch.values():
                if not first:
                    first = time.monotonic()
                count += len(records)
                if decode:
                    for record in records:
                        fields += len(orjson.loads(record.value))
            now = time.monotonic()
            if count >= total or now - last_commit >= interval_s:
                await consumer.commit()
                last_commit = now
        last = time.monotonic()
        return {"records": count, "seconds": last - first, "per_s": count / (last - first)}
    finally:
        await consumer.stop()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.ceiling", description=__doc__)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partitions", type=int, required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument(
        "--mode",
        choices=["consume", "json"],
        default="consume",
        help="consume: only read the records; json: also parse every value with orjson",
    )
    parser.add_argument("--commit-interval-ms", type=int, default=100)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(run(args))), flush=True)


if __name__ == "__main__":
    main()
