"""RSS of each process of an ``eddy worker`` over time, read from /proc (Linux only).

``bench.procs`` reports the kernel's high-water mark summed over a process tree,
which answers "how much at worst" but not "per process" nor "does it grow". The
memory target is per process and the soak's is about the shape over time, so
this samples the current resident set (``VmRSS``) of every process of the
worker on a fixed period, each under a stable label: ``query`` for the
``eddy worker`` process itself (it serves queries and supervises), ``ingest-N``
for its ingest processes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.background import Background
from bench.procs import _tree

QUERY = "query"  # the `eddy worker` process: the query plane and the supervisor
INGEST_MODULE = "eddy.plane.ingest"


def vm_rss_bytes(status_text: str) -> int | None:
    """``VmRSS`` of a ``/proc/<pid>/status`` text, in bytes (None: a zombie has none)."""
    for line in status_text.splitlines():
        if line.startswith("VmRSS:"):
            value, unit = line.split()[1:3]
            if unit != "kB":
                raise ValueError(f"unexpected VmRSS unit {unit!r}")
            return int(value) * 1_024
    return None


def label_of(argv: list[str], is_root: bool) -> str:
    """``ingest-<index>`` for an ingest process (its ``--index``), ``query`` for the
    root, else the program's name (a child nobody expected shows under its own)."""
    if INGEST_MODULE in argv and "--index" in argv:
        return f"ingest-{argv[argv.index('--index') + 1]}"
    if is_root:
        return QUERY
    return Path(argv[0]).name if argv else "?"


def _argv(pid: int) -> list[str]:
    raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def rss_by_label(root_pid: int) -> dict[str, int]:
    """Current RSS in bytes of ``root_pid`` and each live descendant, by label."""
    out: dict[str, int] = {}
    for pid in _tree(root_pid):
        try:
            rss = vm_rss_bytes(Path(f"/proc/{pid}/status").read_text())
            label = label_of(_argv(pid), pid == root_pid)
        except OSError:
            continue  # exited between the listing and the read
        if rss is not None:
            out[label] = out.get(label, 0) + rss
    return out


@dataclass
class Sample:
    elapsed_ms: int  # since the sampler started
    rss_bytes: dict[str, int]


@dataclass
class RssSampler(Background):
    """Samples :func:`rss_by_label` every ``interval_ms`` on a thread of its own."""

    thread_name = "bench-rss"
    root_pid: int
    interval_ms: int
    samples: list[Sample] = field(default_factory=list)

    def _run(self) -> None:
        started = time.monotonic()
        while True:
            rss = rss_by_label(self.root_pid)
            if rss:
                elapsed_ms = int((time.monotonic() - started) * 1_000)
                self.samples.append(Sample(elapsed_ms, rss))
            # Fixed period, not fixed pause: a slow read does not stretch the series.
            pause_s = self.interval_ms / 1_000 - (time.monotonic() - started) % (
                self.interval_ms / 1_000
            )
            if self._stop.wait(pause_s):
                return


def labels(samples: list[Sample]) -> list[str]:
    return sorted({label for s in samples for label in s.rss_bytes})


def series_mb(samples: list[Sample], label: str) -> tuple[list[float], list[float]]:
    """(minutes, RSS MB) of one process, where it was sampled."""
    points = [(s.elapsed_ms, s.rss_bytes[label]) for s in samples if label in s.rss_bytes]
    return [ms / 60_000 for ms, _ in points], [b / 2**20 for _, b in points]


def flatness(values: list[int]) -> float:
    """(max - min) / mean: the whole spread of a series as a fraction of its level."""
    if not values:
        raise ValueError("no samples")
    mean = sum(values) / len(values)
    return (max(values) - min(values)) / mean if mean else 0.0


def max_deviation(values: list[int]) -> float:
    """The farthest sample from the mean, as a fraction of it: "flat within +-10 %"
    is ``max_deviation <= 0.10`` (a spread of up to 0.20; ``flatness <= 0.10`` is
    the stricter reading, reported alongside)."""
    if not values:
        raise ValueError("no samples")
    mean = sum(values) / len(values)
    return max(abs(v - mean) for v in values) / mean if mean else 0.0


def summary(samples: list[Sample], after_ms: int = 0) -> dict[str, dict[str, float]]:
    """Per process, over the samples at or after ``after_ms``: min, max, mean, last RSS
    (MB) and flatness, plus the peak over every sample."""
    out: dict[str, dict[str, float]] = {}
    for label in labels(samples):
        points = [(s.elapsed_ms, s.rss_bytes[label]) for s in samples if label in s.rss_bytes]
        every = [rss for _, rss in points]
        kept = [rss for ms, rss in points if ms >= after_ms]
        if not kept:
            continue
        out[label] = {
            "min_mb": round(min(kept) / 2**20, 1),
            "max_mb": round(max(kept) / 2**20, 1),
            "mean_mb": round(sum(kept) / len(kept) / 2**20, 1),
            "final_mb": round(kept[-1] / 2**20, 1),
            "peak_mb": round(max(every) / 2**20, 1),
            "flatness": round(flatness(kept), 4),
            "max_deviation": round(max_deviation(kept), 4),
            "samples": len(kept),
        }
    return out


def to_json(samples: list[Sample]) -> list[dict[str, object]]:
    return [
        {"elapsed_ms": s.elapsed_ms, "rss_mb": {k: round(v / 2**20, 1) for k, v in rss.items()}}
        for s in samples
        for rss in [s.rss_bytes]
    ]
