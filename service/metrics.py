"""Prometheus metrics, one registry per worker (never the process-global one, so
two workers in one test process do not share counters).

Series are labelled by ``stage``: an agent runs as one or more stages
(``service/app/plan.py``), and a stage is what consumes, commits and keeps state.
``GET /stages`` says which agent each stage belongs to.

Label values come from code and validated settings (stage, topic, route names),
except two: a dead letter's or a restart's ``reason`` carries text from a record or
an error message (a registry URL with its password, say), and a request's
``method`` is whatever a client sent. Reasons are redacted, and methods other
than HTTP's own are counted as ``OTHER``, so no label shows a secret and a client
cannot add series without bound."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Self

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from eddy.redact import redact

HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"})


class ReasonCounter(Counter):
    """A counter whose label values may quote an error message: each is redacted."""

    def labels(self, *labelvalues: object, **labelkwargs: object) -> Self:
        return super().labels(
            *(redact(str(v)) for v in labelvalues),
            **{k: redact(str(v)) for k, v in labelkwargs.items()},
        )


class RequestHistogram(Histogram):
    """Request durations by (route, method, status): a method no HTTP client sends
    is one ``OTHER`` series, whatever it was."""

    def labels(self, *labelvalues: object, **labelkwargs: object) -> Self:
        if "method" in labelkwargs:
            labelkwargs["method"] = _method(labelkwargs["method"])
            return super().labels(**labelkwargs)
        values = list(labelvalues)
        if len(values) > 1:
            values[1] = _method(values[1])
        return super().labels(*values)


def _method(value: object) -> str:
    method = str(value)
    return method if method in HTTP_METHODS else "OTHER"


@dataclass
class Metrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        r = self.registry
        self.records_in = Counter(
            "eddy_records_in", "Records consumed from input topics.", ["stage"], registry=r
        )
        self.records_out = Counter(
            "eddy_records_out",
            "Records produced to output topics.",
            ["stage", "topic"],
            registry=r,
        )
        self.windows_emitted = Counter(
            "eddy_windows_emitted", "Window results emitted.", ["stage", "timing"], registry=r
        )
        self.late_records = Counter(
            "eddy_late_records",
            "Records too late for every window they belong to.",
            ["stage"],
            registry=r,
        )
        self.dead_letters = ReasonCounter(
            "eddy_dead_letters",
            "Records sent to the dead-letter topic.",
            ["stage", "reason"],
            registry=r,
        )
        self.commits = Counter(
            "eddy_commits",
            "Checkpoints committed (one per partition transaction).",
            ["stage"],
            registry=r,
        )
        self.commit_failures = Counter(
            "eddy_commit_failures",
            "Checkpoints that failed and were rolled back.",
            ["stage"],
            registry=r,
        )
        self.commit_seconds = Histogram(
            "eddy_commit_seconds",
            "Time to commit one checkpoint of a stage.",
            ["stage"],
            registry=r,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )
        # service/runtime/latency.py says what a marker measures and how it differs
        # from Flink's; 10 ms (a fast commit) to 60 s (a stalled transaction).
        self.latency_markers = Histogram(
            "eddy_latency_marker_seconds",
            "Time from fetching a batch of a source partition to the commit that makes "
            "its outputs visible (latency markers).",
            ["stage", "source", "partition"],
            registry=r,
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
        )
        self.watermark_ms = Gauge(
            "eddy_watermark_ms",
            "Event-time watermark per input partition (epoch ms).",
            ["stage", "partition"],
            registry=r,
        )
        self.watermark_lag_ms = Gauge(
            "eddy_watermark_lag_ms",
            "Wall clock minus watermark per input partition.",
            ["stage", "partition"],
            registry=r,
        )
        self.assigned_partitions = Gauge(
            "eddy_assigned_partitions",
            "Input partitions this worker owns.",
            ["stage"],
            registry=r,
        )
        self.restoring_partitions = Gauge(
            "eddy_restoring_partitions",
            "Partitions being restored from the changelog.",
            ["stage"],
            registry=r,
        )
        self.standby_partitions = Gauge(
            "eddy_standby_partitions",
            "Partitions this worker keeps a warm standby copy of.",
            ["stage"],
            registry=r,
        )
        self.standby_records = Counter(
            "eddy_standby_records",
            "Changelog records applied to standby copies.",
            ["stage"],
            registry=r,
        )
        self.restored_records = Counter(
            "eddy_restored_records",
            "Changelog records applied during restores.",
            ["stage"],
            registry=r,
        )
        self.batch_seconds = Histogram(
            "eddy_batch_process_seconds",
            "Time to process one fetched batch of one input partition.",
            ["stage"],
            registry=r,
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1),
        )
        self.consumer_lag = Gauge(
            "eddy_consumer_lag_records",
            "Records of an input partition not processed yet (last stable offset - next).",
            ["stage", "topic", "partition"],
            registry=r,
        )
        self.state_keys = Gauge(
            "eddy_state_keys",
            "RocksDB's estimate of keys in a partition's state.",
            ["stage", "partition"],
            registry=r,
        )
        self.state_bytes = Gauge(
            "eddy_state_bytes",
            "RocksDB's estimate of live data bytes in a partition's state.",
            ["stage", "partition"],
            registry=r,
        )
        self.state_reads = Counter(
            "eddy_state_reads", "Point reads of committed RocksDB state.", ["stage"], registry=r
        )
        self.state_writes = Counter(
            "eddy_state_writes",
            "RocksDB write batches (one per checkpoint).",
            ["stage"],
            registry=r,
        )
        self.http_seconds = RequestHistogram(
            "eddy_http_request_seconds",
            "REST request latency by route.",
            ["route", "method", "status"],
            registry=r,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5),
        )
        self.restarts = ReasonCounter(
            "eddy_partition_restarts",
            "Partitions reopened from their last commit after a stage's code raised.",
            ["stage", "reason"],
            registry=r,
        )
        # External I/O (service/pipeline/enrich.py, service/pipeline/pgsink.py):
        # events such as lookup.timeout, lookup.retry, sink.rows; durations such as
        # lookup (one request) and sink.batch (one database transaction).
        self.io_events = Counter(
            "eddy_io_events",
            "External I/O events of a stage (lookup timeouts and retries, rows upserted).",
            ["stage", "event"],
            registry=r,
        )
        self.io_seconds = Histogram(
            "eddy_io_seconds",
            "Duration of a stage's external I/O (one lookup, one sink batch).",
            ["stage", "operation"],
            registry=r,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
        )
