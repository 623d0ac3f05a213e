"""Values that cannot be encoded, through a real worker on the real broker: a reading
whose window sum overflows to infinity (state: found at the checkpoint), a window
result that overflows where its accumulator does not, and an output holding an
integer past 64 bits. Each is dead-lettered with its reason within a second of
its record's send, the ingest process never dies, the state stays valid, and
every other result is written exactly once."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import orjson
import pytest

from tests.support.kafka import produce, read_all, wait_until
from tests.support.team_apps import DeadLetters, Worker, user_app

pytestmark = pytest.mark.e2e

PACKAGE = "overflows"
MINUTE_MS = 60_000
BASE_MS = (time.time_ns() // 60_000_000_000 - 120) * MINUTE_MS  # two hours ago, on the minute
APP = """\
from pydantic import BaseModel

from eddy import App, BoundedOutOfOrderness, Sum, Topic, Tumbling


class Reading(BaseModel):
    sensor: str
    ts: int
    v: float


class TimesAlot:
    \"\"\"A mean of its own: the accumulator is finite, the result may not be.\"\"\"

    def create(self):
        return 0.0

    def add(self, value, accumulator):
        return accumulator + value.v

    def merge(self, left, right):
        return left + right

    def result(self, accumulator):
        return accumulator * 1e300


