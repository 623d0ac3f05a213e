"""One ``/metrics`` for a host's ingest processes and its query plane.

Each ingest process keeps its own registry (``service/metrics.py``) and writes its
exposition once a second (``service/plane/status.py``); the query plane parses
them and adds them up, series by series, with its own (REST latency). Summing is
right for counters and histograms, and for the gauges counted per stage (owned,
restoring, standby partitions); a gauge of one partition has one owner, so the
largest value is taken (two processes report one only while it moves).
``*_created`` series keep the earliest.

prometheus_client's multiprocess mode would do this through shared files too, but
it keeps one process-global set of values, and Eddy keeps one registry per worker
so that two workers in one test never share counters.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample


class _Merged:
    """A collector yielding already merged families."""

    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self._families)


def merge_expositions(texts: Iterable[str]) -> bytes:
    """Prometheus text expositions of several processes as one (see the module doc)."""
    families: dict[str, Metric] = {}
    values: dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]] = {}
    for text in texts:
        for family in text_string_to_metric_families(text):
            merged = families.get(family.name)
            if merged is None:
                merged = families[family.name] = Metric(
                    family.name, family.documentation, family.type, family.unit
                )
                values[family.name] = {}
            samples = values[family.name]
            for sample in family.samples:
                key = (sample.name, tuple(sorted(sample.labels.items())))
                old = samples.get(key)
                samples[key] = sample.value if old is None else _combine(family, sample, old)
    for name, family in families.items():
        family.samples = [
            Sample(sample_name, dict(labels), value)
            for (sample_name, labels), value in values[name].items()
        ]
    registry = CollectorRegistry()
    registry.register(_Merged(list(families.values())))
    return generate_latest(registry)


def _combine(family: Metric, sample: Sample, old: float) -> float:
    if sample.name.endswith("_created"):
        return min(old, sample.value)
    if family.type == "gauge" and "partition" in sample.labels:
        return max(old, sample.value)
    return old + sample.value
