"""Aggregate functions: create / add / merge / result, as in Flink.

Accumulators are plain JSON-compatible values (numbers, lists, dicts) so the
state layer can store them without knowing the function.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

IN = TypeVar("IN", contravariant=True)
ACC = TypeVar("ACC")
OUT = TypeVar("OUT", covariant=True)


class AggregateFunction(Protocol, Generic[IN, ACC, OUT]):
    def create(self) -> ACC: ...

    def add(self, value: IN, accumulator: ACC) -> ACC: ...

    def merge(self, left: ACC, right: ACC) -> ACC: ...

    def result(self, accumulator: ACC) -> OUT: ...


StatsAcc = list[float]


@dataclass(frozen=True, slots=True)
class Stats:
    """count, avg, min and max of one numeric attribute, computed incrementally.

    The accumulator is ``[count, sum, min, max]``: constant size per window, however
    many elements it holds.
    """

    value_of: Callable[[Any], float]

    def create(self) -> StatsAcc:
        return [0, 0.0, float("inf"), float("-inf")]

    def add(self, value: Any, accumulator: StatsAcc) -> StatsAcc:
        x = self.value_of(value)
        count, total, low, high = accumulator
        return [count + 1, total + x, x if x < low else low, x if x > high else high]

    def merge(self, left: StatsAcc, right: StatsAcc) -> StatsAcc:
        return [
            left[0] + right[0],
            left[1] + right[1],
            min(left[2], right[2]),
            max(left[3], right[3]),
        ]

    def result(self, accumulator: StatsAcc) -> dict[str, float | int]:
        count, total, low, high = accumulator
        if count == 0:
            raise ValueError("no result for an empty window")
        return {"count": int(count), "avg": total / count, "min": low, "max": high}
