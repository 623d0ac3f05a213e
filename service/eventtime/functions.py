"""Window functions and evictors (docs/semantics.md, "Window functions" and
"Evictors").

* :class:`AggregateFunction`: create / add / merge / result, incremental: the
  window keeps one accumulator, whatever its size.
* :class:`Reduce`: combine two values into one (an aggregate of one type).
* :class:`ProcessWindowFunction`: all of a window's elements at once, with the
  key, the window, the watermark and per-window state; fed either the stored
  elements or, after an incremental aggregate, the single aggregated result.
* Evictors remove elements before or after the function; they need the stored
  elements, so they cannot follow an incremental aggregate.

Accumulators, elements and state are JSON-compatible values, so the state layer
stores them without knowing the function.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any, ClassVar, Generic, Protocol, TypedDict, TypeVar

from eddy.eventtime.windows import TimeWindow

IN = TypeVar("IN", contravariant=True)
ACC = TypeVar("ACC")
OUT = TypeVar("OUT", covariant=True)

Element = list[Any]  # [timestamp_ms, value]: stored elements keep their time for evictors
Of = Callable[[Any], Any] | str  # a function of the value, or the name of one of its fields


class StatsResult(TypedDict):
    count: int
    avg: float
    min: float
    max: float


class MinMaxResult(TypedDict):
    min: float
    max: float


def _accessor(self: Any, name: str = "of") -> None:
    """Resolve what an aggregate reads (a field name or a function), once."""
    object.__setattr__(self, "_get", field(getattr(self, name)))


class AggregateFunction(Protocol, Generic[IN, ACC, OUT]):
    def create(self) -> ACC: ...

    def add(self, value: IN, accumulator: ACC) -> ACC: ...

    def merge(self, left: ACC, right: ACC) -> ACC: ...

    def result(self, accumulator: ACC) -> OUT: ...


class WindowContext(Protocol):
    """What a process-window function sees besides the elements."""

    @property
    def key(self) -> str: ...

    @property
    def window(self) -> TimeWindow: ...

    @property
    def watermark_ms(self) -> int: ...

    @property
    def processing_time_ms(self) -> int: ...

    @property
    def window_state(self) -> dict[str, Any]:
        """State of this key and window; cleared with the window."""
        ...

    @property
    def global_state(self) -> dict[str, Any]:
        """State of this key across its windows."""
        ...


class ProcessWindowFunction(Protocol):
    def process(self, elements: Sequence[Any], ctx: WindowContext) -> list[Any]:
        """Return the window's outputs (zero or more)."""
        ...


class Evictor(Protocol):
    def evict_before(
        self, elements: list[Element], window: TimeWindow, ctx: WindowContext
    ) -> list[Element]: ...

    def evict_after(
        self, elements: list[Element], window: TimeWindow, ctx: WindowContext
    ) -> list[Element]: ...


def field(name: str | Callable[[Any], Any]) -> Callable[[Any], Any]:
    """An accessor: a callable as is, or a name read from a dict or an attribute."""
    if callable(name):
        return name

    def get(value: Any) -> Any:
        return value[name] if isinstance(value, dict) else getattr(value, name)

    return get


@dataclass(frozen=True, slots=True)
class Reduce:
    """A reduce function as an aggregate: the accumulator is the reduced value."""

    fn: Callable[[Any, Any], Any]
    of: Callable[[Any], Any] = lambda value: value

    def create(self) -> Any:
        return None

    def add(self, value: Any, accumulator: Any) -> Any:
        x = self.of(value)
        return x if accumulator is None else self.fn(accumulator, x)

    def merge(self, left: Any, right: Any) -> Any:
        if left is None or right is None:
            return right if left is None else left
        return self.fn(left, right)

    def result(self, accumulator: Any) -> Any:
        return accumulator


@dataclass(frozen=True, slots=True)
class Count:
    result_type: ClassVar[type] = int

    def create(self) -> int:
        return 0

    def add(self, value: Any, accumulator: int) -> int:
        return accumulator + 1

    def merge(self, left: int, right: int) -> int:
        return left + right

    def result(self, accumulator: int) -> int:
        return accumulator


@dataclass(frozen=True, slots=True)
class Sum:
    of: Of
    _get: Callable[[Any], Any] = dataclass_field(init=False, repr=False, compare=False)
    result_type: ClassVar[type] = float

    def __post_init__(self) -> None:
        _accessor(self)

    def create(self) -> float:
        return 0

    def add(self, value: Any, accumulator: float) -> float:
        total: float = accumulator + self._get(value)
        return total

    def merge(self, left: float, right: float) -> float:
        return left + right

    def result(self, accumulator: float) -> float:
        return accumulator


