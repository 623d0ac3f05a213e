"""In-memory stand-ins for the runtime's input record and Output, for unit tests of
a pipeline's logic (never for integration tests: those run the real runtime)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson


@dataclass
class FakeRecord:
    offset: int
    value: bytes | None
    topic: str = "input"
    partition: int = 0
    timestamp: int = 0
    key: bytes | None = None
    headers: tuple[tuple[str, bytes], ...] = ()


@dataclass
class CollectingOutput:
    """Keeps what a logic emits: sent values (as JSON), dead-letter reasons, and
    metric events (``observe`` counted as ``observed.<event>``)."""

    sent: list[dict[str, Any]] = field(default_factory=list)
    dead: list[str] = field(default_factory=list)
    events: dict[str, int] = field(default_factory=dict)

    def send(self, topic: str, key: bytes | None, value: bytes | None, *_: Any) -> None:
        assert value is not None
        self.sent.append(orjson.loads(value))

    def partitions_of(self, topic: str) -> int:
        return 1

    def dead_letter(self, record: Any, reason: str) -> None:
        self.dead.append(reason)

    def dead_letter_output(
        self,
        topic: str | None,
        key: str | None,
        value: Any,
        reason: str,
        window: tuple[int, int] | None = None,
    ) -> None:
        self.dead.append(reason)

    def count(self, event: str, n: int = 1) -> None:
        self.events[event] = self.events.get(event, 0) + n

    def observe(self, event: str, seconds: float) -> None:
        self.count(f"observed.{event}")
