"""The end-to-end latency floor that a commit interval sets (no faults).

Under exactly-once a ``read_committed`` reader sees an output only once the
transaction that holds it commits, and a worker commits every
``EDDY_COMMIT_INTERVAL_MS``: a record waits for the end of the interval it
arrived in (half an interval on average, a whole one at worst) plus the commit
itself. ``python -m tools chaos latency`` measures it: one worker running the
checker, records at a modest rate, produce time -> the time a ``read_committed``
reader of ``echo`` sees the record's id, per commit interval, side by side.
"""

from __future__ import annotations

import asyncio
import shutil
import uuid
from dataclasses import dataclass

import orjson
from rich.console import Console
from rich.table import Table

from eddy.examples import app
from eddy.paths import eddy_home
from eddy.settings import load_settings
from eddy.topics import ensure_topics
from tools.chaos.cluster import Cluster
from tools.chaos.kafkaio import Feeder, LiveReader, delete_topics
from tools.chaos.reference import Plan
from tools.chaos.report import percentiles
from tools.chaos.verify import CHECKER
from tools.chaos.workload import checker_messages


@dataclass
class LatencyRow:
    commit_interval_ms: int
    records: int
    seen: int
    p50: float
    p95: float
    p99: float
    max: float


async def measure(
    intervals: list[int], rate: float, seconds: float, console: Console
) -> list[LatencyRow]:
    return [await _one(interval, rate, seconds, console) for interval in intervals]


async def _one(interval_ms: int, rate: float, seconds: float, console: Console) -> LatencyRow:
    tag = uuid.uuid4().hex[:8]
    run_dir = eddy_home() / "chaos" / f"latency-{interval_ms}ms-{tag}"
    settings = load_settings(
        app.settings_classes(),
        app="eddy.examples:app",
        app_id=f"latency-{tag}",
        topic_prefix=f"latency-{tag}-",
        agents=(CHECKER,),
        commit_interval_ms=interval_ms,
        state_dir=run_dir / "state",
        api_port=0,
        worker_id="latency",
    )
    plan = Plan.of(settings)
    names = plan.checker_topics()
    count = max(100, int(rate * seconds))
    messages = [m for m in checker_messages(1, count, 100) if not m.headers]
    await ensure_topics(settings, plan.topic_specs())
    cluster = Cluster(settings, run_dir, plan.stage_names, plan.worker_env())
    live = LiveReader(settings.bootstrap_servers, names["echo"], settings.partitions)
    live.keep_values = True
    stop = asyncio.Event()
    try:
        with console.status(f"commit interval {interval_ms} ms: starting a worker…") as status:
            worker = cluster.spawn("w0")
            await cluster.wait_ready(worker)
            reader = asyncio.create_task(live.run(stop))
            status.update(f"commit interval {interval_ms} ms: {len(messages)} records at {rate}/s")
            feeder = Feeder(settings.bootstrap_servers, {"checker": names["input"]}, messages, rate)
            await feeder.run()
            for _ in range(300):  # up to 60 s for the last commits
                if len(live.values) >= len(messages):
                    break
                await asyncio.sleep(0.2)
            stop.set()
            await reader
    finally:
        await cluster.stop_all()
        await cluster.close()
    index = {orjson.loads(m.value or b"{}")["id"]: i for i, m in enumerate(messages)}
    latencies: dict[int, float] = {}
    for at, value in live.values:
        record_id = orjson.loads(value or b"{}")["id"]
        latencies.setdefault(record_id, (at - feeder.sent_at[index[record_id]]) * 1000)
    stats = percentiles(list(latencies.values()))
    if not stats:
        stats = dict.fromkeys(("p50", "p95", "p99", "max"), 0.0)
    await delete_topics(
        settings.bootstrap_servers,
        [spec.name for spec in plan.topic_specs()] + plan.changelogs(),
    )
    shutil.rmtree(run_dir / "state", ignore_errors=True)
    return LatencyRow(
        interval_ms,
        len(messages),
        len(latencies),
        *(stats[q] for q in ("p50", "p95", "p99", "max")),
    )


def render_latency(rows: list[LatencyRow], console: Console) -> None:
    table = Table(
        title="produce -> visible to a read_committed reader (echo), exactly-once",
        title_justify="left",
    )
    for column in ("commit interval", "records", "seen", "p50 ms", "p95 ms", "p99 ms", "max ms"):
        table.add_column(column, justify="right")
    for r in rows:
        table.add_row(
            f"{r.commit_interval_ms} ms",
            str(r.records),
            str(r.seen),
            *(f"{v:.0f}" for v in (r.p50, r.p95, r.p99, r.max)),
        )
    console.print(table)
    console.print(
        "The floor: a record waits for the commit that ends its interval (about half an "
        "interval at the median, a whole one at p99) plus the commit itself."
    )
