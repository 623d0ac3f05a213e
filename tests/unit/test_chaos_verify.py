"""Each check of the chaos verifier passes on a correct run and fails on a broken one.

A checker that never fails proves nothing, so every test builds the outputs of a
correct run from a small synthetic input, confirms the checks pass on them, then
breaks them one way (a loss, a duplicate, a wrong aggregate, a reordering, a
missing or extra window, a missing dead letter...) and confirms the right check
counts exactly that failure.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest

from tools.chaos.recompute import checker_aggregates
from tools.chaos.report import RunResult
from tools.chaos.schedule import RunConfig, make_schedule
from tools.chaos.verify import (
    Check,
    Rec,
    check_aggregates,
    check_dead_letters,
    check_echo,
    check_late,
    check_ledger,
    check_readers,
    check_rest,
    check_windows,
    checker_rows,
    rest_windows,
    same_windows,
    sensor_expectation,
)
from tools.chaos.workload import KIND_HEADER, MALFORMED

BAD = ((KIND_HEADER, MALFORMED),)
SIZE = 5_000
T0 = 1_800_000_000_000


def rec(
    partition: int, offset: int, value: Any, headers: tuple[tuple[str, bytes], ...] = ()
) -> Rec:
    raw = value if isinstance(value, bytes) or value is None else orjson.dumps(value)
    return Rec(partition, offset, None, raw, headers)


def failures(checks: Sequence[Check]) -> dict[str, int]:
    return {c.name: c.failures for c in checks if c.failures}


# -- the checker -------------------------------------------------------------------------

# Two keys in two partitions, a malformed record in between: what the input holds.
INPUT = [
    rec(0, 0, {"id": 0, "key": "a", "seq": 0, "amount": 5}),
    rec(1, 0, {"id": 1, "key": "b", "seq": 0, "amount": -2}),
    rec(0, 1, {"id": 2, "key": "a", "seq": 1, "amount": -7}),
    rec(0, 2, b"{not json", BAD),
    rec(1, 1, {"id": 3, "key": "b", "seq": 1, "amount": 4}),
    rec(0, 3, {"id": 4, "key": "a", "seq": 2, "amount": 1}),
]
ROWS = checker_rows(INPUT)
EXPECTED = checker_aggregates(ROWS)


def correct_echo() -> list[Rec]:
    # Echo is keyed like the input, so it lands in the same partition numbers.
    lanes: dict[int, int] = {}
    out = []
    for row in ROWS:
        offset = lanes.get(row.partition, 0)
        lanes[row.partition] = offset + 1
        body = {"id": row.id, "partition": row.partition, "offset": row.offset}
        out.append(rec(row.partition, offset, body))
    return out


def correct_agg() -> list[Rec]:
    return [rec(r.partition, i, EXPECTED.aggs[(r.key, r.seq)]) for i, r in enumerate(ROWS)]


def test_the_recomputation_is_the_running_aggregate() -> None:
    assert EXPECTED.final == {
        "a": {"count": 3, "sum": -1, "min": -7, "last_seq": 2},
        "b": {"count": 2, "sum": 2, "min": -2, "last_seq": 1},
    }
    assert EXPECTED.alerts == []


def test_a_correct_checker_run_passes_every_check() -> None:
    checks = check_echo(ROWS, correct_echo()) + check_aggregates(EXPECTED, correct_agg(), [])
    assert failures(checks) == {}
    assert failures([check_ledger(ROWS, 5)]) == {}


def test_a_lost_echo_is_counted_as_lost() -> None:
    echo = correct_echo()
    del echo[2]
    assert failures(check_echo(ROWS, echo)) == {"echo: every input id": 1}


def test_a_duplicated_echo_is_counted_once_per_extra_copy_and_breaks_order() -> None:
    echo = correct_echo()
    again = echo[0]
    echo.append(Rec(again.partition, 99, None, again.value))
    echo.append(Rec(again.partition, 100, None, again.value))
    assert failures(check_echo(ROWS, echo)) == {
        "echo: no id twice": 2,
        "echo: source order per partition": 2,
    }


def test_an_echo_out_of_source_order_is_an_order_violation() -> None:
    echo = correct_echo()
    first, second = echo[0], echo[1]  # input partition 0, offsets 0 and 1
    echo[0] = Rec(first.partition, first.offset, None, second.value)
    echo[1] = Rec(second.partition, second.offset, None, first.value)
    assert failures(check_echo(ROWS, echo)) == {"echo: source order per partition": 1}


def test_an_echo_naming_the_wrong_source_offset_is_wrong() -> None:
    echo = correct_echo()
    body = orjson.loads(echo[2].value or b"")  # the last of its partition
    echo[2] = rec(echo[2].partition, echo[2].offset, {**body, "offset": 42})
    assert failures(check_echo(ROWS, echo)) == {"echo: true source position": 1}


def test_a_wrong_aggregate_is_counted_as_wrong() -> None:
    agg = correct_agg()
    body = orjson.loads(agg[2].value or b"")
    agg[2] = rec(agg[2].partition, agg[2].offset, {**body, "sum": body["sum"] + 1})
    assert failures(check_aggregates(EXPECTED, agg, [])) == {"agg: equals recomputation": 1}


def test_a_missing_or_repeated_aggregate_is_lost_or_duplicated() -> None:
    agg = correct_agg()
    missing = agg[:-1]
    assert failures(check_aggregates(EXPECTED, missing, [])) == {"agg: one per input": 1}
    repeated = [*agg, Rec(agg[0].partition, 50, None, agg[0].value)]
    assert failures(check_aggregates(EXPECTED, repeated, [])) == {
        "agg: none twice": 1,
        "agg: seq order per key": 1,
    }


def test_an_alert_the_input_does_not_explain_fails() -> None:
    alert = rec(0, 0, {"key": "a", "seq": 2, "last_seq": 0})
    assert failures(check_aggregates(EXPECTED, correct_agg(), [alert])) == {
        "alerts: none unexpected": 1
    }


def test_the_ledger_check_catches_input_the_harness_lost_or_doubled() -> None:
    assert failures([check_ledger(ROWS[:-1], 5)]) == {"input holds the ledger": 1}
    assert failures([check_ledger([*ROWS, ROWS[0]], 5)]) == {"input holds the ledger": 1}


# -- dead letters -----------------------------------------------------------------------


def dead_letter(of: Rec, topic: str = "in") -> Rec:
    headers = (
        ("eddy.source.topic", topic.encode()),
        ("eddy.source.partition", str(of.partition).encode()),
        ("eddy.source.offset", str(of.offset).encode()),
    )
    return Rec(0, of.offset, None, of.value, headers)


def test_dead_letters_exactly_once_for_each_malformed_input() -> None:
    bad = [r for r in INPUT if r.headers]
    good = [dead_letter(r) for r in bad]
    assert failures(check_dead_letters("p", "in", INPUT, good)) == {}
    assert failures(check_dead_letters("p", "in", INPUT, [])) == {
        "dead letters: every malformed input": 1
    }
    assert failures(check_dead_letters("p", "in", INPUT, good * 2)) == {
        "dead letters: none twice": 1
    }
    other_topic = [dead_letter(r, topic="elsewhere") for r in bad]
    assert failures(check_dead_letters("p", "in", INPUT, other_topic)) == {
        "dead letters: every malformed input": 1
    }
    well_formed = dead_letter(INPUT[0])
    assert failures(check_dead_letters("p", "in", INPUT, [*good, well_formed])) == {
        "dead letters: only malformed, bytes intact": 1
    }


# -- windows and late readings ----------------------------------------------------------


def reading(partition: int, offset: int, sensor: str, ts: int, temp: float) -> Rec:
    return rec(partition, offset, {"sensor_id": sensor, "timestamp_ms": ts, "temperature": temp})


SENSOR_INPUT = [
    reading(0, 0, "s1", T0 + 100, 10.0),
    reading(0, 1, "s1", T0 + 900, 20.0),
    reading(0, 2, "s1", T0 + 5_500, 30.0),  # second window
    reading(0, 3, "s1", T0 + 7_000, 1.0),
    reading(0, 4, "s1", T0 + 200, 99.0),  # late: [T0, T0+5 s) closed at watermark 5_999
    rec(0, 5, b"[1, 2]", BAD),
    reading(0, 6, "s1", T0 + 60_000, 50.0),  # closing
    reading(1, 0, "s2", T0 + 1_000, 5.5),
    reading(1, 1, "s2", T0 + 60_000, 50.0),
]
SENSOR_EXPECTED = sensor_expectation(SENSOR_INPUT, SIZE, 1_000)


def window(sensor: str, start: int, count: int, low: float, high: float, avg: float) -> Rec:
    body = {
        "sensor_id": sensor,
        "window_start_ms": start,
        "window_end_ms": start + SIZE,
        "count": count,
        "min": low,
        "max": high,
        "avg": avg,
        "timing": "first",
    }
    return rec(0, 0, body)


CORRECT_WINDOWS = [
    window("s1", T0, 2, 10.0, 20.0, 15.0),
    window("s1", T0 + 5_000, 2, 1.0, 30.0, 15.5),
    window("s2", T0, 1, 5.5, 5.5, 5.5),
]


def test_the_window_recomputation_follows_the_watermark_rule() -> None:
    assert SENSOR_EXPECTED.late == [("s1", T0 + 200, 99.0)]
    assert sorted(SENSOR_EXPECTED.windows) == [("s1", T0), ("s1", T0 + 5_000), ("s2", T0)]


def test_correct_windows_pass() -> None:
    assert failures(check_windows(SENSOR_EXPECTED, CORRECT_WINDOWS, SIZE)) == {}


def test_a_missing_window_is_lost() -> None:
    checks = check_windows(SENSOR_EXPECTED, CORRECT_WINDOWS[1:], SIZE)
    assert failures(checks) == {"windows: every window": 1}


def test_an_extra_window_is_wrong_and_a_repeated_one_duplicated() -> None:
    extra = window("s2", T0 + 5_000, 1, 1.0, 1.0, 1.0)
    checks = check_windows(SENSOR_EXPECTED, [*CORRECT_WINDOWS, extra], SIZE)
    assert failures(checks) == {"windows: equal recomputation": 1}
    repeated = [*CORRECT_WINDOWS, CORRECT_WINDOWS[0]]
    assert failures(check_windows(SENSOR_EXPECTED, repeated, SIZE)) == {"windows: none twice": 1}


@pytest.mark.parametrize(
    "broken",
    [
        window("s1", T0, 3, 10.0, 20.0, 15.0),  # count
        window("s1", T0, 2, 10.0, 21.0, 15.0),  # max
        window("s1", T0, 2, 10.0, 20.0, 15.1),  # avg beyond the tolerance
    ],
    ids=["count", "max", "avg"],
)
def test_a_window_with_a_wrong_value_is_wrong(broken: Rec) -> None:
    windows = [broken, *CORRECT_WINDOWS[1:]]
    checks = check_windows(SENSOR_EXPECTED, windows, SIZE)
    assert failures(checks) == {"windows: equal recomputation": 1}


def test_late_readings_exactly_once_and_only_the_late_ones() -> None:
    late = [reading(0, 0, "s1", T0 + 200, 99.0)]
    assert failures(check_late(SENSOR_EXPECTED, late)) == {}
    assert failures(check_late(SENSOR_EXPECTED, [])) == {"late: every late reading": 1}
    assert failures(check_late(SENSOR_EXPECTED, late * 2)) == {"late: none twice": 1}
    on_time = reading(0, 1, "s1", T0 + 100, 10.0)
    assert failures(check_late(SENSOR_EXPECTED, [*late, on_time])) == {
        "late: only late readings": 1
    }


# -- REST answers and readers -----------------------------------------------------------


def test_rest_answers_need_every_worker_one_owner_and_the_recomputed_value() -> None:
    want = {"a": {"count": 3}, "b": {"count": 2}}
    good = {  # w1 forwards a's query to its owner w0, w0 forwards b's to w1
        "a": [("w0", 200, {"count": 3}, "w0"), ("w1", 200, {"count": 3}, "w0")],
        "b": [("w0", 200, {"count": 2}, "w1"), ("w1", 200, {"count": 2}, "w1")],
    }
    assert failures(check_rest("p", "agg", want, good)) == {}
    stale = {**good, "b": [("w0", 200, {"count": 1}, "w1"), ("w1", 200, {"count": 1}, "w1")]}
    assert failures(check_rest("p", "agg", want, stale)) == {"REST agg equal recomputation": 1}
    nobody = {**good, "a": [("w0", 503, None, None), ("w1", 503, None, None)]}
    assert failures(check_rest("p", "agg", want, nobody)) == {
        "REST agg equal recomputation": 1,
        "REST agg: every worker, one owner": 1,
    }
    one_down = {**good, "a": [("w0", 200, {"count": 3}, "w0"), ("w1", 503, None, None)]}
    assert failures(check_rest("p", "agg", want, one_down)) == {
        "REST agg: every worker, one owner": 1
    }
    both = {**good, "a": [("w0", 200, {"count": 3}, "w0"), ("w1", 200, {"count": 3}, "w1")]}
    assert failures(check_rest("p", "agg", want, both)) == {"REST agg: every worker, one owner": 1}


def test_rest_windows_compare_with_the_recomputation() -> None:
    want = rest_windows(SENSOR_EXPECTED)
    answer = [
        {**orjson.loads(w.value or b""), "sensor_id": None}
        for w in CORRECT_WINDOWS
        if orjson.loads(w.value or b"")["sensor_id"] == "s1"
    ]
    assert same_windows(answer, want["s1"])
    assert not same_windows(answer[:1], want["s1"])
    assert not same_windows([{**answer[0], "count": 9}, answer[1]], want["s1"])


def test_a_live_reader_that_missed_or_invented_records_fails() -> None:
    fresh = correct_echo()
    seen = [(r.partition, r.offset) for r in fresh]
    assert check_readers(fresh, seen).ok
    assert check_readers(fresh, seen[1:]).failures == 1
    assert check_readers(fresh, [*seen, (5, 5)]).failures == 1


def test_a_run_that_stopped_before_its_verdict_or_checked_nothing_is_not_clean(
    tmp_path: Path,
) -> None:
    schedule = make_schedule(RunConfig(seed=11))
    checked = RunResult("ok", tmp_path, schedule, checks=[Check("input", "run", "input", 5)])
    assert checked.clean
    assert checked.passed
    nothing = RunResult("empty", tmp_path, schedule)
    assert not nothing.clean
    assert not nothing.passed
    aborted = RunResult("aborted", tmp_path, schedule, checks=[Check("input", "run", "input")])
    aborted.aborted = "cannot create the run's topics: ... did not appear after creation"
    assert not aborted.clean
    assert not aborted.passed
    saved = json.loads(aborted.save().read_text())
    assert saved["verdict"].startswith("ABORTED before a verdict: cannot create the run's topics")
    assert (saved["passed"], saved["clean"]) == (False, False)
