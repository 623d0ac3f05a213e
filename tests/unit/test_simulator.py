"""The simulator's generator is pure, so its guarantees are checked as properties.

No broker here: the Kafka side is exercised with a fake producer that records
what it is given.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import math
from collections import Counter
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest
from aiokafka.errors import KafkaTimeoutError
from hypothesis import given
from hypothesis import strategies as st

from eddy.errors import BrokerUnavailableError, ConfigError
from eddy.settings import Settings, build
from tools.cli import build_parser
from tools.simulator import (
    Delivery,
    SimulationConfig,
    SimulationStats,
    generate,
    produce,
    run_cli,
)
from tools.simulator.command import summary
from tools.simulator.generator import MAX_TEMPERATURE_F, MIN_TEMPERATURE_F

START_MS = 1_700_000_000_000


@st.composite
def configs(draw: st.DrawFn, *, outages: bool = True) -> SimulationConfig:
    sensors = draw(st.integers(1, 20))
    outage_min = draw(st.integers(1, 5_000))
    return SimulationConfig(
        sensors=sensors,
        rate_per_s=draw(st.floats(0.5, 1000.0 * sensors)),
        seed=draw(st.integers(-(2**40), 2**40)),
        start_ms=draw(st.integers(0, 2 * START_MS)),
        count=draw(st.integers(1, 400)),
        disorder_ms=draw(st.integers(0, 3_000)),
        outage_probability=draw(st.floats(0.0, 1.0)) if outages else 0.0,
        outage_min_ms=outage_min,
        outage_max_ms=draw(st.integers(outage_min, 60_000)),
    )


def run(config: SimulationConfig) -> list[Delivery]:
    return list(generate(config))


@given(configs())
def test_same_seed_gives_the_same_sequence(config: SimulationConfig) -> None:
    assert run(config) == run(config)


@given(configs(), st.integers(1, 2**20))
def test_different_seeds_give_different_sequences(config: SimulationConfig, delta: int) -> None:
    assert run(config) != run(replace(config, seed=config.seed + delta))


@given(configs())
def test_deliveries_come_in_delivery_time_order(config: SimulationConfig) -> None:
    times = [d.deliver_at_ms for d in generate(config)]
    assert times == sorted(times)


@given(configs())
def test_nothing_is_delivered_before_it_happened(config: SimulationConfig) -> None:
    assert all(d.deliver_at_ms >= d.reading.timestamp_ms for d in generate(config))


@given(configs(outages=False))
def test_without_outages_disorder_is_bounded(config: SimulationConfig) -> None:
    deliveries = run(config)
    assert all(0 <= d.delay_ms <= config.disorder_ms for d in deliveries)
    assert not any(d.buffered or d.starts_outage for d in deliveries)


@given(configs())
def test_every_reading_is_delivered_exactly_once(config: SimulationConfig) -> None:
    deliveries = run(config)
    keys = Counter((d.reading.sensor_id, d.reading.timestamp_ms) for d in deliveries)
    assert len(deliveries) == config.count
    assert all(n == 1 for n in keys.values())


@given(configs())
def test_temperatures_are_plausible_fahrenheit(config: SimulationConfig) -> None:
    for delivery in generate(config):
        temperature = delivery.reading.temperature
        assert math.isfinite(temperature)
        assert MIN_TEMPERATURE_F <= temperature <= MAX_TEMPERATURE_F
        assert round(temperature, 2) == temperature


@given(configs())
def test_sensor_ids_cover_the_fleet(config: SimulationConfig) -> None:
    seen = {d.reading.sensor_id for d in generate(config)}
    expected = {f"sensor_{n}" for n in range(1, config.sensors + 1)}
    assert seen <= expected
    if config.count is not None and config.count >= config.sensors:
        assert seen == expected


@given(configs())
def test_event_time_follows_the_rate(config: SimulationConfig) -> None:
    timestamps = sorted(d.reading.timestamp_ms for d in generate(config))
    assert timestamps[0] == config.start_ms
    assert config.count is not None
    span_ms = (config.count - 1) * 1000.0 / config.rate_per_s
    # A sensor's timestamp is only bumped past the nominal one by float rounding.
    assert timestamps[-1] <= config.start_ms + span_ms + 1


def test_a_long_run_has_outages_delivered_tens_of_seconds_late() -> None:
    config = SimulationConfig(rate_per_s=100, seed=7, start_ms=START_MS, count=60_000)
    deliveries = run(config)
    late = [d for d in deliveries if d.delay_ms > 10_000]
    assert late
    assert all(d.buffered for d in late)
    assert sum(d.starts_outage for d in deliveries) >= 2
    assert max(d.delay_ms for d in deliveries) <= config.outage_max_ms


def test_a_buffered_burst_arrives_together_at_the_outage_end() -> None:
    config = SimulationConfig(rate_per_s=100, seed=7, start_ms=START_MS, count=60_000)
    deliveries = run(config)
    first = next(d for d in deliveries if d.starts_outage)
    sensor, began, ended = first.reading.sensor_id, first.reading.timestamp_ms, first.deliver_at_ms
    during = [
        d
        for d in deliveries
        if d.reading.sensor_id == sensor and began <= d.reading.timestamp_ms < ended
    ]
    assert all(d.buffered and d.deliver_at_ms == ended for d in during)
    assert len(during) >= 100  # 10+ s of a sensor reading 10 times a second


def test_some_sensors_start_below_freezing() -> None:
    config = SimulationConfig(sensors=50, rate_per_s=500, seed=3, start_ms=START_MS, count=500)
    assert any(d.reading.temperature < 32.0 for d in generate(config))


def test_an_endless_run_is_lazy_and_keeps_going() -> None:
    config = SimulationConfig(rate_per_s=10_000, seed=1, start_ms=0, sensors=10, count=None)
    tail = list(itertools.islice(generate(config), 50_000))
    assert len(tail) == 50_000
    assert tail[-1].deliver_at_ms >= 3_000


def test_the_highest_allowed_rate_keeps_timestamps_unique() -> None:
    config = SimulationConfig(rate_per_s=3000, sensors=3, seed=5, start_ms=0, count=9_000)
    keys = {(d.reading.sensor_id, d.reading.timestamp_ms) for d in generate(config)}
    assert len(keys) == 9_000


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"sensors": 0}, "sensors"),
        ({"rate_per_s": 0.0}, "rate"),
        ({"rate_per_s": math.nan}, "rate"),
        ({"rate_per_s": 10_001.0}, "one reading per sensor per millisecond"),
        ({"count": 0}, "count"),
        ({"start_ms": -1}, "start_ms"),
        ({"disorder_ms": -1}, "disorder_ms"),
        ({"outage_probability": 1.5}, "outage_probability"),
        ({"outage_min_ms": 5_000, "outage_max_ms": 1_000}, "outage_min_ms"),
    ],
)
def test_bad_configs_are_rejected_with_a_clear_message(
    change: dict[str, Any], message: str
) -> None:
    fields = {"rate_per_s": 100.0, "seed": 1, "start_ms": 0, **change}
    with pytest.raises(ConfigError, match=message):
        SimulationConfig(**fields)


def cli_args(**change: Any) -> argparse.Namespace:
    """The ``simulate`` parser's defaults, as the parser itself gives them."""
    defaults = build_parser().parse_args(["simulate", "--seed", "1"])
    return argparse.Namespace(**(vars(defaults) | change))


