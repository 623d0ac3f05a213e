"""Window specs as data: what the replay CLI reads (docs/replay.md).

A spec file describes one keyed windowed aggregation over JSON records: the key
and timestamp fields, the watermark strategy, the assigner, the trigger, the
evictor, the allowed lateness, the late output and the function. Parsing is
strict; every mistake is reported with its path in the file.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveInt,
    ValidationInfo,
    field_validator,
    model_validator,
)

from eddy.eventtime.definition import check_windows_per_element
from eddy.eventtime.functions import (
    AggregateFunction,
    Avg,
    Count,
    CountEvictor,
    Evictor,
    Max,
    Min,
    MinMax,
    ProcessWindowFunction,
    Stats,
    Sum,
    TimeEvictor,
    WindowContext,
)
from eddy.eventtime.joins import window_cogroup, window_join
from eddy.eventtime.operator import WindowSpec
from eddy.eventtime.triggers import (
    ContinuousEventTimeTrigger,
    CountTrigger,
    EventTimeTrigger,
    ProcessingTimeTrigger,
    PurgingTrigger,
    Trigger,
)
from eddy.eventtime.watermarks import BoundedOutOfOrderness, WatermarkStrategy
from eddy.eventtime.windows import Global, Session, Sliding, Tumbling, WindowAssigner


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BoundedWatermark(_Strict):
    type: Literal["bounded_out_of_orderness"]
    bound_ms: Annotated[int, Field(ge=0)]
    emit_every_ms: PositiveInt | None = None
    idle_timeout_ms: PositiveInt | None = None
    quiet_advance_ms: PositiveInt | None = None


class AscendingWatermark(_Strict):
    """Bounded out-of-orderness with a bound of 0: the watermark is the largest
    timestamp seen minus 1."""

    type: Literal["ascending"]
    emit_every_ms: PositiveInt | None = None
    idle_timeout_ms: PositiveInt | None = None
    quiet_advance_ms: PositiveInt | None = None


class ExplicitWatermark(_Strict):
    """Only the input's ``{"watermark": ms}`` lines move the clock."""

    type: Literal["none"]


def _offset_within(offset_ms: int, period_ms: int | None, period: str) -> int:
    # Checked here rather than by the assigner so the error names the field.
    if period_ms is not None and abs(offset_ms) >= period_ms:
        raise ValueError(f"abs(offset_ms) must be smaller than {period} ({period_ms})")
    return offset_ms


class TumblingSpec(_Strict):
    type: Literal["tumbling"]
    size_ms: PositiveInt
    offset_ms: int = 0
    processing_time: bool = False

    @field_validator("offset_ms")
    @classmethod
    def _offset(cls, offset_ms: int, info: ValidationInfo) -> int:
        return _offset_within(offset_ms, info.data.get("size_ms"), "size_ms")


class SlidingSpec(_Strict):
    type: Literal["sliding"]
    size_ms: PositiveInt
    slide_ms: PositiveInt
    offset_ms: int = 0
    processing_time: bool = False

    @field_validator("offset_ms")
    @classmethod
    def _offset(cls, offset_ms: int, info: ValidationInfo) -> int:
        return _offset_within(offset_ms, info.data.get("slide_ms"), "slide_ms")

    @model_validator(mode="after")
    def _windows_per_record(self) -> SlidingSpec:
        # The definition checks it too; here the error names the spec's field.
        check_windows_per_element(Sliding(self.size_ms, self.slide_ms, self.offset_ms))
        return self


class SessionSpec(_Strict):
    type: Literal["session"]
    gap_ms: PositiveInt
    processing_time: bool = False


class CountSpec(_Strict):
    """Count windows: the global window with a count trigger (and, when sliding, a
    count evictor), as Flink's ``countWindow(size[, slide])``."""

    type: Literal["count"]
    size: PositiveInt
    slide: PositiveInt | None = None
    timeout_ms: PositiveInt | None = None


class GlobalSpec(_Strict):
    type: Literal["global"]


class EventTimeTriggerSpec(_Strict):
    type: Literal["event_time"]


class ProcessingTimeTriggerSpec(_Strict):
    type: Literal["processing_time"]


class CountTriggerSpec(_Strict):
    type: Literal["count"]
    count: PositiveInt
    timeout_ms: PositiveInt | None = None


class ContinuousTriggerSpec(_Strict):
    type: Literal["continuous_event_time"]
    interval_ms: PositiveInt


class PurgingTriggerSpec(_Strict):
    type: Literal["purging"]
    trigger: TriggerSpec


TriggerSpec = Annotated[
    EventTimeTriggerSpec
    | ProcessingTimeTriggerSpec
    | CountTriggerSpec
    | ContinuousTriggerSpec
    | PurgingTriggerSpec,
    Field(discriminator="type"),
]
PurgingTriggerSpec.model_rebuild()


class CountEvictorSpec(_Strict):
    type: Literal["count"]
    max_count: PositiveInt
    after: bool = False


class TimeEvictorSpec(_Strict):
    type: Literal["time"]
    window_ms: PositiveInt
    after: bool = False


EvictorSpec = Annotated[CountEvictorSpec | TimeEvictorSpec, Field(discriminator="type")]


class FunctionSpec(_Strict):
    type: Literal[
        "count", "sum", "min", "max", "avg", "min_max", "stats", "list", "join", "cogroup"
    ]
    field: Annotated[str | None, Field(validate_default=True)] = None

    @field_validator("field")
    @classmethod
    def _needs_field(cls, field: str | None, info: ValidationInfo) -> str | None:
        kind = info.data.get("type")
        if field is None and kind not in (None, "count", "list", "join", "cogroup"):
            raise ValueError(f"function {kind!r} needs the record field to aggregate")
        return field


