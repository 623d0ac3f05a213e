"""The issue's targets, as ratios of figures measured in the same run."""

from __future__ import annotations

from typing import Any


def _rate(results: dict[str, Any], name: str, partitions: int = 6) -> float | None:
    for d in results.get("drains", []):
        if d["contender"] == name and d["partitions"] == partitions:
            return float(d["events_per_s"])
    return None


def _latency(results: dict[str, Any], name: str) -> dict[str, Any] | None:
    return next((r for r in results.get("latency", []) if r["contender"] == name), None)


def ratios(results: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def add(figure: str, value: float | None, target: str, met: bool | None, unit: str) -> None:
        if value is not None:
            out.append(
                {
                    "figure": figure,
                    "value": f"{value:,.2f}{unit}",
                    "target": target,
                    "met": met,
                    "raw": value,
                }
            )

    eos = _rate(results, "eddy-eos-100ms")
    alos = _rate(results, "eddy-alos-100ms")
    ceiling = _rate(results, "aiokafka-consume")
    quix = _rate(results, "quix-eos-100ms")
    if eos and ceiling:
        r = eos / ceiling
        add("Eddy EOS / raw aiokafka consume", r, ">= 0.50", r >= 0.5, "x")
    if eos and quix:
        r = eos / quix
        add("Eddy EOS / Quix EOS", r, ">= 2.00", r >= 2.0, "x")
    all_cores = _rate(results, "eddy-eos-100ms-all-cores")
    kstreams_all = _rate(results, "kstreams-eos-100ms-all-cores")
    if all_cores and kstreams_all:
        r = all_cores / kstreams_all
        add("Eddy / Kafka Streams, EOS, every core", r, ">= 1.00", r >= 1.0, "x")
    if all_cores and eos:
        add("Eddy every core / one process", all_cores / eos, "(scaling)", None, "x")
    if eos and alos:
        cost = (1 - eos / alos) * 100
        add("EOS cost vs ALOS (100 ms)", cost, "<= 15 %", cost <= 15, " %")
    for name, interval_ms in (("eddy-eos-100ms", 100), ("eddy-eos-1s", 1_000)):
        row = _latency(results, name)
        if row and row.get("p99_ms") is not None:
            bound = interval_ms + 100
            add(
                f"{name} p99 latency (ms)",
                row["p99_ms"],
                f"<= {bound} ms",
                row["p99_ms"] <= bound,
                " ms",
            )
    restore = results.get("restore")
    if restore:
        rate = restore["records_per_s"]
        add("restore (records/s)", rate, ">= 300,000", rate >= 300_000, "")
    rest = results.get("rest")
    if rest:
        add("REST p99 at 500 req/s (ms)", rest["p99_ms"], "<= 10 ms", rest["p99_ms"] <= 10, " ms")
        add(
            "ingest slowdown from REST",
            rest["slowdown_pct"],
            "<= 10 %",
            rest["slowdown_pct"] <= 10,
            " %",
        )
    return out
