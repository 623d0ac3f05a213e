"""Quix Streams on the same workload: ``python -m bench.quix_app ...``.

Written the way Quix documents its windows: a ``StreamingDataFrame`` over the
readings, ``tumbling_window(5 s, grace 1 s)`` with count/mean/min/max
aggregations, ``.final()``, to an output topic. Event time comes from the
reading's ``timestamp_ms`` (a ``timestamp_extractor``), as Eddy reads it.

``closing_strategy="partition"`` closes windows when the partition's newest
timestamp passes ``end + grace``: Eddy's per-partition watermark and Kafka
Streams' per-task stream time. (Quix's default, ``"key"``, closes a sensor's
window only on that sensor's next reading.) With the benchmark's input, where no
reading is late, both strategies give the same windows.

Runs until SIGTERM, which Quix handles by committing and leaving the group.
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

from quixstreams import Application
from quixstreams.dataframe.windows import Count, Max, Mean, Min


def event_time(value: Any, headers: Any, timestamp: float, timestamp_type: Any) -> int:
    return int(value["timestamp_ms"])


def to_result(value: dict[str, Any], key: Any, timestamp: int, headers: Any) -> dict[str, Any]:
    return {
        "sensor_id": key,
        "window_start_ms": value["start"],
        "window_end_ms": value["end"],
        "count": value["count"],
        "avg": value["avg"],
        "min": value["min"],
        "max": value["max"],
    }


def build(args: argparse.Namespace) -> Application:
    app = Application(
        broker_address=args.bootstrap,
        consumer_group=args.group,
        auto_offset_reset="earliest",
        commit_interval=args.commit_interval_ms / 1000,
        processing_guarantee=args.guarantee,
        state_dir=args.state_dir,
        loglevel="WARNING",
    )
    readings = app.topic(
        args.input,
        key_deserializer="str",
        value_deserializer="json",
        timestamp_extractor=event_time,
    )
    results = app.topic(args.output, key_serializer="str", value_serializer="json")
    window = app.dataframe(readings).tumbling_window(duration_ms=5_000, grace_ms=1_000)
    aggregated = window.agg(
        count=Count(),
        avg=Mean("temperature"),
        min=Min("temperature"),
        max=Max("temperature"),
    )
    final = aggregated.final(closing_strategy=args.closing)
    final.apply(to_result, metadata=True).to_topic(results)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.quix_app", description=__doc__)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--state-dir", required=True)
    parser.add_argument(
        "--guarantee",
        choices=["at-least-once", "exactly-once"],
        required=True,
        help="Quix's processing_guarantee: at-least-once or exactly-once",
    )
    parser.add_argument("--commit-interval-ms", type=int, default=100)
    parser.add_argument(
        "--closing",
        choices=["partition", "key"],
        default="partition",
        help="closing_strategy: partition (the partition's newest timestamp, like Eddy) or key",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    build(args).run()


if __name__ == "__main__":
    main()
