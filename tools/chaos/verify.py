"""The exactly-once checks (docs/chaos.md) over records read back from Kafka (pure).

Every function takes plain records (:class:`Rec`) and returns :class:`Check` s
that count failures and keep a few examples, so each check can be shown to fail
on synthetic bad input in the unit tests. Expectations come from
``tools.chaos.recompute``, computed from the input *as read back*, so a record
the input producer failed to write is not charged to the processor.

Failure categories feed the verdict table: ``lost`` (an input not reflected),
``duplicated`` (reflected more than once), ``wrong`` (reflected with a wrong
value: aggregates, windows, REST answers), ``order`` (source order broken),
``other`` (transactions left open, readers disagreeing, faults that never landed).
"""

from __future__ import annotations

import math
import operator
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from tools.chaos.recompute import (
    CheckerExpected,
    CheckerRow,
    Expected,
    Reading,
    windows_by_partition,
)
from tools.chaos.workload import KIND_HEADER, MALFORMED

CHECKER = "eos_checker"
SENSORS = "sensor_averages"
AVG_REL_TOLERANCE = 1e-9
EXAMPLES = 8


@dataclass(frozen=True, slots=True)
class Rec:
    """A consumed record, reduced to what the checks read."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()

    def header(self, name: str) -> bytes | None:
        return next((v for k, v in self.headers if k == name), None)

    def json(self) -> Any:
        return orjson.loads(self.value or b"null")


@dataclass
class Check:
    name: str
    agent: str  # the agent whose output (or input) it checks; "run" for the run's own
    category: str
    checked: int = 0
    failures: int = 0
    examples: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.failures == 0

    def fail(self, example: str, n: int = 1) -> None:
        self.failures += n
        if len(self.examples) < EXAMPLES:
            self.examples.append(example)


def is_malformed(rec: Rec) -> bool:
    return rec.header(KIND_HEADER) == MALFORMED


# -- the checker agent ---------------------------------------------------------------


def checker_rows(inputs: Iterable[Rec]) -> list[CheckerRow]:
    """Well-formed checker inputs in per-partition offset order."""
    rows = []
    for rec in sorted(inputs, key=lambda r: (r.partition, r.offset)):
        if not is_malformed(rec):
            body = rec.json()
            rows.append(
                CheckerRow(
                    body["id"], body["key"], body["seq"], body["amount"], rec.partition, rec.offset
                )
            )
    return rows


def check_ledger(rows: Sequence[CheckerRow], produced: int) -> Check:
    """The input topic holds ids ``0..produced-1`` once each (the harness's own input)."""
    check = Check("input holds the ledger", "run", "input", checked=produced)
    counts = Counter(r.id for r in rows)
    for record_id in range(produced):
        if counts[record_id] != 1:
            check.fail(f"id {record_id} is in the input {counts[record_id]} times")
    for record_id in set(counts) - set(range(produced)):
        check.fail(f"id {record_id} is in the input but not in the ledger")
    return check


def check_echo(rows: Sequence[CheckerRow], echo: Sequence[Rec]) -> list[Check]:
    """Each input id echoed exactly once, from its true source position, in order."""
    where = {r.id: (r.partition, r.offset) for r in rows}
    bodies = [(rec, rec.json()) for rec in sorted(echo, key=lambda r: (r.partition, r.offset))]
    counts = Counter(body["id"] for _, body in bodies)
    lost = Check("echo: every input id", CHECKER, "lost", checked=len(where))
    for record_id in where.keys() - counts.keys():
        lost.fail(f"id {record_id} (input {where[record_id]}) never echoed")
    duplicated = Check("echo: no id twice", CHECKER, "duplicated", checked=len(where))
    for record_id, n in counts.items():
        if n > 1:
            duplicated.fail(f"id {record_id} echoed {n} times", n - 1)
    wrong = Check("echo: true source position", CHECKER, "wrong", checked=len(bodies))
    order = Check("echo: source order per partition", CHECKER, "order", checked=len(bodies))
    last: dict[tuple[int, int], int] = {}
    for rec, body in bodies:
        source = (body["partition"], body["offset"])
        if where.get(body["id"]) != source:
            wrong.fail(f"id {body['id']} echoed from {source}, input is at {where.get(body['id'])}")
        lane = (rec.partition, body["partition"])
        if lane in last and body["offset"] <= last[lane]:
            order.fail(
                f"echo partition {rec.partition} offset {rec.offset}: source offset "
                f"{body['offset']} after {last[lane]}"
            )
        last[lane] = body["offset"]
    return [lost, duplicated, wrong, order]


def check_aggregates(
    expected: CheckerExpected, agg: Sequence[Rec], alerts: Sequence[Rec]
) -> list[Check]:
    """Every ``agg`` record equals the recomputation at its seq; alerts only where the
    input itself has a gap (normally never)."""
    missing = Check("agg: one per input", CHECKER, "lost", checked=len(expected.aggs))
    duplicated = Check("agg: none twice", CHECKER, "duplicated", checked=len(expected.aggs))
    wrong = Check("agg: equals recomputation", CHECKER, "wrong", checked=len(agg))
    order = Check("agg: seq order per key", CHECKER, "order", checked=len(agg))
    seen: Counter[tuple[str, int]] = Counter()
    last_seq: dict[str, int] = {}
    for rec in sorted(agg, key=lambda r: (r.partition, r.offset)):
        body = rec.json()
        at = (body["key"], body["seq"])
        seen[at] += 1
        want = expected.aggs.get(at)
        if body != want:
            wrong.fail(f"agg {body} but recomputed {want}")
        if body["key"] in last_seq and body["seq"] <= last_seq[body["key"]]:
            order.fail(f"key {body['key']}: seq {body['seq']} after {last_seq[body['key']]}")
        last_seq[body["key"]] = body["seq"]
    for at in expected.aggs.keys() - seen.keys():
        missing.fail(f"no agg for key {at[0]} seq {at[1]}")
    for at, n in seen.items():
        if n > 1:
            duplicated.fail(f"agg for key {at[0]} seq {at[1]} emitted {n} times", n - 1)
    alert_check = Check("alerts: none unexpected", CHECKER, "wrong", checked=len(alerts))
    got = Counter(_canonical(r.json()) for r in alerts)
    want = Counter(_canonical(a) for a in expected.alerts)
    for body, n in (got - want).items():
        alert_check.fail(f"alert {body} x{n}", n)
    for body, n in (want - got).items():
        alert_check.fail(f"missing alert {body} x{n}", n)
    return [missing, duplicated, wrong, order, alert_check]


def _canonical(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


# -- dead letters (every agent) ------------------------------------------------------


def check_dead_letters(
    agent: str,
    input_topic: str,
    inputs: Iterable[Rec],
    dead: Iterable[Rec],
    stage: str | None = None,
) -> list[Check]:
    """Every malformed input of ``input_topic`` is dead-lettered once by ``agent``'s
    stage reading it (``stage``, by default the stage named like the agent; its name
    is the ``eddy.pipeline`` header), bytes intact: each stage reading a topic
    dead-letters its bad records."""
    stage = stage or agent
    want = {(r.partition, r.offset): r.value for r in inputs if is_malformed(r)}
    got: Counter[tuple[int, int]] = Counter()
    values: dict[tuple[int, int], bytes | None] = {}
    for rec in dead:
        if rec.header("eddy.source.topic") != input_topic.encode():
            continue
        if rec.header("eddy.pipeline") not in (None, stage.encode()):
            continue
        source = (int(rec.header("eddy.source.partition") or -1),)
        at = (*source, int(rec.header("eddy.source.offset") or -1))
        got[at] += 1
        values[at] = rec.value
    lost = Check("dead letters: every malformed input", agent, "lost", checked=len(want))
    duplicated = Check("dead letters: none twice", agent, "duplicated", checked=len(want))
    wrong = Check("dead letters: only malformed, bytes intact", agent, "wrong")
    wrong.checked = len(got)
    for at in want.keys() - got.keys():
        lost.fail(f"malformed input at {at} not dead-lettered")
    for at, n in got.items():
        if n > 1:
            duplicated.fail(f"input at {at} dead-lettered {n} times", n - 1)
        if at not in want:
            wrong.fail(f"input at {at} dead-lettered but it is well-formed")
        elif values[at] != want[at]:
            wrong.fail(f"dead letter of {at} has other bytes than the input")
    return [lost, duplicated, wrong]


# -- sensor_averages ------------------------------------------------------------------


def sensor_expectation(inputs: Iterable[Rec], size_ms: int, bound_ms: int) -> Expected:
    by_partition: dict[int, list[Reading]] = defaultdict(list)
    for rec in sorted(inputs, key=lambda r: (r.partition, r.offset)):
        if not is_malformed(rec):
            body = rec.json()
            reading = (body["sensor_id"], body["timestamp_ms"], body["temperature"])
            by_partition[rec.partition].append(reading)
    return windows_by_partition(by_partition, size_ms=size_ms, bound_ms=bound_ms)


def window_matches(result: Mapping[str, Any], expected: Expected, size_ms: int) -> bool:
    key = (result.get("sensor_id", ""), result["window_start_ms"])
    if key not in expected.windows:
        return False
    want = expected.summary(key)
    return (
        result["count"] == want["count"]
        and result["min"] == want["min"]
        and result["max"] == want["max"]
        and math.isclose(result["avg"], want["avg"], rel_tol=AVG_REL_TOLERANCE)
        and result["window_end_ms"] == result["window_start_ms"] + size_ms
        and result.get("timing", "first") == "first"
    )


def check_windows(expected: Expected, averages: Sequence[Rec], size_ms: int) -> list[Check]:
    """Each closed window emitted exactly once with exact count/min/max (avg approx)."""
    results = [r.json() for r in averages]
    seen = Counter((r["sensor_id"], r["window_start_ms"]) for r in results)
    lost = Check("windows: every window", SENSORS, "lost", checked=len(expected.windows))
    for key in expected.windows.keys() - seen.keys():
        lost.fail(f"window {key} missing")
    duplicated = Check("windows: none twice", SENSORS, "duplicated", checked=len(expected.windows))
    for key, n in seen.items():
        if n > 1:
            duplicated.fail(f"window {key} emitted {n} times", n - 1)
    wrong = Check("windows: equal recomputation", SENSORS, "wrong", checked=len(results))
    for result in results:
        key = (result["sensor_id"], result["window_start_ms"])
        if key not in expected.windows:
            wrong.fail(f"window {key} emitted but should not exist")
        elif not window_matches(result, expected, size_ms):
            wrong.fail(f"window {key}: got {result}, want {expected.summary(key)}")
    return [lost, duplicated, wrong]


def check_late(expected: Expected, late: Sequence[Rec]) -> list[Check]:
    """Exactly the readings the recomputation finds late are on the late topic, once."""
    got: Counter[Reading] = Counter()
    for rec in late:
        body = rec.json()
        got[(body["sensor_id"], body["timestamp_ms"], body["temperature"])] += 1
    want = Counter(expected.late)
    lost = Check("late: every late reading", SENSORS, "lost", checked=len(expected.late))
    for reading, n in (want - got).items():
        lost.fail(f"late reading {reading} missing", n)
    duplicated = Check("late: none twice", SENSORS, "duplicated", checked=len(expected.late))
    wrong = Check("late: only late readings", SENSORS, "wrong", checked=len(late))
    for reading, n in (got - want).items():
        if reading in want:
            duplicated.fail(f"late reading {reading} {got[reading]} times", n)
        else:
            wrong.fail(f"reading {reading} sent late but it is on time", n)
    return [lost, duplicated, wrong]


# -- queryable state, readers ---------------------------------------------------------

# Per key: what each worker answered: (worker id, HTTP status, value or None, the
# ``served_by`` of the answer: the owner that served it, forwarded or not).
Answers = Mapping[str, Sequence[tuple[str, int, Any, str | None]]]


def check_rest(
    agent: str,
    what: str,
    want: Mapping[str, Any],
    answers: Answers,
    same: Callable[[Any, Any], bool] = operator.eq,
) -> list[Check]:
    """Every worker answers 200 for each key, served by one owner (a worker that does
    not own the key forwards the query to the one that does), with ``want[key]``."""
    wrong = Check(f"REST {what} equal recomputation", agent, "wrong", checked=len(want))
    owners = Check(f"REST {what}: every worker, one owner", agent, "other", checked=len(want))
    for key, expected in want.items():
        given = answers.get(key, ())
        ok = [(worker, value) for worker, status, value, _ in given if status == 200]
        served_by = {by for _, status, _, by in given if status == 200}
        statuses = [(worker, status, by) for worker, status, _, by in given]
        if not given or len(ok) != len(given) or len(served_by) != 1:
            owners.fail(f"{key}: answers (worker, status, served by) {statuses}")
        if not ok:
            wrong.fail(f"{key}: no worker answered ({statuses})")
        else:
            bad = [(worker, value) for worker, value in ok if not same(value, expected)]
            if bad:
                wrong.fail(f"{key}: {bad[0][0]} answered {bad[0][1]}, want {expected}")
    return [wrong, owners]


def rest_windows(expected: Expected) -> dict[str, list[dict[str, Any]]]:
    """What ``GET /sensors/{id}/windows`` must answer, per sensor, oldest first."""
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for sensor, start in sorted(expected.windows):
        out[sensor].append({"window_start_ms": start, **expected.summary((sensor, start))})
    return dict(out)


def same_windows(got: Sequence[Mapping[str, Any]], want: Sequence[Mapping[str, Any]]) -> bool:
    if len(got) != len(want):
        return False
    for g, w in zip(got, want, strict=True):
        exact = ("window_start_ms", "count", "min", "max")
        if any(g[k] != w[k] for k in exact):
            return False
        if not math.isclose(g["avg"], w["avg"], rel_tol=AVG_REL_TOLERANCE):
            return False
    return True


def check_readers(fresh: Sequence[Rec], live: Iterable[tuple[int, int]]) -> Check:
    """A reader that ran through the faults saw exactly what a fresh one sees."""
    want = Counter((r.partition, r.offset) for r in fresh)
    got = Counter(live)
    check = Check("echo: live reader == fresh reader", CHECKER, "other", checked=len(fresh))
    for at, n in (want - got).items():
        check.fail(f"live reader missed echo record {at}", n)
    for at, n in (got - want).items():
        check.fail(f"live reader saw echo record {at} a fresh reader does not", n)
    return check
