"""The reference app (agents/) in a chaos run: the agents it runs, their stages,
consumer groups, topics and settings, and the checks of its agents (no Kafka I/O
here; the runner reads the topics and calls :func:`verify`).

Everything comes from building ``eddy.examples.app`` with the run's settings, as each
worker does: stage names, sources and outputs, the hashtag repartition topic,
and the agents' own settings (window size, watermark bound, tolerance). The
workers get those settings in their environment, so the harness and the workers
never disagree on them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import SecretStr

from eddy import AgentSettings, BuiltApp
from eddy.examples import app
from eddy.examples.eos_checker import checker_topics
from eddy.examples.settings import CheckerSettings, SensorSettings, VehicleSettings
from eddy.examples.topics import (
    ALERTS,
    APP_SPEED,
    AVERAGES,
    COUNTS,
    COUNTS_LATE,
    GAME_EVENTS,
    HASHTAG_COUNTS,
    LATE_READINGS,
    MINMAX,
    OBD_SPEED,
    POWERUPS,
    READINGS,
    SPEED_CHECKS,
    THRESHOLDS,
    TWEETS,
)
from eddy.pipeline.base import Pipeline
from eddy.settings import Settings, env_prefix
from eddy.topics import TopicSpec, app_topics, changelog_topic
from tools.chaos import recompute_reference as rr
from tools.chaos import recompute_windows as rw
from tools.chaos import verify_reference as vr
from tools.chaos.verify import CHECKER, Check, Rec, check_dead_letters, sensor_expectation

# Agents of the reference app that need a service besides Kafka: not in a chaos run.
EXTERNAL = frozenset({"sensor_rooms", "postgres_sink"})
# Harness stream name -> the topic the feeder writes it to (before EDDY_TOPIC_PREFIX).
# The checker's input ("checker") depends on its settings: see Plan.input_topics.
INPUTS = {
    "sensor": READINGS.name,
    "tweets": TWEETS.name,
    "games": GAME_EVENTS.name,
    "obd": OBD_SPEED.name,
    "app": APP_SPEED.name,
    "thresholds": THRESHOLDS.name,
}
# What each reference agent writes (before the prefix); the repartition topic of
# hashtag_counts is internal (``<app_id>-hashtag_counts-repartition``): Plan finds it.
OUTPUTS = {
    "averages": AVERAGES.name,
    "late": LATE_READINGS.name,
    "minmax": MINMAX.name,
    "counts": COUNTS.name,
    "counts_late": COUNTS_LATE.name,
    "alerts": ALERTS.name,
    "speed_checks": SPEED_CHECKS.name,
    "hashtag_counts": HASHTAG_COUNTS.name,
    "powerups": POWERUPS.name,
}

A = TypeVar("A", bound=AgentSettings)


def run_agents() -> tuple[str, ...]:
    """The agents of a chaos run: the reference app's defaults and the checker,
    everything but what needs another service."""
    wanted = {*app.default_agents, CHECKER}
    return tuple(name for name in app.agent_names if name in wanted and name not in EXTERNAL)


@dataclass(frozen=True)
class Plan:
    """The reference app as the run's workers build it."""

    built: BuiltApp

    @classmethod
    def of(cls, settings: Settings) -> Plan:
        """Build ``eddy.examples.app`` with ``settings`` (its agents: ``settings.agents``);
        agent settings come from the environment, as in a worker."""
        return cls(app.build(settings))

    @property
    def settings(self) -> Settings:
        return self.built.settings

    @property
    def stages(self) -> list[Pipeline]:
        return self.built.stages

    @property
    def stage_names(self) -> tuple[str, ...]:
        return tuple(stage.name for stage in self.stages)

    def agent_settings(self, cls: type[A]) -> A:
        """The instance of ``cls`` the agents run with.

        Raises:
            KeyError: no agent of the run uses ``cls``.
        """
        for compiled in self.built.agents.values():
            if isinstance(compiled.settings, cls):
                return compiled.settings
        raise KeyError(cls.__name__)

    @property
    def sensor(self) -> SensorSettings:
        return self.agent_settings(SensorSettings)

    @property
    def vehicle(self) -> VehicleSettings:
        return self.agent_settings(VehicleSettings)

    @property
    def checker(self) -> CheckerSettings:
        return self.agent_settings(CheckerSettings)

    def checker_topics(self) -> dict[str, str]:
        """The checker's topics on the broker: input, echo, agg, alerts."""
        topics = checker_topics(self.checker.checker_topic_prefix)
        return {name: self.settings.topic(topic.name) for name, topic in topics.items()}

    def input_topics(self) -> dict[str, str]:
        """Per harness stream (``Message.stream``), the topic the feeder writes it to."""
        s = self.settings
        return {"checker": self.checker_topics()["input"]} | {
            stream: s.topic(name) for stream, name in INPUTS.items()
        }

    def outputs(self) -> dict[str, str]:
        """The reference agents' output topics on the broker, by :data:`OUTPUTS` name,
        and the hashtag repartition topic as ``repartition``."""
        out = {name: self.settings.topic(topic) for name, topic in OUTPUTS.items()}
        out["repartition"] = self.repartition_topic()
        return out

    def repartition_topic(self) -> str:
        """What ``hashtag_counts.repartition`` writes and ``hashtag_counts`` reads."""
        (stage,) = self.readers(self.settings.topic(TWEETS.name))
        (topic,) = stage.output_topics
        return topic

    def readers(self, topic: str) -> list[Pipeline]:
        """The stages reading ``topic`` (each dead-letters its bad records)."""
        return [stage for stage in self.stages if topic in stage.sources]

    def agent_of(self, stage: Pipeline) -> str:
        return self.built.agent_of(stage.name)

    def output_topics(self) -> list[str]:
        """Every topic a stage writes (the repartition topic too) and the dead letters."""
        written = {t for stage in self.stages for t in stage.output_topics}
        return sorted(written | {self.settings.dead_letters})

    def changelogs(self) -> list[str]:
        return [changelog_topic(self.settings, name) for name in self.stage_names]

    def topic_specs(self) -> list[TopicSpec]:
        """Every topic the agents declare (the control topic with its one partition),
        the repartition topic and the dead letters: created before the workers start,
        so that no topic is created on the fly with another layout."""
        return app_topics(self.built)

    def groups(self) -> dict[str, tuple[str, ...]]:
        """Every stage's consumer group (``<app_id>.<stage>``) and its input topics (the
        repartition topic for ``hashtag_counts``; both speed topics for vehicle_speed)."""
        return {f"{self.settings.app_id}.{s.name}": tuple(s.sources) for s in self.stages}

    def transactional_inputs(self) -> set[str]:
        """Inputs another stage writes in transactions (the repartition topic)."""
        written = {t for stage in self.stages for t in stage.output_topics}
        return {t for sources in self.groups().values() for t in sources if t in written}

    def worker_env(self) -> dict[str, str]:
        """The agents' settings as the variables a worker builds them from."""
        env: dict[str, str] = {}
        for compiled in self.built.agents.values():
            instance = compiled.settings
            if instance is None:
                continue
            prefix = env_prefix(type(instance))
            for name, value in instance.model_dump(mode="json").items():
                if value is None:
                    continue
                secret = getattr(instance, name)
                if isinstance(secret, SecretStr):
                    value = secret.get_secret_value()
                text = value if isinstance(value, str) else json.dumps(value)
                env[f"{prefix}{name.upper()}"] = text
        return env


