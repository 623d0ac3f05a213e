"""A window's definition: what to compute, frozen, kept apart from the operator
that runs it, so workers, the harness and the replay CLI share one definition and
a definition can be checked (merging trigger, lateness, windows per element)
before any data arrives."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eddy.eventtime.functions import AggregateFunction, Evictor, ProcessWindowFunction
from eddy.eventtime.triggers import (
    EventTimeTrigger,
    NeverTrigger,
    ProcessingTimeTrigger,
    Trigger,
)
from eddy.eventtime.windows import Sliding, WindowAssigner

#: The most windows one element may belong to. A sliding window puts each record in
#: ``size / slide`` windows, each a state update and a timer: 10 to 25 us each (the
#: replay's memory state, the test driver's RocksDB), so 1,000 already make one
#: record cost 10 to 25 ms, a thousand times an ordinary one. Beyond that a
#: definition is a mistake (``slide_ms=1``) or better written another way
#: (aggregate into tumbling windows of ``slide_ms``, then combine them).
MAX_WINDOWS_PER_ELEMENT = 1_000


def check_windows_per_element(assigner: WindowAssigner) -> None:
    """Refuse an assigner that puts one element in more than
    :data:`MAX_WINDOWS_PER_ELEMENT` windows, saying what to change.

    Raises:
        ValueError: a sliding window with ``size_ms / slide_ms`` above the bound.
    """
    if not isinstance(assigner, Sliding):
        return
    count = assigner.windows_per_element
    if count > MAX_WINDOWS_PER_ELEMENT:
        least_slide_ms = -(-assigner.size_ms // MAX_WINDOWS_PER_ELEMENT)
        raise ValueError(
            f"a sliding window of size_ms={assigner.size_ms} every slide_ms="
            f"{assigner.slide_ms} puts each record in {count} windows, more than "
            f"{MAX_WINDOWS_PER_ELEMENT}: raise slide_ms to at least {least_slide_ms}, "
            f"or lower size_ms to at most {assigner.slide_ms * MAX_WINDOWS_PER_ELEMENT}"
        )


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
        check_windows_per_element(self.assigner)
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
