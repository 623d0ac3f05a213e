"""A run's result: the verdict, ``results.json`` and the rich verdict table."""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from tools.chaos.cluster import Crash
from tools.chaos.faults import FaultRecord, Finding
from tools.chaos.schedule import RunConfig, Schedule, to_json
from tools.chaos.verify import CHECKER, SENSORS, Check
from tools.chaos.verify_reference import AGENTS as REFERENCE


@dataclass
class RunResult:
    run_id: str
    run_dir: Path
    schedule: Schedule
    expect_duplicates: bool = False
    faults: list[FaultRecord] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    crashes: list[Crash] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    records: dict[str, int] = field(default_factory=dict)  # inputs per agent
    aborted_outputs: int = 0
    timings: dict[str, float] = field(default_factory=dict)
    latency_ms: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    aborted: str | None = None  # why the run stopped before its verdict

    @property
    def config(self) -> RunConfig:
        return self.schedule.config

    def total(self, category: str, agent: str | None = None) -> int:
        return sum(
            c.failures
            for c in self.checks
            if c.category == category and (agent is None or c.agent == agent)
        )

    @property
    def duplicates(self) -> int:
        return self.total("duplicated")

    @property
    def clean(self) -> bool:
        """Every check ran and held. A run that stopped early, or checked nothing,
        proves nothing, so it is not clean."""
        if self.aborted is not None or not self.checks:
            return False
        return all(c.ok for c in self.checks) and not self.findings and not self.crashes

    @property
    def passed(self) -> bool:
        """Clean, or (negative control) duplicates were found as they must be."""
        if self.aborted is not None:
            return False
        return self.duplicates > 0 if self.expect_duplicates else self.clean

    def verdict(self) -> str:
        if self.aborted is not None:
            return f"ABORTED before a verdict: {self.aborted}"
        if self.expect_duplicates:
            if self.duplicates:
                return f"NEGATIVE CONTROL OK: {self.duplicates} duplicates found, as expected"
            return "NEGATIVE CONTROL FAILED: no duplicates found; the checker proves nothing"
        if self.clean:
            return "CLEAN: every input reflected exactly once"
        failing = [c.name for c in self.checks if not c.ok]
        failing += [f.what for f in self.findings]
        failing += [f"{c.worker} crashed (exit {c.exit_code})" for c in self.crashes]
        return "FAILED: " + "; ".join(failing[:6]) + (" ..." if len(failing) > 6 else "")

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "run_dir": str(self.run_dir),
            "verdict": self.verdict(),
            "passed": self.passed,
            "clean": self.clean,
            "expect_duplicates": self.expect_duplicates,
            "aborted": self.aborted,
            "schedule": to_json(self.schedule),
            "records": self.records,
            "lost": self.total("lost"),
            "duplicated": self.duplicates,
            "wrong": self.total("wrong"),
            "order": self.total("order"),
            "aborted_output_records": self.aborted_outputs,
            "timings_s": self.timings,
            "echo_latency_ms": self.latency_ms,
            "faults": [asdict(f) for f in self.faults],
            "findings": [asdict(f) for f in self.findings],
            "crashes": [asdict(c) for c in self.crashes],
            "checks": [asdict(c) for c in self.checks],
            "notes": self.notes,
        }

    def save(self) -> Path:
        path = self.run_dir / "results.json"
        path.write_text(json.dumps(self.to_json(), indent=2) + "\n")
        return path


def percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)

    return {"p50": at(0.50), "p95": at(0.95), "p99": at(0.99), "max": round(ordered[-1], 1)}


def _seconds(values: list[float]) -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.1f}"
    return f"{min(values):.1f} / {statistics.median(values):.1f} / {max(values):.1f}"


