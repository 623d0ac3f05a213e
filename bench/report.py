"""Results: ``<suite>.json`` (everything), ``<suite>.md`` (tables and ratios) and
``<suite>.png`` (throughput bars, latency CDF) under ``bench/results/``."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console

from bench.ratios import ratios
from bench.run import Options


def _fmt(value: Any, digits: int = 0) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float | int):
        return f"{value:,.{digits}f}"
    return str(value)


def markdown(results: dict[str, Any]) -> str:
    lines = [
        f"# Benchmark results: {results['suite']} ({results['started_at']})",
        "",
        f"{results['readings']:,} readings of ~150 B JSON; machine: "
        f"{results['machine']['cpus']} CPUs, Python {results['machine']['python']}.",
        "",
        "## Drain of the pre-loaded topic",
        "",
        "| contender | partitions | events/s | CPU s / M events | peak RSS MB | correct |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for d in results["drains"]:
        correct = d.get("correct")
        verdict = (
            ("n/a (reads only)" if d["contender"].startswith("aiokafka") else "not checked")
            if correct is None
            else "yes"
            if correct["ok"]
            else "NO"
        )
        cut = "" if d["drained"] else " (cut short)"
        lines.append(
            f"| {d['contender']} | {d['partitions']} | {_fmt(d['events_per_s'])}{cut} | "
            f"{_fmt(d['cpu_s_per_million'], 1)} | {_fmt(d['peak_rss_mb'])} | {verdict} |"
        )
    for p in results.get("java_ceilings", []):
        lines.append(
            f"| {p['tool']} | {p['partitions']} | {_fmt(p['events_per_s'])} | "
            f"{_fmt(p.get('cpu_s_per_million'), 1)} | {_fmt(p.get('peak_rss_mb'))} | n/a |"
        )
    latency = results.get("latency", [])
    if latency:
        lines += [
            "",
            f"## End-to-end latency at {latency[0]['offered_per_s']:,} readings/s offered",
            "",
            "Produce of the reading that closes a window -> a read_committed reader sees "
            "its result.",
            "",
            "| contender | results | p50 ms | p99 ms | max ms | kept up |",
            "|---|---:|---:|---:|---:|---|",
        ]
        for row in latency:
            lines.append(
                f"| {row['contender']} | {row['results']:,} | {_fmt(row['p50_ms'])} | "
                f"{_fmt(row['p99_ms'])} | {_fmt(row['max_ms'])} | "
                f"{'yes' if row['kept_up'] else 'no'} |"
            )
    rest = results.get("rest")
    if rest:
        lines += [
            "",
            "## REST point queries during full ingest (Eddy EOS 100 ms)",
            "",
            f"{rest['requests']:,} requests at {rest['rate_per_s']}/s offered: "
            f"p50 {rest['p50_ms']:.1f} ms, p99 {rest['p99_ms']:.1f} ms, "
            f"{rest['errors']} errors; ingest {rest['ingest_per_s']:,.0f} events/s "
            f"vs {rest['baseline_per_s']:,.0f} without queries "
            f"({rest['slowdown_pct']:.1f} % slower).",
        ]
    idle = results.get("rest_idle")
    if idle:
        lines.append("")
        lines.append(
            "The same query, one at a time on the idle worker: "
            + "; ".join(
                f"{kind.replace('_', ' ')} p50 {v['p50_ms']:.1f} ms, p99 {v['p99_ms']:.1f} ms"
                for kind, v in idle.items()
            )
            + "."
        )
    restore = results.get("restore")
    if restore:
        lines += [
            "",
            "## State restore from the changelog (Eddy, local state wiped)",
            "",
            f"{restore['records']:,} changelog records in {restore['elapsed_ms']:,} ms: "
            f"{restore['records_per_s']:,.0f} records/s.",
        ]
    table = ratios(results)
    if table:
        lines += ["", "## Ratios (same run)", "", "| figure | value | target | met |"]
        lines.append("|---|---:|---|---|")
        for r in table:
            met = "n/a" if r["met"] is None else "yes" if r["met"] else "**no**"
            lines.append(f"| {r['figure']} | {r['value']} | {r['target']} | {met} |")
    return "\n".join(lines) + "\n"


def write(results: dict[str, Any], options: Options, console: Console) -> None:
    out = options.results_dir
    out.mkdir(parents=True, exist_ok=True)
    results["ratios"] = ratios(results)
    (out / f"{options.suite}.json").write_text(json.dumps(results, indent=2) + "\n")
    (out / f"{options.suite}.md").write_text(markdown(results))
    written = [f"{options.suite}.json", f"{options.suite}.md"]
    if not options.quick:
        from bench.chart import chart

        chart(results, out / f"{options.suite}.png")
        written.append(f"{options.suite}.png")
    console.print(f"Results: {', '.join(str(out / w) for w in written)}")