class ReplaySpec(_Strict):
    key: str
    timestamp: str
    watermark: Annotated[
        BoundedWatermark | AscendingWatermark | ExplicitWatermark, Field(discriminator="type")
    ]
    assigner: Annotated[
        TumblingSpec | SlidingSpec | SessionSpec | CountSpec | GlobalSpec,
        Field(discriminator="type"),
    ]
    trigger: TriggerSpec | None = None
    evictor: EvictorSpec | None = None
    allowed_lateness_ms: Annotated[int, Field(ge=0)] = 0
    late_output: str | None = None
    function: FunctionSpec
    inputs: Annotated[list[str], Field(min_length=2, max_length=2)] | None = None

    def window_spec(self) -> WindowSpec:
        assigner, trigger, evictor = self._assigner()
        if self.trigger is not None:
            trigger = build_trigger(self.trigger)
        if self.evictor is not None:
            evictor = _evictor(self.evictor)
        if self.function.type in ("join", "cogroup"):
            if self.inputs is None:
                raise ValueError(f"function {self.function.type!r} needs two inputs")
            join = window_join if self.function.type == "join" else window_cogroup
            spec = join(assigner, allowed_lateness_ms=self.allowed_lateness_ms)
            return WindowSpec(
                assigner,
                process=spec.process,
                trigger=trigger,
                evictor=evictor,
                allowed_lateness_ms=self.allowed_lateness_ms,
            )
        if self.inputs is not None:
            raise ValueError("two inputs need the function 'join' or 'cogroup'")
        aggregate, process = _function(self.function)
        return WindowSpec(
            assigner,
            aggregate=aggregate,
            process=process,
            trigger=trigger,
            evictor=evictor,
            allowed_lateness_ms=self.allowed_lateness_ms,
        )

    def watermark_strategy(self) -> WatermarkStrategy | None:
        w = self.watermark
        if isinstance(w, BoundedWatermark):
            return BoundedOutOfOrderness(
                w.bound_ms, w.emit_every_ms, w.idle_timeout_ms, w.quiet_advance_ms
            )
        if isinstance(w, AscendingWatermark):
            return BoundedOutOfOrderness(0, w.emit_every_ms, w.idle_timeout_ms, w.quiet_advance_ms)
        return None

    def _assigner(self) -> tuple[WindowAssigner, Trigger | None, Evictor | None]:
        a = self.assigner
        if isinstance(a, TumblingSpec):
            return Tumbling(a.size_ms, a.offset_ms, a.processing_time), None, None
        if isinstance(a, SlidingSpec):
            return Sliding(a.size_ms, a.slide_ms, a.offset_ms, a.processing_time), None, None
        if isinstance(a, SessionSpec):
            return Session(a.gap_ms, a.processing_time), None, None
        if isinstance(a, CountSpec):
            return count_window(a.size, a.slide, a.timeout_ms)
        return Global(), None, None


def count_window(
    size: int, slide: int | None = None, timeout_ms: int | None = None
) -> tuple[WindowAssigner, Trigger, Evictor | None]:
    """Flink's ``countWindow``: tumbling fires and purges every ``size`` elements;
    sliding fires every ``slide`` elements over the last ``size``."""
    if slide is None:
        return Global(), PurgingTrigger(CountTrigger(size, timeout_ms)), None
    return Global(), CountTrigger(slide, timeout_ms), CountEvictor(size)


def build_trigger(spec: Any) -> Trigger:
    if isinstance(spec, EventTimeTriggerSpec):
        return EventTimeTrigger()
    if isinstance(spec, ProcessingTimeTriggerSpec):
        return ProcessingTimeTrigger()
    if isinstance(spec, CountTriggerSpec):
        return CountTrigger(spec.count, spec.timeout_ms)
    if isinstance(spec, ContinuousTriggerSpec):
        return ContinuousEventTimeTrigger(spec.interval_ms)
    return PurgingTrigger(build_trigger(spec.trigger))


def _evictor(spec: CountEvictorSpec | TimeEvictorSpec) -> Evictor:
    if isinstance(spec, CountEvictorSpec):
        return CountEvictor(spec.max_count, spec.after)
    return TimeEvictor(spec.window_ms, spec.after)


def field_getter(path: str) -> Callable[[Any], Any]:
    """Read a (dotted) field of a JSON record."""
    parts = path.split(".")

    def get(record: Any) -> Any:
        for part in parts:
            record = record[part]
        return record

    return get


class _Elements:
    """A process-window function that emits the window's elements as a list."""

    def process(self, elements: Sequence[Any], ctx: WindowContext) -> list[Any]:
        return [list(elements)]


def _function(
    spec: FunctionSpec,
) -> tuple[AggregateFunction[Any, Any, Any] | None, ProcessWindowFunction | None]:
    if spec.type == "list":
        return None, _Elements()
    if spec.type == "count":
        return Count(), None
    if spec.field is None:  # the model's validator already said so
        raise ValueError(f"function {spec.type!r} needs a field")
    of = field_getter(spec.field)
    builders: dict[str, Callable[[Callable[[Any], Any]], AggregateFunction[Any, Any, Any]]] = {
        "sum": Sum,
        "min": Min,
        "max": Max,
        "avg": Avg,
        "min_max": MinMax,
        "stats": Stats,
    }
    return builders[spec.type](of), None