@dataclass
class Outcome:
    checks: list[Check] = field(default_factory=list)
    records: dict[str, int] = field(default_factory=dict)  # inputs per agent
    # REST: what the teams' power-ups and the hashtags' counts must answer, per key.
    powerups_by_team: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    counts_by_tag: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _reading(b: Any) -> tuple[str, int, float]:
    return (b["sensor_id"], b["timestamp_ms"], b["temperature"])


def _speed(b: Any) -> tuple[str, int, float]:
    return (b["vehicle_id"], b["timestamp_ms"], b["speed_kmh"])


def _dead_letters(
    plan: Plan, agent: str, topic: str, inputs: Sequence[Rec], dead: Sequence[Rec]
) -> list[Check]:
    """Dead letters of ``topic`` by each of ``agent``'s stages reading it."""
    checks = []
    for stage in plan.readers(topic):
        if plan.agent_of(stage) == agent:
            checks += check_dead_letters(agent, topic, inputs, dead, stage=stage.name)
    if not checks:
        raise KeyError(f"no stage of agent {agent} reads {topic}")
    return checks


def verify(
    plan: Plan,
    inputs: Mapping[str, Sequence[Rec]],
    outputs: Mapping[str, Sequence[Rec]],
    dead: Sequence[Rec],
) -> Outcome:
    """Recompute each reference agent from its input as read back, and check its
    ``read_committed`` output against it. ``inputs`` and ``outputs`` by topic."""
    n = plan.settings.partitions
    sensor, vehicle = plan.sensor, plan.vehicle
    t = plan.input_topics()
    out = {name: outputs[topic] for name, topic in plan.outputs().items()}
    readings = inputs[t["sensor"]]
    res = Outcome()
    per_sensor = vr.by_partition(readings, _reading)

    minmax = sensor_expectation(readings, sensor.window_size_ms, sensor.watermark_bound_ms)
    res.checks += vr.check_minmax(minmax, out["minmax"], sensor.window_size_ms)
    counts = rw.expected_counts(per_sensor, sensor.watermark_bound_ms)
    res.checks += vr.check_counts(counts, out["counts"], out["counts_late"])
    updates = [
        (b["sensor_id"], b["threshold"]) for b in (r.json() for r in inputs[t["thresholds"]])
    ]
    thresholds = rr.final_thresholds(updates)
    alerts = rr.expected_alerts(per_sensor, thresholds, sensor.watermark_bound_ms)
    res.checks += vr.check_alerts(alerts, out["alerts"])
    for agent in (vr.MINMAX, vr.COUNTS, vr.ALERTS):
        res.checks += _dead_letters(plan, agent, t["sensor"], readings, dead)
        res.records[agent] = len(readings)
    res.records[vr.ALERTS] += len(inputs[t["thresholds"]])

    obd = vr.by_partition(inputs[t["obd"]], _speed)
    phone = vr.by_partition(inputs[t["app"]], _speed)
    vehicles = rr.expected_checks(obd, phone, vehicle.speed_tolerance_kmh)
    res.checks += vr.check_vehicles(vehicles, out["speed_checks"])
    for stream in ("obd", "app"):
        res.checks += _dead_letters(plan, vr.VEHICLES, t[stream], inputs[t[stream]], dead)
    res.records[vr.VEHICLES] = len(inputs[t["obd"]]) + len(inputs[t["app"]])

    tweets = vr.by_partition(
        inputs[t["tweets"]], lambda b: (b["tweet_id"], b["text"], b["timestamp_ms"])
    )
    hashtags = rr.expected_hashtags(tweets, partitions=n, bound_ms=sensor.watermark_bound_ms)
    res.checks += vr.check_mentions(hashtags, out["repartition"])
    res.checks += _dead_letters(plan, vr.HASHTAG_COUNTS, t["tweets"], inputs[t["tweets"]], dead)
    res.checks += vr.check_hashtag_counts(hashtags, out["hashtag_counts"])
    res.records[vr.HASHTAG_COUNTS] = len(inputs[t["tweets"]])

    games = vr.by_partition(inputs[t["games"]], lambda b: (b["team"], b["ts"], b["bubbles"]))
    powerups = rw.expected_powerups(games)
    res.checks += vr.check_powerups(powerups, out["powerups"])
    res.checks += _dead_letters(plan, vr.POWERUPS, t["games"], inputs[t["games"]], dead)
    res.records[vr.POWERUPS] = len(inputs[t["games"]])

    res.powerups_by_team = vr.rest_windows_of(powerups)
    res.counts_by_tag = vr.rest_windows_of(hashtags.counts)
    late_games = sum(1 for f in powerups.values() if f["timing"] == "update")
    res.notes.append(
        f"reference agents: {len(minmax.windows)} min/max windows, "
        f"{len(counts.results)} count results ({len(counts.late)} late), "
        f"{sum(alerts.want.values())} alerts, {len(vehicles.checks)} speed checks, "
        f"{len(hashtags.mentions)} mentions in {len(hashtags.counts)} hashtag windows, "
        f"{len(powerups)} power-ups ({late_games} earned late)"
    )
    return res