def render(result: RunResult, console: Console) -> None:
    """The verdict table: faults by kind, then records/lost/duplicated/wrong per agent."""
    cfg = result.config
    console.print(
        f"[bold]chaos run {result.run_id}[/] seed {cfg.seed}, {cfg.guarantee}, "
        f"{cfg.workers} workers, commit interval {cfg.commit_interval_ms} ms, "
        f"session timeout {cfg.session_timeout_ms} ms, "
        f"at most {cfg.window_firings_per_checkpoint} windows fired per checkpoint"
    )
    faults = Table(title="faults injected", title_justify="left")
    for column in ("kind", "injected", "landed", "recovery s (min / median / max)"):
        faults.add_column(column, justify="left" if column == "kind" else "right")
    by_kind: dict[str, list[FaultRecord]] = defaultdict(list)
    for record in result.faults:
        by_kind[record.kind].append(record)
    for kind, records in by_kind.items():
        recoveries = [r.recovery_s for r in records if r.recovery_s is not None]
        landed = sum(r.landed for r in records)
        faults.add_row(kind, str(len(records)), str(landed), _seconds(recoveries))
    console.print(faults)

    outputs = Table(title="outputs (read_committed)", title_justify="left")
    for column in ("agent", "inputs", "lost", "duplicated", "wrong", "order", "checks"):
        outputs.add_column(column, justify="left" if column == "agent" else "right")
    for agent in (CHECKER, SENSORS, *REFERENCE, "run"):
        checks = [c for c in result.checks if c.agent == agent]
        if not checks:
            continue
        passed = sum(c.ok for c in checks)
        outputs.add_row(
            agent,
            str(result.records.get(agent, "-")),
            *(_cell(result.total(cat, agent)) for cat in ("lost", "duplicated", "wrong")),
            _cell(result.total("order", agent)),
            f"{passed}/{len(checks)}",
        )
    console.print(outputs)

    t = result.timings
    console.print(
        f"aborted output records (read_uncommitted - read_committed): {result.aborted_outputs}; "
        f"crashes: {len(result.crashes)}; findings: {len(result.findings)}"
    )
    if result.latency_ms:
        lat = result.latency_ms
        console.print(
            f"echo latency through the faults (produce -> read_committed): p50 {lat['p50']} ms, "
            f"p99 {lat['p99']} ms, max {lat['max']} ms"
        )
    console.print(
        "time: "
        + ", ".join(f"{name} {seconds:.0f} s" for name, seconds in t.items())
        + f"; folder {result.run_dir}"
    )
    for check in result.checks:
        if not check.ok:
            console.print(f"[red]x[/] {check.agent}: {check.name}: {check.failures} failures")
            for example in check.examples[:3]:
                console.print(f"    {example}", markup=False)
    for finding in result.findings:
        console.print("[red]x[/] finding: ", end="")
        where = finding.log_path or "see results.json"
        console.print(f"{finding.what} (log {where})", markup=False)
    for crash in result.crashes:
        console.print(
            f"[red]x[/] {crash.worker} exited {crash.exit_code} unasked at {crash.at_s} s "
            f"(log {crash.log_path})"
        )
    style = "green" if result.passed else "red"
    console.print(f"[bold {style}]{result.verdict()}[/]")


def _cell(value: int) -> str:
    return "0" if value == 0 else f"[red]{value}[/]"


def render_summary(results: list[RunResult], console: Console) -> None:
    """One row per seed, for multi-seed runs."""
    table = Table(title=f"{len(results)} seeds", title_justify="left")
    for column in ("seed", "verdict", "faults", "inputs", "lost", "dup", "wrong", "aborted", "s"):
        table.add_column(column, justify="left" if column in ("verdict",) else "right")
    for r in results:
        table.add_row(
            str(r.config.seed),
            "[green]pass[/]" if r.passed else "[red]FAIL[/]",
            str(len(r.faults)),
            str(sum(r.records.values())),
            _cell(r.total("lost")),
            str(r.duplicates) if r.expect_duplicates else _cell(r.duplicates),
            _cell(r.total("wrong")),
            str(r.aborted_outputs),
            f"{r.timings.get('total', 0):.0f}",
        )
    console.print(table)
