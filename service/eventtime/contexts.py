"""The views the operator hands to user code: a trigger's and a process-window
function's. They are thin, so a trigger or function can be tested against a fake
context, and everything they change goes back through the operator."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from eddy.eventtime.window_state import WindowEntry
from eddy.eventtime.windows import TimeWindow

if TYPE_CHECKING:
    from eddy.eventtime.operator import WindowOperator


class TriggerCtx:
    """A trigger's view of one key's window: clocks, its state, its timers."""

    __slots__ = ("_key", "_op", "_window", "state")

    def __init__(self, op: WindowOperator, key: str, window: TimeWindow, entry: WindowEntry):
        self._op = op
        self._key = key
        self._window = window
        self.state = entry.trigger

    @property
    def watermark_ms(self) -> int:
        return self._op.watermark_ms

    @property
    def processing_time_ms(self) -> int:
        return self._op.processing_time_ms

    def register_event_time_timer(self, time_ms: int) -> None:
        self._op.trigger_timer(self._key, self._window, time_ms, event_time=True, register=True)

    def register_processing_time_timer(self, time_ms: int) -> None:
        self._op.trigger_timer(self._key, self._window, time_ms, event_time=False, register=True)

    def delete_event_time_timer(self, time_ms: int) -> None:
        self._op.trigger_timer(self._key, self._window, time_ms, event_time=True, register=False)

    def delete_processing_time_timer(self, time_ms: int) -> None:
        self._op.trigger_timer(self._key, self._window, time_ms, event_time=False, register=False)


class ProcessCtx:
    """A process-window function's view: key, window, clocks, and its states."""

    __slots__ = ("_global", "_op", "key", "window", "window_state")

    def __init__(self, op: WindowOperator, key: str, window: TimeWindow, entry: WindowEntry):
        self._op = op
        self.key = key
        self.window = window
        self.window_state = entry.state
        self._global: dict[str, Any] | None = None

    @property
    def watermark_ms(self) -> int:
        return self._op.watermark_ms

    @property
    def processing_time_ms(self) -> int:
        return self._op.processing_time_ms

    @property
    def global_state(self) -> dict[str, Any]:
        """Loaded on first use: most functions never touch it."""
        if self._global is None:
            self._global = self._op.key_state(self.key)
        return self._global

    @property
    def global_dirty(self) -> bool:
        return self._global is not None
