"""End-to-end latency at a fixed offered load, produce -> ``read_committed`` reader.

A windowed result exists only once its window closes: on the partition's first
reading at or past ``window end + 1 s`` (the watermark bound, Kafka Streams'
grace, Quix's grace). So a result's latency is measured from the produce of
that closing reading to the moment a ``read_committed`` reader of the output
sees the result. Readings are produced live with their event time equal to the
wall clock, in order, so the closing reading of a window is found by bisecting
its partition's produce times. The first ``WARMUP_MS`` are left out (group
join, first fetches), and so are windows whose closing reading was produced
after the load stopped.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field

import orjson
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # type: ignore[import-untyped]

from bench.background import Background
from bench.workload import BOUND_MS, WINDOW_MS, encode
from eddy.app.queries import partition_for

WARMUP_MS = 20_000
TICK_S = 0.01


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def due(elapsed_s: float, rate_per_s: int) -> int:
    """Readings an open-loop load at ``rate_per_s`` owes after ``elapsed_s``: the pace
    follows the clock, so a late tick catches up instead of lowering the rate."""
    return int(elapsed_s * rate_per_s)


@dataclass
class LiveLoad(Background):
    """Readings produced at ``rate_per_s`` until stopped; remembers when each partition's
    event time advanced."""

    thread_name = "bench-live-load"
    bootstrap: str
    topic: str
    partitions: int
    rate_per_s: int
    sensors: int = 1_000
    # Produce times per partition, for latencies(); a soak turns them off (48k
    # readings/s for 30 min would be 86M of them) and keeps per_window only.
    keep_times: bool = True
    produced: int = 0
    started_ms: int = 0
    stopped_ms: int = 0
    times: dict[int, list[int]] = field(default_factory=lambda: defaultdict(list))
    # readings produced per window start: what a correct worker's results add up to
    per_window: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    failed: int = 0  # readings the broker did not take (delivery errors)

    def _run(self) -> None:
        producer = Producer(
            {"bootstrap.servers": self.bootstrap, "linger.ms": 5, "enable.idempotence": True}
        )
        names = [f"sensor_{n}" for n in range(1, self.sensors + 1)]
        where = [partition_for(s, self.partitions) for s in names]
        self.started_ms = now_ms()
        started = time.monotonic()
        seq = 0
        while not self._stop.is_set():
            # Open loop: produce what the clock says is due, however late the last tick was.
            owed = due(time.monotonic() - started, self.rate_per_s)
            while seq < owed:
                i = seq % self.sensors
                ts = now_ms()
                value = encode(names[i], ts, 60.0 + (seq % 50) / 10, seq)
                try:
                    producer.produce(
                        self.topic,
                        value,
                        names[i].encode(),
                        partition=where[i],
                        timestamp=ts,
                        on_delivery=self._on_delivery,
                    )
                except BufferError:
                    producer.poll(0.01)
                    continue
                if self.keep_times:
                    self.times[where[i]].append(ts)
                self.per_window[ts - ts % WINDOW_MS] += 1
                seq += 1
            self.produced = seq  # readable while the load runs
            producer.poll(0)
            time.sleep(TICK_S)
        self.stopped_ms = now_ms()
        producer.flush(30)
        self.produced = seq

    def _on_delivery(self, err: object, _msg: object) -> None:
        if err is not None:
            self.failed += 1

    def closed_at_ms(self, sensor: str, window_start_ms: int) -> int | None:
        """Produce time of the reading that closed this window, if it was produced."""
        times = self.times[partition_for(sensor, self.partitions)]
        i = bisect.bisect_left(times, window_start_ms + WINDOW_MS + BOUND_MS)
        return times[i] if i < len(times) else None


class ResultReader:
    """Reads window results as they commit and notes when each was first seen."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.seen: dict[tuple[str, int], int] = {}
        self._stop = threading.Event()
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"bench-latency-{time.monotonic_ns()}",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "fetch.wait.max.ms": 10,
            }
        )
        self._consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        self._thread = threading.Thread(target=self._run, name="bench-reader", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for msg in self._consumer.consume(1_000, timeout=0.05):
                err = msg.error()
                if err is not None and err.code() != KafkaError._PARTITION_EOF:
                    continue
                value = msg.value()
                if err is None and value is not None:
                    seen = now_ms()
                    r = orjson.loads(value)
                    self.seen.setdefault((r["sensor_id"], int(r["window_start_ms"])), seen)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self._consumer.close()


def percentile(values: list[int], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, int(q * len(ordered)))])


def latencies(load: LiveLoad, reader: ResultReader) -> list[int]:
    out = []
    for (sensor, start), seen in reader.seen.items():
        closed = load.closed_at_ms(sensor, start)
        if closed is None or closed > load.stopped_ms:
            continue
        if closed < load.started_ms + WARMUP_MS:
            continue
        out.append(seen - closed)
    return out
