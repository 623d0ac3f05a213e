"""Fault schedules and workloads are seeded, deterministic and replayable."""

from __future__ import annotations

import itertools
import json
from collections import Counter, defaultdict
from dataclasses import replace
from pathlib import Path

import orjson
import pytest

from tools.chaos import workload
from tools.chaos.errors import ChaosError, ReplayError
from tools.chaos.recompute import expected_windows
from tools.chaos.schedule import (
    ALL_KINDS,
    FaultKind,
    RunConfig,
    build_schedule,
    from_json,
    load,
    make_schedule,
    parse_kinds,
    save,
    to_json,
)

BASE = 1_800_000_000_000


def test_the_same_seed_gives_the_same_schedule_and_another_seed_another() -> None:
    first = build_schedule(7, ALL_KINDS, 2)
    assert first == build_schedule(7, ALL_KINDS, 2)
    assert first != build_schedule(8, ALL_KINDS, 2)


def test_every_kind_appears_as_often_as_asked_spread_over_the_input() -> None:
    faults = build_schedule(3, ALL_KINDS, 3, session_timeout_ms=6_000, start=0.1, end=0.9)
    assert Counter(f.kind for f in faults) == dict.fromkeys(ALL_KINDS, 3)
    points = [f.at_fraction for f in faults]
    assert points == sorted(points)
    assert points[0] >= 0.1
    assert points[-1] < 0.9
    width = 0.8 / len(faults)
    assert all(b - a >= width * 0.5 - 1e-9 for a, b in itertools.pairwise(points))
    for fault in faults:
        if fault.kind is FaultKind.ZOMBIE:
            assert fault.pause_s == 9.0  # 1.5 x the session timeout
        elif fault.kind is FaultKind.BROKER:
            assert 1.0 <= fault.pause_s <= 3.0
        else:
            assert fault.pause_s == 0.0


def test_a_saved_schedule_replays_exactly(tmp_path: Path) -> None:
    config = RunConfig(seed=11, records=5_000, keys=50, kinds=parse_kinds("kill,zombie,broker"))
    schedule = make_schedule(config)
    path = tmp_path / "schedule.json"
    save(schedule, path)
    assert load(path) == schedule
    assert from_json(json.loads(path.read_text())) == schedule
    assert to_json(load(path)) == to_json(schedule)


@pytest.mark.parametrize(
    "data",
    [{"format": "something else"}, {"format": "eddy-chaos-schedule/1"}, [], "text"],
    ids=["format", "fields", "list", "string"],
)
def test_a_file_that_is_not_a_schedule_is_refused_in_one_line(data: object) -> None:
    with pytest.raises(ReplayError):
        from_json(data)


def test_a_missing_replay_file_is_a_replay_error(tmp_path: Path) -> None:
    with pytest.raises(ReplayError, match="cannot read"):
        load(tmp_path / "nope.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ReplayError, match="not JSON"):
        load(tmp_path / "bad.json")


def test_fault_kinds_parse_from_the_command_line() -> None:
    assert parse_kinds("all") == ALL_KINDS
    assert parse_kinds("kill, restore-kill,kill") == (FaultKind.KILL, FaultKind.RESTORE_KILL)
    with pytest.raises(ChaosError, match="unknown fault kind 'nap'"):
        parse_kinds("kill,nap")


def test_bad_run_options_are_refused() -> None:
    with pytest.raises(ChaosError, match="--workers"):
        RunConfig(seed=1, workers=0)
    with pytest.raises(ChaosError, match="--guarantee"):
        RunConfig(seed=1, guarantee="maybe")


def test_feed_time_leaves_room_for_every_fault() -> None:
    config = RunConfig(seed=1, faults_per_kind=2)
    assert config.feed_seconds >= 8 * 16
    assert replace(config, duration_s=30).feed_seconds == 30


# -- workload --------------------------------------------------------------------------


def test_checker_records_are_sequenced_per_key_and_seeded() -> None:
    messages = workload.checker_messages(5, 3_000, 40)
    assert messages == workload.checker_messages(5, 3_000, 40)
    rows = [orjson.loads(m.value or b"") for m in messages if not m.headers]
    assert [r["id"] for r in rows] == list(range(3_000))
    seqs: dict[str, list[int]] = defaultdict(list)
    for row in rows:
        seqs[row["key"]].append(row["seq"])
        assert row["key"].encode() in {m.key for m in messages}
    assert all(s == list(range(len(s))) for s in seqs.values())
    assert min(r["amount"] for r in rows) < 0 < max(r["amount"] for r in rows)
    assert sum(1 for m in messages if m.headers) >= 2


def test_sensor_readings_are_late_only_where_meant_and_every_window_closes() -> None:
    messages = workload.sensor_messages(9, 5_000, 12, BASE, bound_ms=1_000)
    assert messages == workload.sensor_messages(9, 5_000, 12, BASE, bound_ms=1_000)
    malformed = [m for m in messages if (workload.KIND_HEADER, workload.MALFORMED) in m.headers]
    assert len(malformed) >= 3
    readings = []
    stragglers = set()
    for m in messages:
        if m in malformed:
            continue
        body = orjson.loads(m.value or b"")
        reading = (body["sensor_id"], body["timestamp_ms"], body["temperature"])
        readings.append(reading)
        if (workload.KIND_HEADER, workload.STRAGGLER) in m.headers:
            stragglers.add(reading)
    expected = expected_windows(readings, size_ms=5_000, bound_ms=1_000, partitions=6)
    assert expected.late, "no straggler was late: the late path is not exercised"
    assert set(expected.late) <= stragglers, "an in-bound reading was judged late"
    closed = {sensor for sensor, _ in expected.windows}
    assert closed == {workload.sensor_name(i) for i in range(12)}
    last_data_ms = BASE + 4_999 * workload.STEP_MS
    assert max(start for _, start in expected.windows) >= last_data_ms - 5_000 - 1_000


def test_both_streams_interleave_in_proportion() -> None:
    load_ = workload.build(1, 1_000, 10, 500, 5, BASE, 1_000)
    merged = load_.interleaved()
    assert len(merged) == load_.total
    first_half = merged[: len(merged) // 2]
    share = sum(m.stream == "sensor" for m in first_half) / len(first_half)
    assert share == pytest.approx(len(load_.sensor) / load_.total, abs=0.02)
