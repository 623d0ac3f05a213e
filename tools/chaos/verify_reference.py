"""The checks of the reference agents (agents/) over records read back (pure).

Each output record is reduced to an *identity* (what it is about: a window, an
alert's reading, a tweet's hashtag) and a *value*; the recomputation gives how
many times each identity must appear (once) and its value. Then, as for the
checker: ``lost`` (an expected identity missing), ``duplicated`` (present more
often than expected), ``wrong`` (a value differing, or an identity not expected
at all). Every check is counted against the agent it is about.
"""

from __future__ import annotations

import math
import operator
from collections import Counter, defaultdict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from tools.chaos.recompute import Expected
from tools.chaos.recompute_reference import AlertsExpected, HashtagsExpected, VehiclesExpected
from tools.chaos.recompute_windows import CountsExpected
from tools.chaos.verify import EXAMPLES, Check, Rec, is_malformed

MINMAX = "sensor_minmax"
COUNTS = "sensor_counts"
ALERTS = "sensor_alerts"
VEHICLES = "vehicle_speed"
# One agent, two stages: ``hashtag_counts.repartition`` (tweets -> mentions keyed by
# hashtag, on the internal repartition topic) and ``hashtag_counts`` (the counts).
HASHTAG_COUNTS = "hashtag_counts"
POWERUPS = "team_powerups"
AGENTS = (MINMAX, COUNTS, ALERTS, VEHICLES, HASHTAG_COUNTS, POWERUPS)
DIFF_TOLERANCE = 1e-6  # sensor_alerts rounds the change it reports to 6 decimals
# A record of a repartition topic that only carries a watermark: an empty value
# and this header (service/pipeline/markers.py).
WATERMARK_HEADER = "eddy.watermark"

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


def by_partition(recs: Iterable[Rec], parse: Callable[[Any], T]) -> dict[int, list[T]]:
    """Well-formed inputs parsed, per partition in offset order."""
    out: dict[int, list[T]] = defaultdict(list)
    for rec in sorted(recs, key=lambda r: (r.partition, r.offset)):
        if not is_malformed(rec):
            out[rec.partition].append(parse(rec.json()))
    return dict(out)


def check_emitted(
    agent: str,
    what: str,
    want: Mapping[K, int],
    values: Mapping[K, Any],
    got: Iterable[tuple[K, Any]],
    same: Callable[[Any, Any], bool] = operator.eq,
) -> list[Check]:
    """Each expected identity emitted as often as expected, with its value."""
    seen: Counter[K] = Counter()
    wrong = Check(f"{what}: equal recomputation", agent, "wrong")
    for at, value in got:
        seen[at] += 1
        wrong.checked += 1
        if at not in values:
            wrong.fail(f"{what} {at} emitted, but not expected: {value}")
        elif not same(value, values[at]):
            wrong.fail(f"{what} {at}: got {value}, want {values[at]}")
    total = sum(want.values())
    lost = Check(f"{what}: every one", agent, "lost", checked=total)
    duplicated = Check(f"{what}: none twice", agent, "duplicated", checked=total)
    for at, n in want.items():
        if seen[at] < n:
            lost.fail(f"{what} {at} missing", n - seen[at])
    for at, n in seen.items():
        if at in want and n > want[at]:
            duplicated.fail(f"{what} {at} emitted {n} times", n - want[at])
    return [lost, duplicated, wrong]


def _once(values: Mapping[K, Any]) -> dict[K, int]:
    return dict.fromkeys(values, 1)


def check_minmax(expected: Expected, out: Sequence[Rec], size_ms: int) -> list[Check]:
    values = {}
    for (sensor, start), temps in expected.windows.items():
        values[(sensor, start)] = {
            "sensor_id": sensor,
            "window_start_ms": start,
            "window_end_ms": start + size_ms,
            "min": min(temps),
            "max": max(temps),
            "end_ts": start + size_ms,
            "timing": "first",
        }
    got = [((b["sensor_id"], b["window_start_ms"]), b) for b in (r.json() for r in out)]
    return check_emitted(MINMAX, "min/max windows", _once(values), values, got)


def check_counts(expected: CountsExpected, out: Sequence[Rec], late: Sequence[Rec]) -> list[Check]:
    got = [
        ((b["sensor_id"], b["window_start_ms"], b["timing"], b["count"]), b)
        for b in (r.json() for r in out)
    ]
    want = _once(expected.results)
    lost, duplicated, wrong = check_emitted(
        COUNTS, "counts first/update", want, expected.results, got
    )
    # A window that did emit, but with another count (input counted twice, as
    # at-least-once may after a restart), is wrong rather than lost.
    emitted = {at[:3] for at, _ in got}
    seen = {at for at, _ in got}
    lost = Check(lost.name, COUNTS, "lost", checked=lost.checked)
    for at in want:
        if at not in seen and at[:3] in emitted:
            wrong.fail(f"window {at[:3]} emitted, but never with count {at[3]}")
        elif at not in seen:
            lost.fail(f"counts first/update {at} missing")
    late_want = Counter(expected.late)
    late_got = [
        ((b["sensor_id"], b["timestamp_ms"], b["temperature"]), b) for b in (r.json() for r in late)
    ]
    late_values = {reading: _reading_body(reading) for reading in late_want}
    late_checks = check_emitted(COUNTS, "late readings", late_want, late_values, late_got)
    return [lost, duplicated, wrong, *late_checks]


