"""What the window operator keeps per (key, window), and the protocol of the store
that keeps it: a dict in tests and the replay CLI, RocksDB in workers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, Protocol

from eddy.eventtime.windows import TimeWindow

Timing = Literal["first", "update"]


@dataclass(slots=True)
class WindowEntry:
    """One key's state for one window: contents (an accumulator, or the elements as
    ``[ts, value]``; None once purged), whether it fired since its contents were
    last purged, the trigger's state, and the process function's per-window state."""

    contents: Any
    fired: bool = False
    trigger: dict[str, Any] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict)


class WindowResult(NamedTuple):
    key: str
    window: TimeWindow
    value: Any
    timing: Timing
    watermark_ms: int


class WindowState(Protocol):
    """Where the operator keeps its per-(key, window) entries and session index.

    The operator puts an entry back after every change, so a store may hand out
    copies (tests do, to catch a forgotten put) or its live objects (RocksDB
    transactions do, to save a copy per element).
    """

    def get_window(self, key: str, window: TimeWindow) -> WindowEntry | None: ...

    def put_window(self, key: str, window: TimeWindow, entry: WindowEntry) -> None: ...

    def delete_window(self, key: str, window: TimeWindow) -> None: ...

    def get_sessions(self, key: str) -> list[TimeWindow]: ...

    def put_sessions(self, key: str, windows: list[TimeWindow]) -> None: ...

    def get_key_state(self, key: str) -> dict[str, Any]: ...

    def put_key_state(self, key: str, state: dict[str, Any]) -> None: ...
