"""State time-to-live, shared by untyped and typed (descriptor) keyed state."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Ttl:
    """An entry reads as absent ``ttl_ms`` of processing time after it was written
    (or last read, with ``refresh_on_read``)."""

    ttl_ms: int
    refresh_on_read: bool = False

    def __post_init__(self) -> None:
        if self.ttl_ms <= 0:
            raise ValueError("ttl_ms must be positive")