def _reading_body(reading: tuple[str, int, float]) -> dict[str, Any]:
    return {"sensor_id": reading[0], "timestamp_ms": reading[1], "temperature": reading[2]}


def same_alert(got: Mapping[str, Any], want: Mapping[str, Any]) -> bool:
    if got.keys() != want.keys():
        return False
    for key, value in want.items():
        if key == "diff":
            if not math.isclose(got[key], value, rel_tol=0.0, abs_tol=DIFF_TOLERANCE):
                return False
        elif got[key] != value:
            return False
    return True


def check_alerts(expected: AlertsExpected, out: Sequence[Rec]) -> list[Check]:
    """Freezing and threshold alerts; ``rising`` ones (processing time) are skipped."""
    got = []
    for body in (r.json() for r in out):
        if body.get("kind") != "rising":
            at = (
                body["sensor_id"],
                body.get("timestamp_ms"),
                body.get("temperature"),
                body["kind"],
            )
            got.append((at, body))
    return check_emitted(
        ALERTS, "freezing/threshold alerts", expected.want, expected.values, got, same_alert
    )


def check_vehicles(expected: VehiclesExpected, out: Sequence[Rec]) -> list[Check]:
    got = [((b["vehicle_id"], b["second_ms"]), b) for b in (r.json() for r in out)]
    checks = check_emitted(VEHICLES, "speed checks", _once(expected.checks), expected.checks, got)
    return [*checks, _unambiguous(VEHICLES, "vehicle speeds", expected.ambiguous)]


def is_marker(rec: Rec) -> bool:
    """A watermark marker of a repartition topic, not a record of the stream."""
    return not rec.value and rec.header(WATERMARK_HEADER) is not None


def check_mentions(expected: HashtagsExpected, repartitioned: Sequence[Rec]) -> list[Check]:
    """The repartition topic of hashtag_counts: each (tweet, hashtag) once, keyed by
    the hashtag, its value the mention (watermark markers skipped). A record that
    is not a mention is an unexpected one (wrong)."""
    got: list[tuple[tuple[str, str], Any]] = []
    for rec in repartitioned:
        if is_marker(rec):
            continue
        try:
            body = rec.json()
            at = (body["tweet_id"], body["hashtag"])
            value: Any = (rec.key, body["timestamp_ms"])
        except (ValueError, TypeError, KeyError):
            at, value = (f"@{rec.partition}:{rec.offset}", "not a mention"), rec.value
        got.append((at, value))
    values = {at: (at[1].encode(), ts) for at, ts in expected.mentions.items()}
    checks = check_emitted(HASHTAG_COUNTS, "repartition mentions", _once(values), values, got)
    return [*checks, _unambiguous(HASHTAG_COUNTS, "tweets", expected.ambiguous)]


def check_hashtag_counts(expected: HashtagsExpected, out: Sequence[Rec]) -> list[Check]:
    got = [((b["hashtag"], b["window_start_ms"]), b) for b in (r.json() for r in out)]
    return check_emitted(
        HASHTAG_COUNTS, "hashtag windows", _once(expected.counts), expected.counts, got
    )


def check_powerups(
    expected: Mapping[tuple[str, int], dict[str, Any]], out: Sequence[Rec]
) -> list[Check]:
    got = [((b["team"], b["window_start_ms"]), b) for b in (r.json() for r in out)]
    return check_emitted(POWERUPS, "power-ups", _once(expected), expected, got)


def _unambiguous(agent: str, what: str, ambiguous: Sequence[Any]) -> Check:
    """The input kept to the bounds that make the results timing-independent (the
    harness's own input; a failed send re-sent late could break it)."""
    check = Check(f"input: {what} within their watermark bounds", agent, "input")
    check.checked = 1
    for item in ambiguous[:EXAMPLES]:
        check.fail(f"{item} arrived later than the bound: its result depends on timing")
    if len(ambiguous) > EXAMPLES:
        check.failures += len(ambiguous) - EXAMPLES
    return check


def rest_windows_of(
    values: Mapping[tuple[str, int], dict[str, Any]],
) -> dict[str, list[dict[str, Any]]]:
    """What ``GET /<things>/{key}/...`` answers per key: its results, oldest first."""
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for key, start in sorted(values):
        out[key].append(values[(key, start)])
    return dict(out)
