"""The charts: sustained throughput per contender (bars), latency CDF per contender;
RSS per worker process over time (the soak)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only: no display on a server
import matplotlib.pyplot as plt

from bench.rss import Sample, labels, series_mb


def chart(results: dict[str, Any], path: Path) -> None:
    fig, (bars, cdf) = plt.subplots(1, 2, figsize=(15, 6))
    rows = [
        (f"{d['contender']} ({d['partitions']}p)", d["events_per_s"]) for d in results["drains"]
    ]
    rows += [
        (f"{p['tool'].replace('kafka ', 'Java ')} ({p['partitions']}p)", p["events_per_s"])
        for p in results.get("java_ceilings", [])
    ]
    rows.sort(key=lambda r: r[1])
    colors = [
        "tab:green"
        if "eddy" in name
        else "tab:gray"
        if "aiokafka" in name or "Java" in name
        else "tab:blue"
        for name, _ in rows
    ]
    bars.barh([n for n, _ in rows], [v for _, v in rows], color=colors)
    bars.set_xscale("log")
    bars.set_xlabel("events/s (drain of the pre-loaded topic, log scale)")
    bars.set_title(f"Sustained throughput, {results['readings']:,} readings")
    for i, (_, v) in enumerate(rows):
        bars.text(v, i, f" {v:,.0f}", va="center", fontsize=8)
    for row in results.get("latency", []):
        values = row.get("cdf_ms") or []
        if values:
            ys = [i / len(values) for i in range(len(values))]
            cdf.plot(values, ys, label=f"{row['contender']} (p99 {row['p99_ms']:.0f} ms)")
    latency = results.get("latency", [])
    offered = f" at {latency[0]['offered_per_s']:,} readings/s" if latency else ""
    cdf.set_title(f"End-to-end latency CDF{offered}")
    cdf.set_xlabel("ms from the closing reading's produce to read_committed result")
    cdf.set_xscale("log")
    cdf.set_ylabel("fraction of window results")
    cdf.grid(alpha=0.3)
    if latency:
        cdf.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def rss_chart(
    samples: list[Sample],
    path: Path,
    title: str,
    warmup_ms: int = 0,
    target_mb: float | None = None,
) -> None:
    """RSS of each worker process over time, the warm-up shaded (it is not measured)."""
    fig, ax = plt.subplots(figsize=(11, 5))
    for label in labels(samples):
        minutes, mb = series_mb(samples, label)
        ax.plot(minutes, mb, label=label)
    if warmup_ms:
        ax.axvspan(0, warmup_ms / 60_000, color="tab:gray", alpha=0.15, label="warm-up (excluded)")
    if target_mb is not None:
        ax.axhline(target_mb, color="tab:red", linestyle="--", label=f"target {target_mb:.0f} MB")
    ax.set_title(title)
    ax.set_xlabel("minutes since the worker started")
    ax.set_ylabel("RSS MB (VmRSS)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
