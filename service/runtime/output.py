"""Buffers what a partition's logic emits until the task sends it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from prometheus_client import Counter

from eddy.metrics import Metrics
from eddy.pipeline.base import Headers, InputRecord
from eddy.redact import redact
from eddy.runtime.restarts import ReplayCarefully
from eddy.tables.store import shortened

# The longest repr of an unwritable output a dead letter carries.
OUTPUT_REPR_CHARS = 65_536


@dataclass(slots=True)
class Pending:
    topic: str
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]
    timestamp_ms: int | None
    partition: int | None = None


@dataclass
class TaskOutput:
    """:class:`eddy.pipeline.base.Output` for one task."""

    pipeline: str
    dead_letter_topic: str
    metrics: Metrics
    partition_counts: dict[str, int] = field(default_factory=dict)
    pending: list[Pending] = field(default_factory=list)
    # In a careful replay an output that cannot be encoded is dead-lettered; outside
    # one it starts one (service/runtime/restarts.py, ReplayCarefully).
    careful: bool = False
    # Each event's labelled counter, looked up once: a lookup costs microseconds,
    # and late records are counted one by one.
    _counters: dict[str, Counter] = field(default_factory=dict)

    def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        headers: Headers = (),
        timestamp_ms: int | None = None,
        partition: int | None = None,
    ) -> None:
        self.pending.append(Pending(topic, key, value, list(headers), timestamp_ms, partition))

    def partitions_of(self, topic: str) -> int:
        return self.partition_counts[topic]

    def dead_letter(self, record: InputRecord, reason: str) -> None:
        # The original bytes travel untouched in the value so a fixed record can be
        # replayed as is; everything about where it came from goes in headers.
        reason = redact(reason)  # a reason may quote a URL with its password
        headers = [
            ("eddy.reason", reason.encode()),
            ("eddy.pipeline", self.pipeline.encode()),
            ("eddy.source.topic", record.topic.encode()),
            ("eddy.source.partition", str(record.partition).encode()),
            ("eddy.source.offset", str(record.offset).encode()),
        ]
        self.pending.append(
            Pending(self.dead_letter_topic, record.key, record.value, headers, None)
        )
        self.metrics.dead_letters.labels(self.pipeline, reason.split(":", 1)[0][:40]).inc()

    def dead_letter_output(
        self,
        topic: str | None,
        key: str | None,
        value: Any,
        reason: str,
        window: tuple[int, int] | None = None,
    ) -> None:
        if not self.careful:
            raise ReplayCarefully(f"an output to {topic or 'the results'} of key {key!r}: {reason}")
        reason = redact(reason)
        headers = [("eddy.reason", reason.encode()), ("eddy.pipeline", self.pipeline.encode())]
        if topic is not None:
            headers.append(("eddy.output.topic", topic.encode()))
        raw_key = None if key is None else key.encode(errors="backslashreplace")
        if raw_key is not None:
            headers.append(("eddy.key", raw_key))
        if window is not None:
            headers.append(("eddy.window_start_ms", str(window[0]).encode()))
            headers.append(("eddy.window_end_ms", str(window[1]).encode()))
        # No bytes exist for it: its repr says what it was (shortened: a window's
        # elements can be many).
        text = shortened(repr(value), OUTPUT_REPR_CHARS).encode(errors="backslashreplace")
        self.pending.append(Pending(self.dead_letter_topic, raw_key, text, headers, None))
        self.metrics.dead_letters.labels(self.pipeline, reason.split(":", 1)[0][:40]).inc()

    def count(self, event: str, n: int = 1) -> None:
        counter = self._counters.get(event)
        if counter is None:
            counter = self._counters[event] = self._counter(event)
        counter.inc(n)

    def _counter(self, event: str) -> Counter:
        if event == "late":
            return self.metrics.late_records.labels(self.pipeline)
        if event.startswith("window."):
            return self.metrics.windows_emitted.labels(self.pipeline, event[7:])
        return self.metrics.io_events.labels(self.pipeline, event)

    def observe(self, event: str, seconds: float) -> None:
        self.metrics.io_seconds.labels(self.pipeline, event).observe(seconds)

    def take(self) -> list[Pending]:
        pending, self.pending = self.pending, []
        return pending
