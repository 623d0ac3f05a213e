"""The chaos harness's recomputation of the reference agents, on tiny inputs
checked by hand, and its checks failing on broken outputs."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import orjson

from eddy.app.queries import partition_for
from tools.chaos import streams, workload
from tools.chaos.recompute_reference import (
    expected_alerts,
    expected_checks,
    expected_hashtags,
    final_thresholds,
    tags_of,
)
from tools.chaos.recompute_windows import expected_counts, expected_powerups
from tools.chaos.verify import Check, Rec, check_dead_letters
from tools.chaos.verify_reference import (
    check_alerts,
    check_counts,
    check_emitted,
    check_mentions,
    check_powerups,
    rest_windows_of,
)
from tools.chaos.workload import KIND_HEADER, MALFORMED

T0 = 1_800_000_000_000  # on a whole hour


def failures(checks: Sequence[Check]) -> dict[str, int]:
    return {c.name: c.failures for c in checks if c.failures}


def rec(partition: int, offset: int, value: Any, key: bytes | None = None) -> Rec:
    return Rec(partition, offset, key, orjson.dumps(value))


# -- sensor_counts: first, updates within the lateness, late beyond it ------------------


def test_counts_fire_first_then_update_then_late() -> None:
    # One sensor, watermark bound 1 s. [0, 10 s) fires first (3 readings) when 11 s
    # arrives (watermark 9_999); 2 s and 3 s arrive within the 5 s lateness (updates
    # 4 and 5); 16.5 s moves the watermark to 15_499 >= 9_999 + 5_000, so 4 s is
    # late; 30 s fires [10 s, 20 s) with its 3 readings.
    arrivals = [1_000, 5_000, 9_000, 11_000, 2_000, 12_000, 3_000, 16_500, 4_000, 30_000]
    got = expected_counts({0: [("s1", T0 + t, 1.0) for t in arrivals]}, bound_ms=1_000)
    assert sorted((k[1] - T0, k[2], k[3]) for k in got.results) == [
        (0, "first", 3),
        (0, "update", 4),
        (0, "update", 5),
        (10_000, "first", 3),
    ]
    assert got.late == [("s1", T0 + 4_000, 1.0)]
    first = got.results[("s1", T0, "first", 3)]
    assert first == {
        "sensor_id": "s1",
        "window_start_ms": T0,
        "window_end_ms": T0 + 10_000,
        "count": 3,
        "timing": "first",
    }


def test_count_checks_tell_a_lost_window_from_a_miscounted_one() -> None:
    arrivals = [1_000, 5_000, 9_000, 11_000, 2_000, 30_000]
    want = expected_counts({0: [("s1", T0 + t, 1.0) for t in arrivals]}, bound_ms=1_000)
    good = [rec(0, i, body) for i, body in enumerate(want.results.values())]
    assert failures(check_counts(want, good, [])) == {}
    assert failures(check_counts(want, good[1:], [])) == {"counts first/update: every one": 1}
    recounted = [rec(0, 0, {**want.results[("s1", T0, "first", 3)], "count": 6}), *good[1:]]
    assert failures(check_counts(want, recounted, [])) == {
        "counts first/update: equal recomputation": 2  # the 6 unexpected, the 3 not seen
    }
    assert failures(check_counts(want, [*good, good[0]], [])) == {
        "counts first/update: none twice": 1
    }


def test_counts_watermark_is_per_partition() -> None:
    # The same arrivals split over two partitions: partition 1's reading at 30 s
    # does not close partition 0's windows.
    got = expected_counts(
        {0: [("a", T0 + 1_000, 1.0)], 1: [("b", T0 + 30_000, 1.0)]}, bound_ms=1_000
    )
    assert list(got.results) == []


# -- team_powerups: 500 bubbles in a minute, once, late bursts within 2 min -------------


def test_powerups_first_update_once_and_late_beyond_lateness() -> None:
    green = [
        ("g", T0 + 1_000, 420),
        ("g", T0 + 63_001, 0),  # watermark 61_000: minute 0 fires with 420, no award
        ("g", T0 + 30_000, 50),  # within the lateness: 470, re-fires, still no award
        ("g", T0 + 31_000, 40),  # 510: awarded, as an update
        ("g", T0 + 32_000, 100),  # 610, but the window awarded already
        ("g", T0 + 300_000, 0),  # watermark 297_999: minute 0 is gone
        ("g", T0 + 33_000, 500),  # late beyond the lateness: dropped
    ]
    red = [("r", T0, 600), ("r", T0 + 70_000, 0)]  # 600 on time: first
    got = expected_powerups({0: green, 1: red})
    assert got == {
        ("g", T0): {
            "team": "g",
            "window_start_ms": T0,
            "window_end_ms": T0 + 60_000,
            "bubbles": 510,
            "timing": "update",
        },
        ("r", T0): {
            "team": "r",
            "window_start_ms": T0,
            "window_end_ms": T0 + 60_000,
            "bubbles": 600,
            "timing": "first",
        },
    }


def test_powerup_checks_catch_loss_duplicate_and_wrong_value() -> None:
    want = expected_powerups({0: [("r", T0, 600), ("r", T0 + 70_000, 0)]})
    good = [rec(0, 0, want[("r", T0)])]
    assert failures(check_powerups(want, good)) == {}
    assert failures(check_powerups(want, [])) == {"power-ups: every one": 1}
    assert failures(check_powerups(want, good * 2)) == {"power-ups: none twice": 1}
    wrong = [rec(0, 0, {**want[("r", T0)], "bubbles": 599})]
    assert failures(check_powerups(want, wrong)) == {"power-ups: equal recomputation": 1}
    extra = [*good, rec(0, 1, {**want[("r", T0)], "window_start_ms": T0 + 60_000})]
    assert failures(check_powerups(want, extra)) == {"power-ups: equal recomputation": 1}
    assert rest_windows_of(want) == {"r": [want[("r", T0)]]}


# -- sensor_alerts: freezing, thresholds from the broadcast, the 1 h cleanup ----------


def test_alerts_freezing_threshold_and_hour_long_silence() -> None:
    thresholds = final_thresholds([("a", 5.005), ("b", 5.005), ("b", 0.0)])
    assert thresholds == {"a": 5.005}
    readings = [
        ("a", T0, 50.0),
        ("a", T0 + 100, 56.0),  # +6.0 > 5.005: threshold
        ("a", T0 + 200, 31.5),  # freezing, and -24.5: threshold
        ("b", T0, 50.0),
        ("b", T0 + 100, 60.0),  # b's threshold was removed: nothing
        ("c", T0, 10.0),  # freezing; c has no threshold
        ("d", T0 + 3_700_000, 50.0),  # watermark passes a's cleanup (T0 + 200 + 1 h)
        ("a", T0 + 3_700_100, 70.0),  # a forgot 31.5: no threshold alert
    ]
    got = expected_alerts({0: readings}, thresholds, bound_ms=1_000)
    assert sorted(got.want) == [
        ("a", T0 + 100, 56.0, "threshold"),
        ("a", T0 + 200, 31.5, "freezing"),
        ("a", T0 + 200, 31.5, "threshold"),
        ("c", T0, 10.0, "freezing"),
    ]
    change = got.values[("a", T0 + 200, 31.5, "threshold")]
    assert change["diff"] == 24.5
    assert change["threshold"] == 5.005
    assert change["message"] == "Temperature of sensor 'a' changed by 24.50 F"
    assert got.values[("c", T0, 10.0, "freezing")] == {
        "sensor_id": "c",
        "kind": "freezing",
        "message": "Freezing Alarm for c",
        "timestamp_ms": T0,
        "temperature": 10.0,
    }


def test_alert_checks_skip_rising_and_tolerate_a_rounded_diff() -> None:
    got = expected_alerts({0: [("a", T0, 50.0), ("a", T0 + 100, 62.42)]}, {"a": 5.005}, 1_000)
    (at,) = got.want
    emitted = {**got.values[at], "diff": round(got.values[at]["diff"], 6)}
    rising = {"sensor_id": "a", "kind": "rising", "message": "..."}
    assert failures(check_alerts(got, [rec(0, 0, emitted), rec(0, 1, rising)])) == {}
    assert failures(check_alerts(got, [rec(0, 0, rising)])) == {
        "freezing/threshold alerts: every one": 1
    }
    off = {**emitted, "diff": emitted["diff"] + 0.01}
    assert failures(check_alerts(got, [rec(0, 0, off)])) == {
        "freezing/threshold alerts: equal recomputation": 1
    }


# -- hashtag_counts: its repartition topic, then the counts --------------------------------


def test_hashtags_counted_per_minute_with_running_totals() -> None:
    assert tags_of("#Kafka and #kafka #flink_2 x#y #") == ["kafka", "flink_2"]
    tweets = {
        0: [("t1", "#a #b", T0 + 1_000), ("t2", "#A", T0 + 61_000), ("c0", "bye", T0 + 600_000)],
        1: [("t3", "#a", T0 + 2_000), ("c1", "bye", T0 + 600_000)],
    }
    got = expected_hashtags(tweets, partitions=2, bound_ms=1_000)
    assert got.mentions == {
        ("t1", "a"): T0 + 1_000,
        ("t1", "b"): T0 + 1_000,
        ("t2", "a"): T0 + 61_000,
        ("t3", "a"): T0 + 2_000,
    }
    assert {k: (v["count"], v["total"]) for k, v in got.counts.items()} == {
        ("a", T0): (2, 2),
        ("b", T0): (1, 1),
        ("a", T0 + 60_000): (1, 3),
    }
    assert got.ambiguous == []
    # A third tweet partition with nothing in it holds the counting stage's clock.
    assert expected_hashtags(tweets, partitions=3, bound_ms=1_000).counts == {}
    # A tweet later than the bound in its own partition: its fate depends on timing.
    late = {0: [("t1", "#a", T0 + 70_000), ("t2", "#a", T0 + 1_000)]}
    assert expected_hashtags(late, partitions=1, bound_ms=1_000).ambiguous == ["t2"]


def test_mention_checks_ignore_markers_and_need_the_hashtag_key() -> None:
    got = expected_hashtags({0: [("t1", "#a", T0)]}, partitions=1, bound_ms=1_000)
    mention = {"hashtag": "a", "tweet_id": "t1", "timestamp_ms": T0}
    marker = Rec(0, 1, None, b"", (("eddy.watermark", b"5"), ("eddy.upstream", b"0")))
    checks = check_mentions(got, [rec(0, 0, mention, b"a"), marker])
    assert failures(checks) == {}
    assert {c.agent for c in checks} == {"hashtag_counts"}
    assert failures(check_mentions(got, [rec(0, 0, mention, b"b")])) == {
        "repartition mentions: equal recomputation": 1
    }
    assert failures(check_mentions(got, [rec(0, 0, mention, b"a")] * 3)) == {
        "repartition mentions: none twice": 2
    }


def test_a_record_of_the_repartition_topic_that_is_not_a_mention_is_wrong() -> None:
    got = expected_hashtags({0: [("t1", "#a", T0)]}, partitions=1, bound_ms=1_000)
    mention = rec(0, 0, {"hashtag": "a", "tweet_id": "t1", "timestamp_ms": T0}, b"a")
    empty = Rec(0, 1, b"a", b"")  # empty, but no watermark header: not a marker
    for bad in (empty, Rec(0, 1, b"a", b"{oops"), rec(0, 1, {"hashtag": "a"}, b"a")):
        assert failures(check_mentions(got, [mention, bad])) == {
            "repartition mentions: equal recomputation": 1
        }


# -- vehicle_speed ----------------------------------------------------------------------


def test_vehicle_checks_average_each_side_and_roll() -> None:
    closing = ("v1", T0 + 400_000, 0.0)
    obd = {0: [*[("v1", T0, 50.0)] * 3, *[("v1", T0 + 1_000, 60.0)] * 3, ("v1", T0 + 2_000, 1.0)]}
    app = {0: [("v1", T0 + 7, 52.0), ("v1", T0 + 1_300, 70.0), ("v1", T0 + 1_900, 71.0)]}
    obd[0].append(closing)
    app[0].append(closing)
    got = expected_checks(obd, app, tolerance_kmh=5.0)
    assert got.ambiguous == []
    assert {k[1] - T0: (v["diff_kmh"], v["within_tolerance"]) for k, v in got.checks.items()} == {
        0: (2.0, True),
        1_000: (10.5, False),  # the app sent twice: (70 + 71) / 2
    }
    second = got.checks[("v1", T0 + 1_000)]
    # What vehicle-speed-checks carries: the joined value, its second as second_ms.
    assert second == {
        "vehicle_id": "v1",
        "second_ms": T0 + 1_000,
        "obd_speed_kmh": 60.0,
        "app_speed_kmh": 70.5,
        "diff_kmh": 10.5,
        "within_tolerance": False,
        "rolling_agreement": 0.5,
    }
    # Without the app's closing record its 180 s delay holds the clock: nothing closes.
    app[0].pop()
    assert expected_checks(obd, app, tolerance_kmh=5.0).checks == {}


# -- the generic check and dead letters ---------------------------------------------------


def test_check_emitted_counts_each_kind_of_failure() -> None:
    want = Counter({"x": 1, "y": 1})
    values = {"x": 1, "y": 2}
    assert failures(check_emitted("p", "w", want, values, [("x", 1), ("y", 2)])) == {}
    assert failures(check_emitted("p", "w", want, values, [("x", 1), ("x", 1), ("z", 3)])) == {
        "w: every one": 1,
        "w: none twice": 1,
        "w: equal recomputation": 1,
    }


def test_dead_letters_are_counted_per_stage_and_charged_to_its_agent() -> None:
    bad = Rec(0, 3, b"k", b"{oops", ((KIND_HEADER, MALFORMED),))

    def dead(stage: str, topic: bytes = b"readings") -> Rec:
        headers = (
            ("eddy.pipeline", stage.encode()),
            ("eddy.source.topic", topic),
            ("eddy.source.partition", b"0"),
            ("eddy.source.offset", b"3"),
        )
        return Rec(0, 0, b"k", b"{oops", headers)

    both = [dead("sensor_minmax"), dead("sensor_counts")]
    assert failures(check_dead_letters("sensor_minmax", "readings", [bad], both)) == {}
    assert failures(check_dead_letters("sensor_counts", "readings", [bad], both[:1])) == {
        "dead letters: every malformed input": 1
    }
    # hashtag_counts reads tweets in its repartition stage, which dead-letters them.
    tweets = [dead("hashtag_counts.repartition", b"tweets")]
    checks = check_dead_letters(
        "hashtag_counts", "tweets", [bad], tweets, stage="hashtag_counts.repartition"
    )
    assert failures(checks) == {}
    assert {c.agent for c in checks} == {"hashtag_counts"}
    assert failures(check_dead_letters("hashtag_counts", "tweets", [bad], tweets)) == {
        "dead letters: every malformed input": 1
    }


# -- the seeded streams ---------------------------------------------------------------------


def _by_partition(messages: Sequence[workload.Message], parse: Any) -> dict[int, list[Any]]:
    out: dict[int, list[Any]] = {}
    for m in messages:
        if KIND_HEADER not in dict(m.headers):
            out.setdefault(partition_for(m.key.decode(), 6), []).append(
                parse(orjson.loads(m.value or b""))
            )
    return out


def test_streams_are_seeded_and_timing_independent() -> None:
    load = workload.build(3, 200, 10, 10_000, 20, T0, 1_000, 6)
    assert load == workload.build(3, 200, 10, 10_000, 20, T0, 1_000, 6)
    assert set(load.reference) == {"tweets", "games", "obd", "app"}
    assert {m.stream for m in load.thresholds} == {"thresholds"}
    assert all(m.stream != "thresholds" for m in load.interleaved())
    assert len(load.interleaved()) == load.total
    ref = load.reference
    tweets = _by_partition(ref["tweets"], lambda b: (b["tweet_id"], b["text"], b["timestamp_ms"]))
    assert set(tweets) == set(range(6)), "a tweet partition without tweets stops the counts"
    hashtags = expected_hashtags(tweets, partitions=6, bound_ms=1_000)
    assert hashtags.ambiguous == []
    assert len(hashtags.counts) >= 20
    speed = lambda b: (b["vehicle_id"], b["timestamp_ms"], b["speed_kmh"])  # noqa: E731
    checks = expected_checks(
        _by_partition(ref["obd"], speed), _by_partition(ref["app"], speed), 5.0
    )
    assert checks.ambiguous == []
    assert {c["within_tolerance"] for c in checks.checks.values()} == {True, False}
    games = _by_partition(ref["games"], lambda b: (b["team"], b["ts"], b["bubbles"]))
    timings = Counter(p["timing"] for p in expected_powerups(games).values())
    assert timings["first"] > 0
    assert timings["update"] > 0
    assert sum(KIND_HEADER in dict(m.headers) for s in ref.values() for m in s) >= 4
    # A few thousand records for the default 10 000 readings: the machines are small.
    assert sum(len(s) for s in ref.values()) < 8_000
    thresholds = final_thresholds(
        (b["sensor_id"], b["threshold"])
        for b in (orjson.loads(m.value or b"") for m in load.thresholds)
    )
    assert thresholds
    assert set(thresholds.values()) <= set(streams.THRESHOLDS_F)
