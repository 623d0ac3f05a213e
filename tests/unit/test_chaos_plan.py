"""The chaos harness and the reference app: what a run's workers run (agents, stages,
consumer groups, topics, settings), and the harness's checks passing on what the
real agents emit (the test driver, no Kafka) and failing when an output breaks."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from eddy import TestDriver
from eddy.examples import app
from eddy.settings import Settings, build
from tools.chaos import workload
from tools.chaos.recompute import checker_aggregates
from tools.chaos.reference import Plan, run_agents, verify
from tools.chaos.verify import (
    CHECKER,
    SENSORS,
    Check,
    Rec,
    check_aggregates,
    check_echo,
    check_late,
    check_windows,
    checker_rows,
    sensor_expectation,
)
from tools.chaos.verify_reference import AGENTS
from tools.chaos.workload import KIND_HEADER

T0 = 1_800_000_000_000  # on a whole hour


def failing(checks: list[Check]) -> dict[tuple[str, str], int]:
    return {(c.agent, c.name): c.failures for c in checks if not c.ok}


def run_settings(**overrides: object) -> Settings:
    values = {
        "app_id": "chaos-x",
        "topic_prefix": "chaos-x-",
        "agents": run_agents(),
        "state_dir": Path("/nonexistent"),
        **overrides,
    }
    return build(Settings, values)


def test_a_run_has_every_default_agent_and_the_checker_but_none_needing_a_service() -> None:
    agents = run_agents()
    assert set(agents) == {*app.default_agents, CHECKER}
    assert not {"sensor_rooms", "postgres_sink"} & set(agents)
    assert {SENSORS, *AGENTS} <= set(agents)


def test_the_plan_names_stages_groups_and_topics_under_the_prefix() -> None:
    plan = Plan.of(run_settings())
    assert "hashtag_counts.repartition" in plan.stage_names
    assert len(plan.stage_names) == len(run_agents()) + 1  # hashtag_counts: two stages
    repartition = "chaos-x-hashtag_counts-repartition"
    assert plan.repartition_topic() == repartition
    groups = plan.groups()
    assert groups["chaos-x.hashtag_counts"] == (repartition,)
    assert groups["chaos-x.hashtag_counts.repartition"] == ("chaos-x-tweets",)
    assert set(groups["chaos-x.vehicle_speed"]) == {
        "chaos-x-vehicle-obd-speed",
        "chaos-x-vehicle-app-speed",
    }
    assert plan.transactional_inputs() == {repartition}
    assert plan.checker_topics() == {
        name: f"chaos-x-eos-checker-{name}" for name in ("input", "echo", "agg", "alerts")
    }
    inputs = plan.input_topics()
    assert inputs["sensor"] == "chaos-x-sensor-readings"
    assert inputs["thresholds"] == "chaos-x-sensor-thresholds"
    outputs = plan.output_topics()
    assert "chaos-x-dead-letters" in outputs  # the prefix goes in front of it too
    assert repartition in outputs
    assert set(plan.outputs().values()) <= set(outputs)
    assert all(t.startswith(("chaos-x-", repartition)) for t in outputs)
    specs = {spec.name: spec for spec in plan.topic_specs()}
    assert specs["chaos-x-sensor-thresholds"].partitions == 1
    assert {*inputs.values(), *outputs} <= set(specs)
    assert "chaos-x-hashtag_counts.repartition-changelog" in plan.changelogs()


def test_workers_get_the_agent_settings_the_harness_checks_with(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("EDDY_WINDOW_SIZE_MS", "10000")
    plan = Plan.of(run_settings())
    assert plan.sensor.window_size_ms == 10_000
    env = plan.worker_env()
    assert env["EDDY_WINDOW_SIZE_MS"] == "10000"
    assert env["EDDY_WATERMARK_BOUND_MS"] == str(plan.sensor.watermark_bound_ms)
    assert env["EDDY_SPEED_TOLERANCE_KMH"] == "5.0"
    assert env["EDDY_CHECKER_TOPIC_PREFIX"] == "eos-checker-"
    settings_env = run_settings().to_env()
    assert settings_env["EDDY_AGENTS"] == ",".join(run_agents())
    assert settings_env["EDDY_TOPIC_PREFIX"] == "chaos-x-"
    assert "EDDY_PIPELINES" not in settings_env


class Driven:
    """A small chaos workload through the real agents, in the test driver: what
    was sent (as read back from Kafka) and what came out, by topic."""

    def __init__(self, driver: TestDriver) -> None:
        self.plan = Plan(driver.built)
        self.inputs: dict[str, list[Rec]] = {t: [] for t in self.plan.input_topics().values()}
        self.outputs: dict[str, list[Rec]] = {t: [] for t in self.plan.output_topics()}
        load = workload.build(1, 300, 10, 2_000, 4, T0, self.plan.sensor.watermark_bound_ms, 2)
        topics = self.plan.input_topics()
        for i, message in enumerate([*load.thresholds, *load.interleaved()]):
            if KIND_HEADER in dict(message.headers):
                continue  # the driver's dead letters lack the runtime's source headers
            topic = topics[message.stream]
            sent = self.inputs[topic]
            sent.append(Rec(0, len(sent), message.key, message.value, message.headers))
            driver.send(topic, message.value or b"", key=message.key.decode())
            if i % 100 == 0:
                driver.advance_time(1_000)  # the repartition stage sends its markers
        driver.advance_time(1_000)
        for record in driver.sent:
            out = self.outputs.setdefault(record.topic, [])
            out.append(Rec(0, len(out), record.key, record.value, tuple(record.headers)))

    def checks(self) -> list[Check]:
        plan, out = self.plan, self.outputs
        topics = plan.checker_topics()
        rows = checker_rows(self.inputs[topics["input"]])
        sensor = plan.sensor
        readings = self.inputs[plan.input_topics()["sensor"]]
        sensors = sensor_expectation(readings, sensor.window_size_ms, sensor.watermark_bound_ms)
        outputs = plan.outputs()
        checks = check_echo(rows, out[topics["echo"]])
        checks += check_aggregates(
            checker_aggregates(rows), out[topics["agg"]], out[topics["alerts"]]
        )
        checks += check_windows(sensors, out[outputs["averages"]], sensor.window_size_ms)
        checks += check_late(sensors, out[outputs["late"]])
        return checks + verify(plan, self.inputs, out, out[plan.settings.dead_letters]).checks


@pytest.fixture(scope="module")
def driven() -> Iterator[Driven]:
    settings = {"partitions": 1, "topic_prefix": "t-", "app_id": "chaos-t"}
    with TestDriver(app, agents=run_agents(), settings=settings) as driver:
        yield Driven(driver)


def test_every_check_passes_on_what_the_agents_emit(driven: Driven) -> None:
    checks = driven.checks()
    assert failing(checks) == {}
    assert {c.agent for c in checks} >= {CHECKER, SENSORS, *AGENTS}
    for agent in (CHECKER, SENSORS, *AGENTS):  # each saw results to check
        assert any(c.checked > 0 for c in checks if c.agent == agent and c.category == "lost")
    markers = [r for r in driven.outputs[driven.plan.repartition_topic()] if not r.value]
    assert markers, "the repartition topic carries watermark markers"


def test_a_broken_output_fails_the_checks_of_its_agent(driven: Driven) -> None:
    outputs = driven.plan.outputs()
    speed_checks = driven.outputs[outputs["speed_checks"]]
    counts = driven.outputs[outputs["hashtag_counts"]]
    driven.outputs[outputs["speed_checks"]] = speed_checks[1:]
    driven.outputs[outputs["hashtag_counts"]] = [*counts, counts[0]]
    try:
        found = failing(driven.checks())
    finally:
        driven.outputs[outputs["speed_checks"]] = speed_checks
        driven.outputs[outputs["hashtag_counts"]] = counts
    assert found == {
        ("vehicle_speed", "speed checks: every one"): 1,
        ("hashtag_counts", "hashtag windows: none twice"): 1,
    }
