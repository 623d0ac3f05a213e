"""Did a contender compute the right windows? Its output against the recomputation.

Window results (Eddy, Quix, Kafka Streams) are JSON records with ``sensor_id``,
``window_start_ms``, ``count``, ``avg``, ``min`` and ``max``; Faust has no output
stream, so its table's changelog is read instead and the last value of each
window taken. Counts, minimums and maximums must be equal, averages equal up to
float rounding (contenders sum in different orders).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import orjson

from bench.contenders import Launched
from bench.kafkaio import Kafka
from bench.workload import WINDOW_MS, Expected, WindowKey

AVG_REL_TOLERANCE = 1e-9
EXAMPLES = 3


@dataclass
class Verdict:
    windows: int = 0  # distinct windows the contender emitted
    missing: int = 0
    wrong: int = 0
    duplicates: int = 0
    unexpected: int = 0
    examples: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.missing or self.wrong or self.duplicates or self.unexpected)

    def note(self, text: str) -> None:
        if len(self.examples) < EXAMPLES:
            self.examples.append(text)

    def summary(self) -> str:
        if self.ok:
            return f"{self.windows} windows correct"
        return (
            f"{self.windows} windows: {self.missing} missing, {self.wrong} wrong, "
            f"{self.duplicates} duplicated, {self.unexpected} unexpected; "
            + "; ".join(self.examples)
        )

    def to_json(self) -> dict[str, object]:
        return {
            "ok": self.ok,
            "windows": self.windows,
            "missing": self.missing,
            "wrong": self.wrong,
            "duplicates": self.duplicates,
            "unexpected": self.unexpected,
            "examples": self.examples,
        }


Summary = tuple[int, float, float, float]  # count, avg, min, max


def _same(got: Summary, want: Summary) -> bool:
    return (
        got[0] == want[0]
        and got[2] == want[2]
        and got[3] == want[3]
        and math.isclose(got[1], want[1], rel_tol=AVG_REL_TOLERANCE)
    )


def results(kafka: Kafka, topic: str) -> tuple[dict[WindowKey, Summary], int]:
    """Window results of a JSON output topic (read_committed), and how many repeated."""
    out: dict[WindowKey, Summary] = {}
    duplicates = 0
    for _p, _key, value in kafka.read(topic, committed=True):
        if value is None:
            continue
        r = orjson.loads(value)
        key = (r["sensor_id"], int(r["window_start_ms"]))
        summary = (int(r["count"]), float(r["avg"]), float(r["min"]), float(r["max"]))
        if key in out:
            duplicates += 1
        out[key] = summary
    return out, duplicates


def faust_windows(kafka: Kafka, changelog: str) -> dict[WindowKey, Summary]:
    """The last value of each window in a Faust windowed table's changelog.

    Faust's key is ``[key, [start, end]]`` (JSON, window bounds in the field's unit,
    here milliseconds); the value is what the agent stored (count, sum, min, max).
    """
    last: dict[WindowKey, dict[str, Any]] = {}
    for _p, key, value in kafka.read(changelog, committed=False):
        if key is None:
            continue
        sensor, (start, _end) = orjson.loads(key)
        wkey = (str(sensor), int(start))
        if value is None:
            last.pop(wkey, None)  # expired by Faust
            continue
        last[wkey] = orjson.loads(value)
    return {
        k: (int(v["count"]), v["sum"] / v["count"], float(v["min"]), float(v["max"]))
        for k, v in last.items()
    }


def verify(kafka: Kafka, launched: Launched, expected: Expected) -> Verdict:
    verdict = Verdict()
    if launched.changelog is not None:
        got = faust_windows(kafka, launched.changelog)
        # A Faust table holds every window, the still-open ones of the closing readings too.
        closing_start = max(start for _s, start in expected.windows) + WINDOW_MS
        got = {k: v for k, v in got.items() if k[1] < closing_start}
    elif launched.output is not None:
        got, verdict.duplicates = results(kafka, launched.output)
        if verdict.duplicates and launched.contender.guarantee == "at_least_once":
            # At-least-once may repeat a result; nothing failed, so note it, do not fail.
            verdict.note(f"{verdict.duplicates} results repeated (at-least-once)")
            verdict.duplicates = 0
    else:
        return verdict
    verdict.windows = len(got)
    for key, want in expected.windows.items():
        have = got.get(key)
        if have is None:
            verdict.missing += 1
            verdict.note(f"missing {key}")
        elif not _same(have, want):
            verdict.wrong += 1
            verdict.note(f"{key}: got {have}, want {want}")
    for key in got.keys() - expected.windows.keys():
        verdict.unexpected += 1
        verdict.note(f"unexpected {key}")
    return verdict