app = App("overflows")
readings = Topic("readings", Reading, key="sensor", timestamp="ts")
on_time = BoundedOutOfOrderness(bound_ms=0)
(
    app.stream(readings, name="sums", watermark=on_time)
    .window(Tumbling(size_ms=60_000))
    .aggregate(Sum("v"))
    .to(Topic("sums"))
)
(
    app.stream(readings, name="scaled", watermark=on_time)
    .filter(lambda reading: reading.sensor != "hot")
    .window(Tumbling(size_ms=60_000))
    .aggregate(TimesAlot())
    .to(Topic("scaled"))
)
(
    app.stream(readings, name="wide")
    .map(lambda r: {"sensor": r.sensor, "ts": r.ts, "wide": 2**64 if r.v == 7 else 1})
    .to(Topic("wide"))
)
"""
SENSORS = ["a", "b", "c"]


def reading(sensor: str, ts: int, v: float) -> tuple[bytes, bytes]:
    return sensor.encode(), orjson.dumps({"sensor": sensor, "ts": ts, "v": v})


def minute(m: int, sensors: list[str]) -> list[tuple[bytes, bytes]]:
    """Readings of 1.0 every 5 s of minute ``m``."""
    return [
        reading(s, BASE_MS + m * MINUTE_MS + i * 5_000, 1.0) for i in range(12) for s in sensors
    ]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("guarantee", ["exactly_once", "at_least_once"])
async def test_unwritable_values_are_dead_lettered_within_a_second_and_the_rest_once(
    tmp_path: Path, guarantee: str
) -> None:
    root, env, settings = await user_app(tmp_path, PACKAGE, APP)
    env["EDDY_PROCESSING_GUARANTEE"] = guarantee
    once = guarantee == "exactly_once"  # at least once: a replay may repeat outputs
    worker = Worker(root, env, tmp_path / "worker.log", package=PACKAGE)
    dead = DeadLetters(settings)
    topic = settings.topic("readings")
    try:
        await wait_until(worker.ready, timeout_s=120)
        await dead.start()
        await produce(settings, topic, minute(0, SENSORS))
        # A hot sensor: its second reading overflows the minute's sum.
        hot = [reading("hot", BASE_MS + 1_000, 1e308), reading("hot", BASE_MS + 2_000, 1e308)]
        await produce(settings, topic, hot[:1])
        overflow_sent = time.monotonic()
        await produce(settings, topic, hot[1:])
        await produce(settings, topic, [reading("hot", BASE_MS + 3_000, 5.0)])
        # A big sensor: its minute's scaled result is 1e10 * 1e300, an overflow.
        await produce(settings, topic, [reading("big", BASE_MS + 4_000, 1e10)])
        wide_sent = time.monotonic()
        await produce(settings, topic, [reading("a", BASE_MS + 4_500, 7.0)])
        closed_sent = time.monotonic()  # minute 1 closes minute 0
        await produce(settings, topic, minute(1, [*SENSORS, "hot", "big"]))
        closing = [reading(s, BASE_MS + 10 * MINUTE_MS, 0.0) for s in [*SENSORS, "hot", "big"]]
        await produce(settings, topic, closing)
        await wait_until(lambda: len(dead.seen) >= 3, timeout_s=60, every_s=0.02)

        sums = await read_all(settings, settings.topic("sums"), min_records=10)
        scaled = await read_all(settings, settings.topic("scaled"), min_records=7)
        wide = await read_all(settings, settings.topic("wide"), min_records=105)
        assert worker.process.poll() is None, "the worker exited"
        log = worker.log()
    finally:
        await dead.stop()
        code = worker.stop()
    assert code == 0, worker.log()[-3_000:]
    assert "was killed" not in log
    assert " failed" not in log, log[-3_000:]
    # Dead-lettered by the running process, not after a restart (a restart waits 1 s,
    # then starts a process and rejoins the group: several seconds more).
    assert log.count("ingest process 0 started") == 1, log[-3_000:]
    assert len(dead.seen) == 3 if once else len(dead.seen) >= 3, dead.seen

    # The reading that overflowed the sum: its own bytes, its reason, within seconds.
    [(at, headers, value), *_] = dead.of("sums")
    assert value == hot[1][1]
    assert headers["eddy.reason"].startswith("the state it changed cannot be written")
    assert "NaN or infinity (an overflow?)" in headers["eddy.reason"]
    assert at - overflow_sent < 5.0, f"{at - overflow_sent:.2f} s"
    # The result that could not be written: its key and window, within seconds of
    # the record that closed its window.
    [(at, headers, value), *_] = dead.of("scaled")
    assert headers["eddy.key"] == "big"
    assert int(headers["eddy.window_start_ms"]) == BASE_MS
    assert int(headers["eddy.window_end_ms"]) == BASE_MS + MINUTE_MS
    assert headers["eddy.reason"].startswith("the result cannot be written")
    assert at - closed_sent < 5.0, f"{at - closed_sent:.2f} s"
    [(at, headers, value), *_] = dead.of("wide")
    assert (headers["eddy.key"], headers["eddy.output.topic"]) == ("a", settings.topic("wide"))
    assert at - wide_sent < 5.0, f"{at - wide_sent:.2f} s"
    print(f"\ndead letters after {max(at for at, _, _ in dead.seen) - overflow_sent:.2f} s")

    # Everything else exactly once; the hot minute's state stayed valid (1e308 + 5).
    got = Counter((r["sensor"], r["window_start_ms"], r["value"]) for r in load(sums))
    want = {(s, BASE_MS + m * MINUTE_MS, 12.0) for s in SENSORS for m in (0, 1)}
    want |= {("hot", BASE_MS, 1e308), ("hot", BASE_MS + MINUTE_MS, 12.0)}
    want |= {("big", BASE_MS, 1e10), ("big", BASE_MS + MINUTE_MS, 12.0)}
    a_minute_0 = ("a", BASE_MS, 12.0)
    want = (want - {a_minute_0}) | {("a", BASE_MS, 19.0)}  # the 7.0 reading
    assert (got if once else set(got)) == (Counter(want) if once else want)
    got_scaled = Counter((r["sensor"], r["window_start_ms"]) for r in load(scaled))
    want_scaled = [(s, BASE_MS + m * MINUTE_MS) for s in SENSORS for m in (0, 1)]
    want_scaled.append(("big", BASE_MS + MINUTE_MS))
    assert (got_scaled if once else set(got_scaled)) == (
        Counter(want_scaled) if once else set(want_scaled)
    )
    widths = Counter((r["sensor"], r["ts"]) for r in load(wide))
    assert len(widths) == 105  # 106 readings, one of which could not be written
    assert ("a", BASE_MS + 4_500) not in widths
    if once:
        assert len(wide) == 105


def load(records: list[object]) -> list[dict[str, object]]:
    return [orjson.loads(r.value) for r in records]  # type: ignore[attr-defined]
