"""Latency markers: how long a fetched record takes to become visible downstream.

Flink's ``LatencyMarker`` is a special element that each source subtask emits
every ``latencyTrackingInterval``; it flows through the operators (overtaking
records in windows and other user functions, never waiting in them) and each
sink reports the time since it was emitted, per source subtask. It measures
the transport between operators (network buffers, back-pressure), not the time
a record spends in a window, nor the checkpoint.

In Eddy a source partition's records are processed by one task, in one process,
with no network between operators, and nothing a task emits is visible before
the checkpoint that commits it (under exactly-once, ``read_committed``
consumers see outputs only when the Kafka transaction commits). So a marker
here is a time stamp, not an element: every ``EDDY_LATENCY_MARKER_INTERVAL_MS``
the runtime notes, for each source partition, the wall-clock time at which the
consumer handed it a batch, and when the checkpoint that covers that batch
commits (the sink: its outputs, changelog and offsets are then readable), it
observes the time since, in ``eddy_latency_marker_seconds{stage,source,
partition}`` (``source`` is the input topic; a join has one series per input).

It therefore measures fetch-to-visible-output latency, the commit interval
included, which is what a downstream ``read_committed`` reader waits. Like
Flink's it does not include the time a record spends in a window before the
watermark fires it (event time, not transport), nor the time it waited in Kafka
before the fetch (that is consumer lag). Under at-least-once, outputs are
readable once sent, so the marker is an upper bound there. A batch discarded by
a failed checkpoint takes its marker with it; the replayed batch gets a new one.
"""

from __future__ import annotations

# (topic, partition): aiokafka's TopicPartition is such a named tuple.
Source = tuple[str, int]


class LatencyMarkers:
    """Markers of one pipeline's source partitions on this worker.

    Pure bookkeeping: the caller passes wall-clock times, so tests use a fake clock.
    """

    def __init__(self, interval_ms: int) -> None:
        self.interval_ms = interval_ms
        self._pending: dict[Source, list[int]] = {}
        self._last_noted: dict[Source, int] = {}
        self._latest_s: dict[Source, float] = {}

    def note(self, source: Source, fetched_ms: int) -> bool:
        """A batch of ``source`` fetched at ``fetched_ms`` was processed; mark it if
        the interval has passed since the last marker. Returns whether it did."""
        if self.interval_ms <= 0:
            return False
        last = self._last_noted.get(source)
        if last is not None and fetched_ms - last < self.interval_ms:
            return False
        self._last_noted[source] = fetched_ms
        self._pending.setdefault(source, []).append(fetched_ms)
        return True

    def observe(self, partition: int, committed_ms: int) -> list[tuple[Source, float]]:
        """The checkpoint of ``partition`` committed at ``committed_ms``: every marker
        of its sources is now visible. Returns ``(source, seconds)`` per marker."""
        observed = []
        for source in [s for s in self._pending if s[1] == partition]:
            for fetched_ms in self._pending.pop(source):
                # max(0): the wall clock may step back between fetch and commit.
                seconds = max(0, committed_ms - fetched_ms) / 1000
                observed.append((source, seconds))
                self._latest_s[source] = seconds
        return observed

    def drop(self, partition: int) -> None:
        """The partition's task was closed or discarded: its uncommitted batches
        will be processed again (and marked again), by this worker or another."""
        for source in [s for s in self._pending if s[1] == partition]:
            del self._pending[source]
        for source in [s for s in self._last_noted if s[1] == partition]:
            del self._last_noted[source]

    def latest_ms(self, partition: int) -> float | None:
        """The last observed latency of ``partition`` (the largest over its sources,
        each source's latest), or None before the first."""
        values = [s for source, s in self._latest_s.items() if source[1] == partition]
        return round(max(values) * 1000, 3) if values else None
