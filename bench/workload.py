"""The benchmark's input: simulated sensor readings, pre-loaded once, read by everyone.

Readings come from the simulator (:func:`tools.simulator.generate`), so the
workload is the one Eddy is built for: keyed by sensor, delivered up to
``DISORDER_MS`` out of order. Two choices make every contender's output
comparable with one offline recomputation:

* disorder never exceeds the watermark bound (1 s) and there are no outages, so
  no reading is late under any contender's rule (per key or per partition);
* after the stream, every sensor sends one closing reading ``CLOSING_AHEAD_MS``
  ahead, so every window of the stream closes on every partition.

Each reading is ~150 bytes of JSON: the three fields the pipeline reads plus
device metadata every contender has to parse past. Partitions are chosen with
Kafka's default (murmur2) partitioner and the Kafka timestamp is the event time,
so Java, librdkafka and aiokafka clients agree on where and when a reading is.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field

import orjson
from confluent_kafka import Producer  # type: ignore[import-untyped]

from eddy.app.queries import partition_for
from tools.chaos.recompute import windows_by_partition
from tools.simulator import SimulationConfig, generate

WINDOW_MS = 5_000
BOUND_MS = 1_000
DISORDER_MS = 1_000  # <= BOUND_MS: nothing is late
CLOSING_AHEAD_MS = 600_000
READINGS_PER_SENSOR_PER_S = 10
SEED = 20_251_126

WindowKey = tuple[str, int]  # sensor, window start


@dataclass(frozen=True)
class Shape:
    """How many readings, from how many sensors, at what event-time rate."""

    readings: int
    sensors: int

    @property
    def rate_per_s(self) -> int:
        return self.sensors * READINGS_PER_SENSOR_PER_S

    @property
    def total(self) -> int:
        """Records in the topic: the readings plus one closing reading per sensor."""
        return self.readings + self.sensors


def shape_for(readings: int) -> Shape:
    """1,000 sensors for full runs, fewer for small ones so windows still fill (each
    window holds ~50 readings of its sensor either way)."""
    sensors = 1_000 if readings >= 500_000 else 100 if readings >= 20_000 else 20
    return Shape(readings, sensors)


def base_ms(now_ms: int | None = None) -> int:
    """Event time of the first reading: two hours ago, on a whole window. Recent enough
    for the broker's 7-day retention, old enough that the closing readings (10 min
    ahead of the stream) are not in the future either."""
    now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    start = now - 2 * 3_600_000
    return start - start % WINDOW_MS


def encode(sensor: str, ts: int, temperature: float, seq: int) -> bytes:
    return orjson.dumps(
        {
            "sensor_id": sensor,
            "timestamp_ms": ts,
            "temperature": temperature,
            "unit": "F",
            "site": f"plant-{seq % 7}",
            "seq": seq,
            "battery_v": 3.3 + (seq % 90) / 100,
            "firmware": "2.4.1",
        }
    )


def readings(shape: Shape, start_ms: int) -> Iterator[tuple[str, int, float]]:
    """(sensor, timestamp, temperature) in delivery order, closing readings last."""
    config = SimulationConfig(
        rate_per_s=shape.rate_per_s,
        seed=SEED,
        start_ms=start_ms,
        sensors=shape.sensors,
        count=shape.readings,
        disorder_ms=DISORDER_MS,
        outage_probability=0.0,
    )
    last = start_ms
    for delivery in generate(config):
        r = delivery.reading
        last = max(last, r.timestamp_ms)
        yield r.sensor_id, r.timestamp_ms, r.temperature
    for n in range(1, shape.sensors + 1):
        yield f"sensor_{n}", last + CLOSING_AHEAD_MS, 50.0


@dataclass
class Expected:
    """What a correct run emits: per closed window, (count, avg, min, max)."""

    windows: dict[WindowKey, tuple[int, float, float, float]]
    per_partition: dict[int, int]
    total: int
    open_windows: int  # windows of the closing readings: never closed, never checked
    late: int = 0
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        return {
            "closed_windows": len(self.windows),
            "records": self.total,
            "per_partition": self.per_partition,
            "late": self.late,
        }


def preload(bootstrap: str, topic: str, partitions: int, shape: Shape, start_ms: int) -> Expected:
    """Produce the readings to ``topic`` (which must exist) and recompute the windows.

    One idempotent producer writes every partition in order, so each partition's
    order is the generated delivery order, which is what the recomputation reads.
    """
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    by_partition: dict[int, list[tuple[str, int, float]]] = defaultdict(list)
    failures: list[str] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            failures.append(str(err))

    for seq, (sensor, ts, temp) in enumerate(readings(shape, start_ms)):
        p = partition_for(sensor, partitions)
        by_partition[p].append((sensor, ts, temp))
        value = encode(sensor, ts, temp, seq)
        while True:
            try:
                producer.produce(
                    topic,
                    value,
                    sensor.encode(),
                    partition=p,
                    timestamp=ts,
                    on_delivery=on_delivery,
                )
                break
            except BufferError:
                producer.poll(0.05)
        if seq % 10_000 == 0:
            producer.poll(0)
    if producer.flush(120) or failures:
        raise RuntimeError(f"pre-loading {topic} failed: {failures[:1] or 'flush timed out'}")
    recomputed = windows_by_partition(by_partition, size_ms=WINDOW_MS, bound_ms=BOUND_MS)
    windows = {key: _summary(temps) for key, temps in recomputed.windows.items()}
    opened = {(s, ts - ts % WINDOW_MS) for rows in by_partition.values() for s, ts, _ in rows}
    return Expected(
        windows=windows,
        per_partition={p: len(rows) for p, rows in sorted(by_partition.items())},
        total=sum(len(rows) for rows in by_partition.values()),
        open_windows=len(opened) - len(windows),
        late=len(recomputed.late),
    )


def _summary(temps: list[float]) -> tuple[int, float, float, float]:
    return len(temps), sum(temps) / len(temps), min(temps), max(temps)
