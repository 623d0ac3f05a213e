"""Sustained throughput: how fast a contender drains the pre-loaded topic.

The clock is the contender's committed offsets, the only progress every
contender reports the same way. The rate is measured from its first commit to
the commit that reaches the end of the input, so process start-up, group joins
and state-store opening are left out, while every commit, flush and checkpoint
along the way is in. CPU and records are counted over the same span.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from bench.contenders import Input, Launched
from bench.errors import BenchError
from bench.kafkaio import Kafka

POLL_S = 0.1


@dataclass
class Drain:
    records: int  # records committed within the measured span
    elapsed_ms: int
    cpu_ms: int
    peak_rss_bytes: int
    startup_ms: int  # launch to the first commit
    drained: bool  # False: stopped at the time cap before the end

    @property
    def events_per_s(self) -> float:
        return self.records * 1_000 / self.elapsed_ms if self.elapsed_ms else 0.0

    @property
    def cpu_s_per_million(self) -> float:
        return self.cpu_ms / self.records * 1_000 if self.records else 0.0

    def to_json(self) -> dict[str, object]:
        return {
            "events_per_s": round(self.events_per_s),
            "cpu_s_per_million": round(self.cpu_s_per_million, 2),
            "peak_rss_mb": round(self.peak_rss_bytes / 2**20, 1),
            "records": self.records,
            "elapsed_ms": self.elapsed_ms,
            "cpu_ms": self.cpu_ms,
            "startup_ms": self.startup_ms,
            "drained": self.drained,
        }


def drain(
    kafka: Kafka,
    launched: Launched,
    inp: Input,
    *,
    cap_s: float,
    on_progress: Callable[[int], None] = lambda _n: None,
) -> Drain:
    """Wait until ``launched`` has committed the whole of ``inp`` (or ``cap_s`` passed)."""
    proc = launched.proc
    started = time.monotonic()
    first: tuple[float, int, int] | None = None  # (time, committed, cpu ms)
    cpu = peak = 0
    while True:
        committed = kafka.committed(launched.group, inp.topic, inp.partitions)
        now = time.monotonic()
        if proc.alive():
            # A ceiling exits right after its last commit: keep its last reading.
            cpu = max(cpu, proc.cpu_ms())
            peak = max(peak, proc.peak_rss_bytes())
        on_progress(committed)
        if first is None and committed > 0:
            first = (now, committed, cpu)
        done = committed >= inp.records
        capped = now - started > cap_s
        if done or capped:
            break
        if not proc.alive() and committed < inp.records:
            proc.check_alive()  # raises with the log's tail
        time.sleep(POLL_S)
    if first is None:
        raise BenchError(
            f"{proc.name} committed nothing in {cap_s:.0f} s; last log lines:\n{proc.tail()}"
        )
    t0, c0, cpu0 = first
    return Drain(
        records=committed - c0,
        elapsed_ms=int((now - t0) * 1_000),
        cpu_ms=cpu - cpu0,
        peak_rss_bytes=peak,
        startup_ms=int((t0 - started) * 1_000),
        drained=done,
    )
