"""A window's definition: what to compute, frozen, kept apart from the operator
that runs it, so workers, the harness and the replay CLI share one definition and
a definition can be checked (merging trigger, lateness) before any data arrives."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from service.eventtime.functions import AggregateFunction, Evictor, ProcessWindowFunction
from service.eventtime.triggers import (
    EventTimeTrigger,
    NeverTrigger,
    ProcessingTimeTrigger,
    Trigger,
)
from service.eventtime.windows import WindowAssigner


@dataclass(frozen=True)
class WindowSpec:
    """What to compute: a frozen definition, separate from running it."""

    assigner: WindowAssigner
    aggregate: AggregateFunction[Any, Any, Any] | None = None
    process: ProcessWindowFunction | None = None
    trigger: Trigger | None = None
    evictor: Evictor | None = None
    allowed_lateness_ms: int = 0

    def __post_init__(self) -> None:
        if self.allowed_lateness_ms < 0:
            raise ValueError("allowed_lateness_ms must be >= 0")
        if self.aggregate is None and self.process is None:
            raise ValueError("a window needs an aggregate, a process function, or both")
        if self.assigner.is_merging and not self.effective_trigger.can_merge:
            raise ValueError(f"{type(self.effective_trigger).__name__} cannot merge windows")

    @property
    def effective_trigger(self) -> Trigger:
        if self.trigger is not None:
            return self.trigger
        if type(self.assigner).__name__ == "Global":
            return NeverTrigger()
        return EventTimeTrigger() if self.assigner.is_event_time else ProcessingTimeTrigger()

    @property
    def incremental(self) -> bool:
        """Keep one accumulator per window. An evictor needs the elements, so with one
        the window stores them and the aggregate runs over them at firing time."""
        return self.aggregate is not None and self.evictor is None