@pytest.mark.parametrize(
    "change",
    [{"sensors": 0}, {"rate": -5.0}, {"count": 0}, {"duration": 0.0}, {"start_ms": -3}],
)
def test_cli_rejects_bad_arguments_before_touching_kafka(change: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        run_cli(cli_args(**change))


class FakeProducer:
    """Records sends; acknowledges each at once, or fails when told to."""

    def __init__(self, topics: set[str], fail: Exception | None = None) -> None:
        self.topics = topics
        self.fail = fail
        self.sent: list[tuple[str, bytes, bytes]] = []
        self.stopped = False
        self.client = SimpleNamespace(fetch_all_metadata=self._metadata)

    async def _metadata(self) -> Any:
        return SimpleNamespace(topics=lambda: set(self.topics))

    async def start(self) -> None:
        pass

    async def send(self, topic: str, value: bytes, key: bytes) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self.fail is not None:
            future.set_exception(self.fail)
        else:
            future.set_result(None)
        self.sent.append((topic, key, value))
        return future

    async def stop(self) -> None:
        self.stopped = True


SETTINGS = build(Settings, {"topic_prefix": "sim-"})


async def test_produce_fast_sends_every_delivery_in_order_keyed_by_sensor() -> None:
    config = SimulationConfig(rate_per_s=100, seed=7, start_ms=START_MS, count=3_000)
    producer = FakeProducer({"sim-sensor-readings"})
    stats = await produce(
        config, SETTINGS, pace=False, duration_s=None, progress=False, producer=producer
    )
    expected = run(config)
    assert stats.sent == len(producer.sent) == 3_000
    assert [value for _, _, value in producer.sent] == [d.reading.to_json() for d in expected]
    assert all(topic == "sim-sensor-readings" for topic, _, _ in producer.sent)
    assert [key for _, key, _ in producer.sent] == [d.reading.sensor_id.encode() for d in expected]
    assert stats.late == sum(d.buffered for d in expected)
    assert stats.outages == sum(d.starts_outage for d in expected)
    assert producer.stopped


async def test_produce_paces_deliveries_to_the_wall_clock() -> None:
    config = SimulationConfig(rate_per_s=200, seed=2, start_ms=START_MS, count=60, disorder_ms=10)
    producer = FakeProducer({"sim-sensor-readings"})
    stats = await produce(
        config, SETTINGS, pace=True, duration_s=None, progress=True, producer=producer
    )
    assert stats.sent == 60
    assert stats.elapsed_s >= 0.29  # the last reading happens 295 ms in


async def test_produce_stops_at_the_duration() -> None:
    config = SimulationConfig(rate_per_s=100, seed=2, start_ms=START_MS, disorder_ms=0)
    producer = FakeProducer({"sim-sensor-readings"})
    stats = await produce(
        config, SETTINGS, pace=True, duration_s=0.3, progress=False, producer=producer
    )
    assert 20 <= stats.sent <= 31
    assert stats.elapsed_s < 1.0


async def test_produce_stops_when_asked_and_flushes() -> None:
    stop = asyncio.Event()
    config = SimulationConfig(rate_per_s=1_000, seed=2, start_ms=START_MS, disorder_ms=0)
    producer = FakeProducer({"sim-sensor-readings"})
    asyncio.get_running_loop().call_later(0.2, stop.set)
    stats = await produce(
        config, SETTINGS, pace=True, duration_s=None, progress=False, stop=stop, producer=producer
    )
    assert 0 < stats.sent == len(producer.sent)
    assert producer.stopped


async def test_produce_rejects_a_missing_topic() -> None:
    config = SimulationConfig(rate_per_s=100, seed=2, start_ms=START_MS, count=10)
    producer = FakeProducer({"other"})
    with pytest.raises(ConfigError, match="sim-sensor-readings"):
        await produce(
            config, SETTINGS, pace=False, duration_s=None, progress=False, producer=producer
        )
    assert producer.stopped


async def test_a_failed_send_surfaces_and_is_not_counted() -> None:
    config = SimulationConfig(rate_per_s=100, seed=2, start_ms=START_MS, count=10)
    producer = FakeProducer({"sim-sensor-readings"}, fail=RuntimeError("broker said no"))
    with pytest.raises(RuntimeError, match="broker said no"):
        await produce(
            config, SETTINGS, pace=False, duration_s=None, progress=False, producer=producer
        )
    assert producer.stopped


async def test_losing_kafka_mid_run_is_an_eddy_error() -> None:
    config = SimulationConfig(rate_per_s=100, seed=2, start_ms=START_MS, count=10)
    producer = FakeProducer({"sim-sensor-readings"}, fail=KafkaTimeoutError())
    with pytest.raises(BrokerUnavailableError, match="lost Kafka"):
        await produce(
            config, SETTINGS, pace=False, duration_s=None, progress=False, producer=producer
        )
    assert producer.stopped


def test_summary_names_the_seed_and_throughput() -> None:
    config = SimulationConfig(rate_per_s=100, seed=42, start_ms=0, count=10)
    line = summary(SimulationStats(sent=1_000, outages=2, late=30, elapsed_s=0.5), config, "t")
    assert "seed 42" in line
    assert "2,000 readings/s" in line
