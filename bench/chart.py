"""The chart: sustained throughput per contender (bars), latency CDF per contender."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only: no display on a server
import matplotlib.pyplot as plt


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
