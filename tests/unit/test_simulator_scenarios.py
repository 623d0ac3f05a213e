"""The scenario generators' guarantees: the shared ones as properties over every
scenario, then what defines each scenario (what its pipeline relies on).

No broker and no wall clock: the generators are pure.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from eddy.errors import ConfigError
from eddy.examples.records import GameEvent, Tweet, VehicleSpeed
from eddy.serde import decode_model
from tools.simulator import (
    GameConfig,
    Scheduled,
    Stream,
    ThresholdConfig,
    TweetConfig,
    VehicleConfig,
    generate_game,
    generate_thresholds,
    generate_tweets,
    generate_vehicles,
)
from tools.simulator.producer import encode
from tools.simulator.tweets import HASHTAGS

START_MS = 1_700_000_000_123
Timeline = list[Scheduled[Any]]
# name -> (build a config from seed, start and count, generate, its main stream)
SCENARIOS: dict[str, tuple[Callable[..., Any], Callable[[Any], Iterator[Any]], Stream]] = {
    "thresholds": (ThresholdConfig, generate_thresholds, Stream.THRESHOLDS),
    "vehicles": (VehicleConfig, generate_vehicles, Stream.OBD),
    "tweets": (TweetConfig, generate_tweets, Stream.TWEETS),
    "game": (GameConfig, generate_game, Stream.GAME),
}
MODELS = {Stream.OBD: VehicleSpeed, Stream.APP: VehicleSpeed, Stream.TWEETS: Tweet}


def run(name: str, **config: Any) -> Timeline:
    build, generate, _ = SCENARIOS[name]
    return list(generate(build(**config)))


scenario_runs = st.fixed_dictionaries(
    {
        "name": st.sampled_from(sorted(SCENARIOS)),
        "seed": st.integers(-(2**40), 2**40),
        "start_ms": st.integers(0, 2 * START_MS),
        "count": st.integers(1, 300),
    }
)


@given(scenario_runs)
def test_same_seed_gives_the_same_deliveries(case: dict[str, Any]) -> None:
    assert run(**case) == run(**case)


@given(scenario_runs, st.integers(1, 2**20))
def test_different_seeds_give_different_deliveries(case: dict[str, Any], delta: int) -> None:
    case["count"] = max(case["count"], 30)
    assert run(**case) != run(**case | {"seed": case["seed"] + delta})


@given(scenario_runs)
def test_deliveries_come_in_order_and_never_before_they_happened(case: dict[str, Any]) -> None:
    deliveries = run(**case)
    times = [d.deliver_at_ms for d in deliveries]
    assert times == sorted(times)
    assert all(d.deliver_at_ms >= d.happened_ms >= case["start_ms"] for d in deliveries)


@given(scenario_runs)
def test_count_bounds_the_main_stream(case: dict[str, Any]) -> None:
    main = SCENARIOS[case["name"]][2]
    assert sum(d.stream is main for d in run(**case)) == case["count"]


@given(scenario_runs)
def test_records_are_valid_and_keyed_by_their_entity(case: dict[str, Any]) -> None:
    for delivery in run(**case):
        record = delivery.record
        assert decode_model(type(record), encode(record)) == record
        entity = {"vehicles": "vehicle_id", "tweets": "user", "game": "team"}
        assert delivery.key == getattr(record, entity.get(case["name"], "sensor_id"))


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_an_endless_run_is_lazy(name: str) -> None:
    build, generate, _ = SCENARIOS[name]
    endless = generate(build(seed=1, start_ms=START_MS, count=None))
    head = list(itertools.islice(endless, 5_000))
    assert len(head) == 5_000
    assert head[-1].deliver_at_ms > START_MS


# Thresholds


def test_thresholds_start_with_one_per_sensor_then_change_now_and_then() -> None:
    config = ThresholdConfig(seed=4, start_ms=START_MS, sensors=25, end_ms=START_MS + 3_600_000)
    updates = list(generate_thresholds(config))
    initial, later = updates[:25], updates[25:]
    assert [u.key for u in initial] == [f"sensor_{n}" for n in range(1, 26)]
    assert all(u.happened_ms == START_MS and 1.0 <= u.record.threshold <= 3.0 for u in initial)
    gaps = [b.happened_ms - a.happened_ms for a, b in itertools.pairwise(updates[24:])]
    assert all(15_000 <= gap <= 45_000 for gap in gaps)
    assert 80 <= len(later) <= 240  # an hour at one update every ~30 s
    removals = [u for u in later if u.record.threshold == 0.0]
    assert 0.1 <= len(removals) / len(later) <= 0.3
    assert all(1.0 <= u.record.threshold <= 3.0 for u in later if u not in removals)
    assert updates[-1].happened_ms <= config.end_ms


@given(st.integers(), st.integers(1, 100), st.integers(1, 100))
def test_thresholds_stop_at_the_count_or_the_end(seed: int, sensors: int, count: int) -> None:
    end_ms = START_MS + 120_000
    by_count = list(
        generate_thresholds(
            ThresholdConfig(seed=seed, start_ms=START_MS, sensors=sensors, count=count)
        )
    )
    assert len(by_count) == count
    by_end = list(
        generate_thresholds(
            ThresholdConfig(seed=seed, start_ms=START_MS, sensors=sensors, end_ms=end_ms)
        )
    )
    assert len(by_end) >= sensors
    assert all(u.happened_ms <= end_ms for u in by_end)


# Vehicles


@pytest.fixture(scope="module")
def long_drive() -> tuple[VehicleConfig, Timeline]:
    config = VehicleConfig(seed=11, start_ms=START_MS, vehicles=5, count=45_000)  # ~50 min
    return config, list(generate_vehicles(config))


def by_stream(deliveries: Timeline, stream: Stream) -> list[Scheduled[Any]]:
    return [d for d in deliveries if d.stream is stream]


def test_obd_sends_three_identical_records_per_vehicle_and_whole_second(
    long_drive: tuple[VehicleConfig, Timeline],
) -> None:
    _, deliveries = long_drive
    obd = by_stream(deliveries, Stream.OBD)
    groups: dict[tuple[str, int], list[float]] = defaultdict(list)
    for d in obd:
        groups[(d.key, d.record.timestamp_ms)].append(d.record.speed_kmh)
    last_second = max(second for _, second in groups)
    for (_, second), speeds in groups.items():
        assert second % 1000 == 0
        assert len(set(speeds)) == 1
        assert len(speeds) == 3 or second == last_second
    assert all(0 <= d.delay_ms <= 2_000 for d in obd)
    assert max(d.delay_ms for d in obd) > 1_500  # real disorder, not in order
    assert not any(d.late for d in obd)


def test_obd_dropouts_lose_20_to_60_seconds_of_records(
    long_drive: tuple[VehicleConfig, Timeline],
) -> None:
    _, deliveries = long_drive
    obd = {(d.key, d.record.timestamp_ms) for d in by_stream(deliveries, Stream.OBD)}
    app_seconds = {
        (d.key, d.record.timestamp_ms // 1000 * 1000) for d in by_stream(deliveries, Stream.APP)
    }
    last_obd = max(second for _, second in obd)
    # The run stops mid-second: the last second is partial for every vehicle.
    silent = sorted(key for key in app_seconds - obd if key[1] < last_obd)
    # Consecutive silent seconds of one vehicle form one dropout.
    dropouts: list[int] = []
    for (vehicle, second), (prev_vehicle, prev_second) in zip(
        silent, [("", 0), *silent], strict=False
    ):
        if vehicle == prev_vehicle and second == prev_second + 1000:
            dropouts[-1] += 1
        else:
            dropouts.append(1)
    assert len(dropouts) >= 3
    last_are_cut = [(v, s) for v, s in silent if s > last_obd - 60_000]
    complete = dropouts[:-1] if last_are_cut else dropouts
    assert all(20 <= length <= 60 for length in complete)
    # Lost, not delayed: the device never sends them.
    assert not set(silent) & obd


def test_the_app_uploads_every_second_in_batches_10_to_150_seconds_late(
    long_drive: tuple[VehicleConfig, Timeline],
) -> None:
    config, deliveries = long_drive
    app = by_stream(deliveries, Stream.APP)
    seconds = Counter((d.key, d.record.timestamp_ms // 1000) for d in app)
    assert set(seconds.values()) == {1}
    assert all(1 <= d.record.timestamp_ms % 1000 <= 30 for d in app)
    lags = [d.delay_ms for d in app]
    assert all(10_000 <= lag <= 150_000 for lag in lags)
    assert min(lags) < 20_000
    assert max(lags) > 130_000
    assert all(d.late for d in app)
    uploads = {(d.key, d.deliver_at_ms) for d in app}
    assert len(uploads) < len(app) / 5  # batches, not one at a time
    vehicles = {d.key for d in app}
    assert vehicles == {f"vehicle_{n}" for n in range(1, config.vehicles + 1)}


def test_the_app_mostly_agrees_with_obd_and_disagrees_in_about_ten_percent(
    long_drive: tuple[VehicleConfig, Timeline],
) -> None:
    _, deliveries = long_drive
    obd = {
        (d.key, d.record.timestamp_ms): d.record.speed_kmh
        for d in by_stream(deliveries, Stream.OBD)
    }
    diffs = [
        abs(d.record.speed_kmh - obd[key])
        for d in by_stream(deliveries, Stream.APP)
        if (key := (d.key, d.record.timestamp_ms // 1000 * 1000)) in obd
    ]
    assert all(diff <= 3.0 + 1e-9 or 10.0 - 1e-9 <= diff <= 25.0 + 1e-9 for diff in diffs)
    disagreements = sum(diff > 5.0 for diff in diffs)
    assert 0.08 <= disagreements / len(diffs) <= 0.12


def test_speeds_are_a_smooth_walk_within_0_and_130(
    long_drive: tuple[VehicleConfig, Timeline],
) -> None:
    _, deliveries = long_drive
    speeds = {
        (d.key, d.record.timestamp_ms): d.record.speed_kmh
        for d in by_stream(deliveries, Stream.OBD)
    }
    assert all(0.0 <= s <= 130.0 and round(s, 1) == s for s in speeds.values())
    steps = [
        abs(speed - speeds[(vehicle, second - 1000)])
        for (vehicle, second), speed in speeds.items()
        if (vehicle, second - 1000) in speeds
    ]
    assert max(steps) <= 8.1
    assert len({round(s) for s in speeds.values()}) > 80  # it moves over most of the range


# Tweets

HASHTAG = re.compile(r"#(\w+)")


@pytest.fixture(scope="module")
def tweets() -> list[Scheduled[Tweet]]:
    return list(generate_tweets(TweetConfig(seed=5, start_ms=START_MS, count=20_000)))


def test_hashtags_come_from_the_vocabulary_in_mixed_case(tweets: list[Scheduled[Tweet]]) -> None:
    found = [HASHTAG.findall(d.record.text) for d in tweets]
    assert all(len(tags) <= 3 for tags in found)
    assert {tag.lower() for tags in found for tag in tags} == set(HASHTAGS)
    assert any(tag != tag.lower() for tags in found for tag in tags)  # #Kafka, #KAFKA
    assert any(len({t.lower() for t in tags}) < len(tags) for tags in found)  # repeated
    assert any(not tags for tags in found)


def test_hashtag_popularity_is_skewed(tweets: list[Scheduled[Tweet]]) -> None:
    counts = Counter(tag.lower() for d in tweets for tag in HASHTAG.findall(d.record.text))
    ranked = [tag for tag, _ in counts.most_common()]
    assert ranked[:3] == list(HASHTAGS[:3])
    assert counts[HASHTAGS[0]] > 5 * counts[HASHTAGS[-1]]


def test_tweets_follow_the_rate_with_bounded_disorder(tweets: list[Scheduled[Tweet]]) -> None:
    assert len({d.record.tweet_id for d in tweets}) == len(tweets)
    assert {d.key for d in tweets} == {f"user_{n}" for n in range(1, 51)}
    assert all(d.key == d.record.user and 0 <= d.delay_ms <= 1_000 for d in tweets)
    stamps = sorted(d.record.timestamp_ms for d in tweets)
    assert stamps[0] == START_MS
    assert stamps[-1] == START_MS + (20_000 - 1) * 50


# Game


def minute_totals(deliveries: Timeline) -> dict[str, list[int]]:
    """Bubbles per team and full event-time minute (the partial ends left out)."""
    totals: dict[tuple[str, int], int] = Counter()
    for d in deliveries:
        totals[(d.record.team, d.record.ts // 60_000)] += d.record.bubbles
    minutes = sorted({minute for _, minute in totals})[1:-1]
    teams = sorted({team for team, _ in totals})
    return {team: [totals[(team, m)] for m in minutes] for team in teams}


@settings(max_examples=10)
@given(st.integers())
def test_some_teams_earn_power_ups_and_some_never_do(seed: int) -> None:
    deliveries = run("game", seed=seed, start_ms=START_MS, count=20 * 60 * 10)  # ~10 minutes
    best = {team: max(minutes) for team, minutes in minute_totals(deliveries).items()}
    assert len(best) == 4
    assert any(total >= 500 for total in best.values())
    assert any(total < 500 for total in best.values())


@pytest.fixture(scope="module")
def long_game() -> Timeline:
    return run("game", seed=9, start_ms=START_MS, count=20 * 60 * 30)  # ~30 minutes


def test_phones_in_a_tunnel_deliver_their_events_in_one_late_burst(long_game: Timeline) -> None:
    bursts: dict[tuple[str, int], list[Scheduled[GameEvent]]] = defaultdict(list)
    for d in long_game:
        if d.late:
            bursts[(d.record.player, d.deliver_at_ms)].append(d)
    assert len(bursts) >= 5
    # The run's count can stop a player mid-outage: that burst is cut short.
    last_ms = max(d.happened_ms for d in long_game)
    for (_, deliver_at_ms), events in bursts.items():
        if deliver_at_ms > last_ms:
            continue
        first = min(events, key=lambda d: d.happened_ms)
        assert first.starts_outage
        assert 20_000 <= first.delay_ms <= 90_000
        assert len(events) >= 10  # 20+ s of a player acting about once a second
    assert sum(d.starts_outage for d in long_game) == len(bursts)
    assert all(0 <= d.delay_ms <= 1_000 for d in long_game if not d.late)


def test_players_pop_1_to_20_bubbles_about_once_a_second(long_game: Timeline) -> None:
    assert all(1 <= d.record.bubbles <= 20 for d in long_game)
    per_player = Counter(d.record.player for d in long_game)
    assert len(per_player) == 20
    span_s = (max(d.happened_ms for d in long_game) - START_MS) / 1000
    assert all(0.8 <= n / span_s <= 1.2 for n in per_player.values())
    assert all(d.key == d.record.team == f"team_{d.record.player.split('_')[1]}" for d in long_game)


def test_a_small_team_still_gets_bubbles_in_range() -> None:
    deliveries = run("game", seed=2, start_ms=START_MS, count=600, teams=2, players=1)
    assert max(d.record.bubbles for d in deliveries) > 5


# Bad configs


@pytest.mark.parametrize(
    ("name", "change", "message"),
    [
        ("thresholds", {"sensors": 0}, "sensors"),
        ("thresholds", {"end_ms": START_MS - 1}, "end_ms"),
        ("thresholds", {"min_threshold_f": 3.0, "max_threshold_f": 1.0}, "thresholds"),
        ("thresholds", {"removal_probability": 2.0}, "removal_probability"),
        ("vehicles", {"vehicles": 0}, "vehicles"),
        ("vehicles", {"count": 0}, "count"),
        ("vehicles", {"dropout_min_s": 70}, "dropouts"),
        ("vehicles", {"app_lag_min_ms": 10_000, "app_lag_max_ms": 10_500}, "app lag"),
        ("vehicles", {"start_ms": -1}, "start_ms"),
        ("tweets", {"users": 0}, "users"),
        ("tweets", {"rate_per_s": float("nan")}, "tweet rate"),
        ("tweets", {"disorder_ms": -1}, "disorder_ms"),
        ("game", {"teams": 0}, "teams"),
        ("game", {"players": 0}, "players"),
        ("game", {"offline_min_ms": 5, "offline_max_ms": 1}, "time offline"),
        ("game", {"offline_probability": -0.1}, "offline_probability"),
    ],
)
def test_bad_configs_are_rejected_naming_the_scenario_and_value(
    name: str, change: dict[str, Any], message: str
) -> None:
    build = SCENARIOS[name][0]
    with pytest.raises(ConfigError, match=rf"^simulator: {name}: .*{message}"):
        build(**{"seed": 1, "start_ms": START_MS, **change})


def test_every_stream_has_a_model_the_pipelines_decode() -> None:
    deliveries = run("vehicles", seed=1, start_ms=START_MS, count=2_000)
    deliveries += run("tweets", seed=1, start_ms=START_MS, count=10)
    for d in deliveries:
        model: type[BaseModel] = MODELS[d.stream]
        assert decode_model(model, encode(d.record)) == d.record
