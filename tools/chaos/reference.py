"""The reference pipelines of agents/ in a chaos run: their topics, consumer groups
and checks (no Kafka I/O here; the runner reads the topics and calls this)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agents import builder
from service.settings import Settings
from service.topics import TopicSpec
from tools.chaos import recompute_reference as rr
from tools.chaos import recompute_windows as rw
from tools.chaos import verify_reference as vr
from tools.chaos.verify import Check, Rec, check_dead_letters, sensor_expectation

# Harness stream name -> reference topic name (before EDDY_TOPIC_PREFIX).
INPUTS = {
    "tweets": "tweets",
    "games": "game-events",
    "obd": "vehicle-obd-speed",
    "app": "vehicle-app-speed",
    "thresholds": "sensor-thresholds",
}
OUTPUTS = (
    "sensor-minmax",
    "sensor-counts",
    "sensor-counts-late",
    "sensor-alerts",
    "vehicle-speed-checks",
    "hashtags-by-tag",
    "hashtag-counts",
    "team-powerups",
)


def input_topics(settings: Settings) -> dict[str, str]:
    """Per harness stream, the topic the feeder writes it to."""
    return {stream: settings.topic(name) for stream, name in INPUTS.items()}


def output_topics(settings: Settings) -> list[str]:
    return [settings.topic(name) for name in OUTPUTS]


def topic_specs(settings: Settings) -> list[TopicSpec]:
    """Inputs with the run's partitions (the control topic: one), created before the
    workers start so that no topic is created on the fly with another layout."""
    n = settings.partitions
    specs = [TopicSpec(t, n) for s, t in input_topics(settings).items() if s != "thresholds"]
    specs.append(TopicSpec(settings.topic(INPUTS["thresholds"]), 1, exact_partitions=False))
    specs += [TopicSpec(t, n, exact_partitions=False) for t in output_topics(settings)]
    return specs


def groups(settings: Settings) -> dict[str, tuple[str, ...]]:
    """Every pipeline's consumer group and its input topics (the repartition topic
    for hashtag_counts; both speed topics for vehicle_speed)."""
    return {
        f"{settings.app_id}.{name}": tuple(builder(name)(settings).sources)
        for name in settings.pipelines
    }


def transactional_inputs(settings: Settings) -> set[str]:
    """Inputs another pipeline writes in transactions (the repartition topic)."""
    written = {t for name in settings.pipelines for t in builder(name)(settings).output_topics}
    return {t for sources in groups(settings).values() for t in sources if t in written}


@dataclass
class Outcome:
    checks: list[Check] = field(default_factory=list)
    records: dict[str, int] = field(default_factory=dict)  # inputs per pipeline
    # REST: what GET /teams/{team}/powerups and /hashtags/{tag}/counts must answer.
    powerups_by_team: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    counts_by_tag: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _reading(b: Any) -> tuple[str, int, float]:
    return (b["sensor_id"], b["timestamp_ms"], b["temperature"])


def _speed(b: Any) -> tuple[str, int, float]:
    return (b["vehicle_id"], b["timestamp_ms"], b["speed_kmh"])


def verify(
    settings: Settings,
    inputs: Mapping[str, Sequence[Rec]],
    outputs: Mapping[str, Sequence[Rec]],
    dead: Sequence[Rec],
) -> Outcome:
    """Recompute each reference pipeline from its input as read back, and check its
    ``read_committed`` output against it. ``inputs`` and ``outputs`` by topic."""
    s, n = settings, settings.partitions
    t = {stream: s.topic(name) for stream, name in INPUTS.items()}
    out = {name: outputs[s.topic(name)] for name in OUTPUTS}
    readings = inputs[s.readings_topic]
    res = Outcome()
    per_sensor = vr.by_partition(readings, _reading)

    minmax = sensor_expectation(readings, s.window_size_ms, s.watermark_bound_ms)
    res.checks += vr.check_minmax(minmax, out["sensor-minmax"], s.window_size_ms)
    counts = rw.expected_counts(per_sensor, s.watermark_bound_ms)
    res.checks += vr.check_counts(counts, out["sensor-counts"], out["sensor-counts-late"])
    updates = [
        (b["sensor_id"], b["threshold"]) for b in (r.json() for r in inputs[t["thresholds"]])
    ]
    thresholds = rr.final_thresholds(updates)
    alerts = rr.expected_alerts(per_sensor, thresholds, s.watermark_bound_ms)
    res.checks += vr.check_alerts(alerts, out["sensor-alerts"])
    for pipeline in (vr.MINMAX, vr.COUNTS, vr.ALERTS):
        res.checks += check_dead_letters(pipeline, s.readings_topic, readings, dead)
        res.records[pipeline] = len(readings)
    res.records[vr.ALERTS] += len(inputs[t["thresholds"]])

    obd = vr.by_partition(inputs[t["obd"]], _speed)
    app = vr.by_partition(inputs[t["app"]], _speed)
    vehicles = rr.expected_checks(obd, app, s.speed_tolerance_kmh)
    res.checks += vr.check_vehicles(vehicles, out["vehicle-speed-checks"])
    for stream in ("obd", "app"):
        res.checks += check_dead_letters(vr.VEHICLES, t[stream], inputs[t[stream]], dead)
    res.records[vr.VEHICLES] = len(inputs[t["obd"]]) + len(inputs[t["app"]])

    tweets = vr.by_partition(
        inputs[t["tweets"]], lambda b: (b["tweet_id"], b["text"], b["timestamp_ms"])
    )
    hashtags = rr.expected_hashtags(tweets, partitions=n, bound_ms=s.watermark_bound_ms)
    res.checks += vr.check_mentions(hashtags, out["hashtags-by-tag"])
    res.checks += check_dead_letters(vr.HASHTAGS, t["tweets"], inputs[t["tweets"]], dead)
    res.checks += vr.check_hashtag_counts(hashtags, out["hashtag-counts"])
    res.records[vr.HASHTAGS] = len(inputs[t["tweets"]])
    res.records[vr.HASHTAG_COUNTS] = len(hashtags.mentions)

    games = vr.by_partition(inputs[t["games"]], lambda b: (b["team"], b["ts"], b["bubbles"]))
    powerups = rw.expected_powerups(games)
    res.checks += vr.check_powerups(powerups, out["team-powerups"])
    res.checks += check_dead_letters(vr.POWERUPS, t["games"], inputs[t["games"]], dead)
    res.records[vr.POWERUPS] = len(inputs[t["games"]])

    res.powerups_by_team = vr.rest_windows_of(powerups)
    res.counts_by_tag = vr.rest_windows_of(hashtags.counts)
    late_games = sum(1 for f in powerups.values() if f["timing"] == "update")
    res.notes.append(
        f"reference pipelines: {len(minmax.windows)} min/max windows, "
        f"{len(counts.results)} count results ({len(counts.late)} late), "
        f"{sum(alerts.want.values())} alerts, {len(vehicles.checks)} speed checks, "
        f"{len(hashtags.mentions)} mentions in {len(hashtags.counts)} hashtag windows, "
        f"{len(powerups)} power-ups ({late_games} earned late)"
    )
    return res
