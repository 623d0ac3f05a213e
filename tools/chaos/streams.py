"""The seeded input of the reference agents in a chaos run (pure).

Each stream is built so that what a correct run emits is a function of the input
read back from Kafka alone, whatever the faults' timing (docs/chaos.md, "The
reference agents"):

* tweets and game events are disordered by at most their watermark bound, so no
  record is late by accident; game events also get deliberate late bursts (some
  within the 2 min allowed lateness, some beyond), whose effect is still decided
  per partition in offset order;
* the two vehicle streams are disordered far less than their watermark delays,
  because which of the two topics a worker reads first is a matter of timing;
* every stream ends with a closing record far ahead on every partition, so every
  window closes; a partition without records would hold the clock back forever;
* threshold updates are fed before any reading (the harness sends them before it
  starts the workers), so the broadcast state is set when the first reading comes.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import orjson

from eddy.app.queries import partition_for
from tools.chaos.workload import KIND_HEADER, MALFORMED, Message

TWEET_SPAN_MS = 300_000  # five 1 min windows of hashtags
GAME_SPAN_MS = 360_000  # six 1 min windows per team
POWERUP_BUBBLES = 500
TEAMS = 8
VEHICLES_PER_PARTITION = 1
OBD_JITTER_MS = 3_000  # well inside vehicle_speed's 30 s OBD delay
APP_JITTER_MS = 20_000  # well inside its 180 s app delay
GAME_BOUND_MS = 2_000  # team_powerups' watermark bound
CLOSING_AHEAD_MS = 600_000  # past every lateness and delay of every agent
TAGS = ("Kafka", "kafka", "Flink", "flink", "Python", "eos", "EOS", "streams", "chaos_2")
WORDS = ("hello", "exactly", "once", "again", "today", "more", "data")
# Thresholds end in .005: temperatures have two decimals, so a change never ties
# with a threshold and the alert does not hang on floating-point rounding.
THRESHOLDS_F = (5.005, 10.005, 20.005, 40.005, 60.005)


def names_covering(prefix: str, partitions: int, per_partition: int) -> list[str]:
    """``prefix0``, ``prefix1``... chosen so each partition gets ``per_partition`` keys."""
    chosen: list[str] = []
    counts = [0] * partitions
    i = 0
    while min(counts) < per_partition:
        name = f"{prefix}{i}"
        p = partition_for(name, partitions)
        if counts[p] < per_partition:
            counts[p] += 1
            chosen.append(name)
        i += 1
    return chosen


def _message(stream: str, key: str, body: dict[str, object]) -> Message:
    return Message(stream, key.encode(), orjson.dumps(body))


def _malformed(stream: str, key: str, raw: bytes | None) -> Message:
    return Message(stream, key.encode(), raw, ((KIND_HEADER, MALFORMED),))


def _disorder(
    rng: random.Random, items: list[tuple[int, Message]], jitter_ms: int
) -> list[Message]:
    """Arrival order of ``(timestamp, message)`` pairs, each delayed by at most
    ``jitter_ms``: a record can arrive after a newer one only if it is at most
    ``jitter_ms`` older, so it is never late under a watermark bound that large."""
    return [m for _, m in sorted(items, key=lambda item: item[0] + rng.randint(0, jitter_ms))]


def _insert_malformed(rng: random.Random, out: list[Message], bad: list[Message]) -> None:
    for message in bad:
        out.insert(rng.randrange(len(out) + 1), message)


def tweets(seed: int, count: int, base_ms: int, bound_ms: int, partitions: int) -> list[Message]:
    rng = random.Random(f"eddy-chaos-tweets:{seed}")
    users = names_covering("user_", partitions, 3)
    step_ms = max(1, TWEET_SPAN_MS // max(1, count))
    items = []
    for i in range(count):
        user = rng.choice(users)
        # 0-3 hashtags, sometimes the same one twice (counted once per tweet).
        words = [f"#{rng.choice(TAGS)}" for _ in range(rng.choice((0, 1, 1, 2, 3)))]
        words += rng.sample(WORDS, 2)
        rng.shuffle(words)
        ts = base_ms + i * step_ms
        body = {"tweet_id": f"t{i}", "user": user, "text": " ".join(words), "timestamp_ms": ts}
        items.append((ts, _message("tweets", user, body)))
    out = _disorder(rng, items, bound_ms)
    bad = [
        _malformed("tweets", users[0], b"{not json"),
        _malformed("tweets", users[1], orjson.dumps({"tweet_id": "bad", "user": users[1]})),
    ]
    _insert_malformed(rng, out, bad)
    # Closing tweets have no hashtag: they only move every upstream task's clock.
    closing_ms = base_ms + count * step_ms + CLOSING_AHEAD_MS
    for p, user in enumerate(names_covering("closing_user_", partitions, 1)):
        body = {"tweet_id": f"c{p}", "user": user, "text": "good night", "timestamp_ms": closing_ms}
        out.append(_message("tweets", user, body))
    return out


def game_events(seed: int, count: int, base_ms: int, partitions: int) -> list[Message]:
    rng = random.Random(f"eddy-chaos-game:{seed}")
    teams = [f"team_{i}" for i in range(TEAMS)]
    step_ms = max(1, GAME_SPAN_MS // max(1, count))
    # Bubbles sized so a team-minute sums to about 500 on average: some windows
    # earn a power-up on time, some only with a late burst, some never.
    per_team_minute = max(1.0, count / (TEAMS * GAME_SPAN_MS / 60_000))
    mean = POWERUP_BUBBLES * 0.95 / per_team_minute
    items = []
    for i in range(count):
        team = rng.choice(teams)
        ts = base_ms + i * step_ms
        body = {
            "player": f"{team}_p{rng.randrange(3)}",
            "team": team,
            "ts": ts,
            "bubbles": rng.randint(0, max(1, round(2 * mean))),
        }
        items.append((ts, _message("games", team, body)))
    out = _disorder(rng, items, GAME_BOUND_MS)
    # Phones leaving a tunnel: bursts 30-200 s behind the stream, so some land
    # within the 2 min lateness (updates) and some beyond it (dropped).
    stream_len = len(out)
    for n in range(max(6, count // 40) if stream_len else 0):
        at = rng.randrange(stream_len // 4, stream_len)
        behind = base_ms + at * step_ms - rng.randint(30_000, 200_000)
        if behind >= base_ms:
            team = rng.choice(teams)
            body = {"player": f"{team}_tunnel{n}", "team": team, "ts": behind}
            body["bubbles"] = rng.randint(50, 250)
            out.insert(at + (len(out) - stream_len), _message("games", team, body))
    bad = [
        _malformed("games", teams[0], b"{not json"),
        _malformed(
            "games",
            teams[1],
            orjson.dumps({"player": "x", "team": teams[1], "ts": "soon", "bubbles": 1}),
        ),
    ]
    _insert_malformed(rng, out, bad)
    closing_ms = base_ms + count * step_ms + CLOSING_AHEAD_MS
    for team in names_covering("closing_team_", partitions, 1):
        out.append(
            _message("games", team, {"player": "x", "team": team, "ts": closing_ms, "bubbles": 0})
        )
    return out


def vehicle_speeds(
    seed: int, seconds: int, base_ms: int, partitions: int
) -> tuple[list[Message], list[Message]]:
    """OBD (3 identical records a second, some seconds missing) and app streams.

    Speeds are multiples of 0.5 km/h, so every average the check takes is exact
    whatever order the records are summed in.
    """
    rng = random.Random(f"eddy-chaos-vehicles:{seed}")
    vehicles = names_covering("vehicle_", partitions, VEHICLES_PER_PARTITION)
    per_vehicle = max(5, seconds // len(vehicles))
    obd: list[tuple[int, Message]] = []
    app: list[tuple[int, Message]] = []
    for vehicle in vehicles:
        speed = rng.randint(60, 200) / 2
        for second in range(per_vehicle):
            at = base_ms + second * 1_000
            speed = min(300.0, max(0.0, speed + rng.randint(-4, 4) / 2))
            if rng.random() > 0.1:  # the device drops out now and then
                body = {"vehicle_id": vehicle, "timestamp_ms": at, "speed_kmh": speed}
                obd += [(at, _message("obd", vehicle, body))] * 3
            if rng.random() < 0.7:  # the app skips seconds, or sends twice
                for _ in range(rng.choice((1, 1, 1, 2))):
                    app_speed = max(0.0, speed + rng.randint(-16, 16) / 2)
                    ts = at + rng.randrange(1_000)
                    body = {"vehicle_id": vehicle, "timestamp_ms": ts, "speed_kmh": app_speed}
                    app.append((ts, _message("app", vehicle, body)))
    obd_out = _disorder(rng, obd, OBD_JITTER_MS)
    app_out = _disorder(rng, app, APP_JITTER_MS)
    _insert_malformed(rng, obd_out, [_malformed("obd", vehicles[0], b"{not json")])
    bad_speed = {"vehicle_id": vehicles[1], "timestamp_ms": base_ms, "speed_kmh": -5.0}
    _insert_malformed(rng, app_out, [_malformed("app", vehicles[1], orjson.dumps(bad_speed))])
    closing_ms = base_ms + per_vehicle * 1_000 + CLOSING_AHEAD_MS
    for vehicle in vehicles:
        body = {"vehicle_id": vehicle, "timestamp_ms": closing_ms, "speed_kmh": 0.0}
        obd_out.append(_message("obd", vehicle, body))
        app_out.append(_message("app", vehicle, body))
    return obd_out, app_out


def thresholds(seed: int, sensors: list[str]) -> list[Message]:
    """Threshold updates for some sensors: set, changed, or set then removed (0.0)."""
    rng = random.Random(f"eddy-chaos-thresholds:{seed}")
    out = []
    for sensor in sensors:
        roll = rng.random()
        if roll < 0.3:
            continue  # no threshold: no threshold alerts
        updates = [rng.choice(THRESHOLDS_F)]
        if roll > 0.85:
            updates.append(0.0)  # removed again
        elif roll > 0.7:
            updates.append(rng.choice(THRESHOLDS_F))
        out += [
            _message("thresholds", sensor, {"sensor_id": sensor, "threshold": t}) for t in updates
        ]
    return out


def sizes(readings: int) -> dict[str, int]:
    """The reference streams scale with the sensor readings (a few thousand records
    for the default 10 000 readings)."""
    return {"tweets": readings // 5, "games": readings // 4, "vehicle_seconds": readings // 25}


def all_streams(
    seed: int,
    readings: int,
    sensors: list[str],
    base_ms: int,
    bound_ms: int,
    partitions: int,
) -> Iterator[tuple[str, list[Message]]]:
    if not readings:
        return
    n = sizes(readings)
    yield "tweets", tweets(seed, n["tweets"], base_ms, bound_ms, partitions)
    yield "games", game_events(seed, n["games"], base_ms, partitions)
    obd, app = vehicle_speeds(seed, n["vehicle_seconds"], base_ms, partitions)
    yield "obd", obd
    yield "app", app
    yield "thresholds", thresholds(seed, sensors)
