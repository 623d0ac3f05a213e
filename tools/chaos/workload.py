"""The seeded input of a chaos run (pure): checker records and sensor readings.

Checker records ``{id, key, seq, amount}``: ids ``0..N-1``, keys drawn at random,
``seq`` counting from 0 per key, amounts including negatives (so ``min`` and
``sum`` both move). Sensor readings: a steady stream disordered by at most the
watermark bound (so none is late by accident), a few deliberate stragglers far
behind the stream (late by construction), a few malformed records (dead letters),
and one closing reading per sensor far ahead so that every window closes. The
reference agents' streams (tweets, game events, vehicle speeds, threshold
updates) come from ``tools.chaos.streams``.

Malformed records carry the header ``chaos.kind: malformed`` so the verifier can
tell them apart from the input read back, without reimplementing Eddy's decoder.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

import orjson

STEP_MS = 20  # event time between consecutive sensor readings
CLOSING_AHEAD_MS = 600_000
KIND_HEADER = "chaos.kind"
MALFORMED = b"malformed"
STRAGGLER = b"straggler"

Headers = tuple[tuple[str, bytes], ...]


@dataclass(frozen=True, slots=True)
class Message:
    stream: str  # "checker", "sensor", "tweets"...: which input topic (see Feeder)
    key: bytes
    value: bytes | None
    headers: Headers = ()


@dataclass(frozen=True)
class Workload:
    checker: tuple[Message, ...]
    sensor: tuple[Message, ...]
    # The reference agents' streams (tools.chaos.streams), by stream name.
    # Threshold updates are not among them: they are fed before the workers start.
    reference: dict[str, tuple[Message, ...]] = field(default_factory=dict)
    thresholds: tuple[Message, ...] = ()

    @property
    def streams(self) -> list[tuple[Message, ...]]:
        return [self.checker, self.sensor, *self.reference.values()]

    @property
    def total(self) -> int:
        return sum(len(stream) for stream in self.streams)

    def interleaved(self) -> list[Message]:
        """Every stream merged in proportion, so all progress together."""
        merged = []
        for n, stream in enumerate(self.streams):
            merged += [(i / len(stream), n, m) for i, m in enumerate(stream)]
        merged.sort(key=lambda item: (item[0], item[1]))
        return [m for _, _, m in merged]


def recent_base_ms() -> int:
    """Event time of the first reading: an hour ago, on a whole minute.

    Output records carry event time as their Kafka timestamp, so a fixed instant
    would sooner or later fall behind the broker's time retention
    (``log.retention.hours``) and results would be deleted mid-run. Only the
    offsets from this base matter to the checks, so a run replayed later gets a
    new base and the same windows relative to it.
    """
    return (time.time_ns() // 1_000_000 // 60_000) * 60_000 - 3_600_000


def key_name(index: int) -> str:
    return f"k{index:05d}"


def sensor_name(index: int) -> str:
    return f"sensor_{index:02d}"


def build(
    seed: int,
    records: int,
    keys: int,
    readings: int,
    sensors: int,
    base_ms: int,
    bound_ms: int,
    partitions: int = 6,
) -> Workload:
    from tools.chaos import streams  # it builds on this module's Message

    names = [sensor_name(i) for i in range(sensors)]
    reference = dict(streams.all_streams(seed, readings, names, base_ms, bound_ms, partitions))
    threshold_updates = reference.pop("thresholds", [])
    return Workload(
        tuple(checker_messages(seed, records, keys)),
        tuple(sensor_messages(seed, readings, sensors, base_ms, bound_ms)) if readings else (),
        {name: tuple(messages) for name, messages in reference.items()},
        tuple(threshold_updates),
    )


def checker_messages(seed: int, records: int, keys: int) -> list[Message]:
    rng = random.Random(f"eddy-chaos-checker:{seed}")
    seqs = [0] * keys
    out = []
    for record_id in range(records):
        k = rng.randrange(keys)
        amount = rng.randint(-999, 999)
        body = {"id": record_id, "key": key_name(k), "seq": seqs[k], "amount": amount}
        seqs[k] += 1
        out.append(Message("checker", key_name(k).encode(), orjson.dumps(body)))
    for n in range(max(2, records // 2_000)):
        key = key_name(rng.randrange(keys)).encode()
        out.insert(rng.randrange(len(out) + 1), _malformed_checker(n, key))
    return out


def _malformed_checker(n: int, key: bytes) -> Message:
    variants: list[bytes | None] = [
        b"{not json chaos-%d" % n,
        orjson.dumps({"id": f"bad-{n}", "key": key.decode(), "seq": 0, "amount": 1}),
        orjson.dumps({"id": 10**9 + n, "key": key.decode(), "seq": -1, "amount": 1}),
        None,
    ]
    return Message("checker", key, variants[n % len(variants)], ((KIND_HEADER, MALFORMED),))


def sensor_messages(
    seed: int, readings: int, sensors: int, base_ms: int, bound_ms: int = 1_000
) -> list[Message]:
    rng = random.Random(f"eddy-chaos-sensor:{seed}")
    names = [sensor_name(i) for i in range(sensors)]
    in_order = [
        (names[i % sensors], base_ms + i * STEP_MS, round(rng.uniform(-20.0, 110.0), 2))
        for i in range(readings)
    ]
    # Delay each reading by at most the watermark bound: disorder the bound allows.
    stream = sorted(in_order, key=lambda r: r[1] + rng.randint(0, bound_ms))
    out = [_reading(*r) for r in stream]
    # Stragglers: behind the stream where they are inserted: most late for 5 s
    # windows; for sensor_counts' 10 s windows some within its 5 s lateness (updates).
    for _ in range(max(8, readings // 250)):
        at = rng.randrange(len(stream) // 5, len(stream))
        behind = stream[at][1] - rng.randint(4_000, 20_000)
        if behind >= base_ms:
            sensor = rng.choice(names)
            message = _reading(sensor, behind, round(rng.uniform(-20.0, 110.0), 2), STRAGGLER)
            out.insert(at + (len(out) - len(stream)), message)
    for n in range(max(3, readings // 1_000)):
        key = rng.choice(names).encode()
        out.insert(rng.randrange(len(out) + 1), _malformed_reading(n, key, base_ms))
    last = max(r[1] for r in stream)
    out += [_reading(s, last + CLOSING_AHEAD_MS, 50.0) for s in names]
    return out


def _reading(sensor: str, ts: int, temp: float, kind: bytes | None = None) -> Message:
    body = orjson.dumps({"sensor_id": sensor, "timestamp_ms": ts, "temperature": temp})
    headers: Headers = ((KIND_HEADER, kind),) if kind else ()
    return Message("sensor", sensor.encode(), body, headers)


def _malformed_reading(n: int, key: bytes, base_ms: int) -> Message:
    sensor = key.decode()
    variants: list[bytes | None] = [
        b"{not json chaos-%d" % n,
        orjson.dumps({"sensor_id": sensor, "temperature": float(n)}),
        b'{"sensor_id": "%s", "timestamp_ms": %d, "temperature": NaN}' % (key, base_ms + n),
        b"[%d, 2, 3]" % n,
        None,
        orjson.dumps({"sensor_id": "", "timestamp_ms": base_ms + n, "temperature": 1.0}),
    ]
    return Message("sensor", key, variants[n % len(variants)], ((KIND_HEADER, MALFORMED),))