def Min(of: Of) -> Reduce:
    return Reduce(min, field(of))


def Max(of: Of) -> Reduce:
    return Reduce(max, field(of))


@dataclass(frozen=True, slots=True)
class Avg:
    of: Of
    _get: Callable[[Any], Any] = dataclass_field(init=False, repr=False, compare=False)
    result_type: ClassVar[type] = float

    def __post_init__(self) -> None:
        _accessor(self)

    def create(self) -> list[float]:
        return [0, 0.0]

    def add(self, value: Any, accumulator: list[float]) -> list[float]:
        accumulator[0] += 1
        accumulator[1] += self._get(value)
        return accumulator

    def merge(self, left: list[float], right: list[float]) -> list[float]:
        return [left[0] + right[0], left[1] + right[1]]

    def result(self, accumulator: list[float]) -> float:
        return accumulator[1] / accumulator[0]


@dataclass(frozen=True, slots=True)
class MinMax:
    """The lowest and highest value of one attribute, as ``{"min", "max"}``."""

    of: Of
    _get: Callable[[Any], Any] = dataclass_field(init=False, repr=False, compare=False)
    result_type: ClassVar[type] = MinMaxResult

    def __post_init__(self) -> None:
        _accessor(self)

    def create(self) -> list[float] | None:
        return None

    def add(self, value: Any, accumulator: list[float] | None) -> list[float]:
        x = self._get(value)
        if accumulator is None:
            return [x, x]
        if x < accumulator[0]:
            accumulator[0] = x
        if x > accumulator[1]:
            accumulator[1] = x
        return accumulator

    def merge(self, left: list[float] | None, right: list[float] | None) -> list[float] | None:
        if left is None or right is None:
            return right if left is None else left
        return [min(left[0], right[0]), max(left[1], right[1])]

    def result(self, accumulator: list[float] | None) -> dict[str, float]:
        if accumulator is None:
            raise ValueError("no result for an empty window")
        return {"min": accumulator[0], "max": accumulator[1]}


@dataclass(frozen=True, slots=True)
class Stats:
    """count, avg, min and max of one numeric attribute, computed incrementally.

    The accumulator is ``[count, sum, min, max]`` and is updated in place: the
    operator owns it, and avoiding a new list per element is most of this
    function's cost.
    """

    value_of: Of
    _get: Callable[[Any], Any] = dataclass_field(init=False, repr=False, compare=False)
    result_type: ClassVar[type] = StatsResult

    def __post_init__(self) -> None:
        _accessor(self, "value_of")

    def create(self) -> list[float]:
        return [0, 0.0, float("inf"), float("-inf")]

    def add(self, value: Any, accumulator: list[float]) -> list[float]:
        x = self._get(value)
        accumulator[0] += 1
        accumulator[1] += x
        if x < accumulator[2]:
            accumulator[2] = x
        if x > accumulator[3]:
            accumulator[3] = x
        return accumulator

    def merge(self, left: list[float], right: list[float]) -> list[float]:
        return [
            left[0] + right[0],
            left[1] + right[1],
            min(left[2], right[2]),
            max(left[3], right[3]),
        ]

    def result(self, accumulator: list[float]) -> dict[str, float | int]:
        count, total, low, high = accumulator
        if count == 0:
            raise ValueError("no result for an empty window")
        return {"count": int(count), "avg": total / count, "min": low, "max": high}


@dataclass(frozen=True, slots=True)
class CountEvictor:
    """Keep the last ``max_count`` elements (before the function by default)."""

    max_count: int
    after: bool = False

    def evict_before(
        self, elements: list[Element], window: TimeWindow, ctx: WindowContext
    ) -> list[Element]:
        return elements if self.after else elements[-self.max_count :]

    def evict_after(
        self, elements: list[Element], window: TimeWindow, ctx: WindowContext
    ) -> list[Element]:
        return elements[-self.max_count :] if self.after else elements


@dataclass(frozen=True, slots=True)
class TimeEvictor:
    """Keep elements within ``window_ms`` of the newest one."""

    window_ms: int
    after: bool = False

    def _keep(self, elements: list[Element]) -> list[Element]:
        if not elements:
            return elements
        newest = max(ts for ts, _ in elements)
        return [e for e in elements if e[0] > newest - self.window_ms]

    def evict_before(
        self, elements: list[Element], window: TimeWindow, ctx: WindowContext
    ) -> list[Element]:
        return elements if self.after else self._keep(elements)

    def evict_after(
        self, elements: list[Element], window: TimeWindow, ctx: WindowContext
    ) -> list[Element]:
        return self._keep(elements) if self.after else elements
