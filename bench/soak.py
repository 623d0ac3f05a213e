"""``python -m bench.soak``: Eddy's worker under steady live load; its RSS over time.

A producer thread sends readings from 1,000 sensors at a fixed rate, open loop,
with event time = wall clock, so windows close, results are emitted, kept for
queries and (past their retention) expired as in production. ``eddy worker``
runs ``sensor_averages`` on them like the ``eddy-eos-100ms`` contender (one
ingest process and its query process, exactly-once, 100 ms commits). The RSS of
each of its processes is sampled every 5 s. The first 5 minutes are warm-up
(group join, the first memtables and caches filling) and left out of the
figures: per process min, max, mean, flatness ((max - min) / mean) and the
largest deviation from the mean, against issue #20's "flat within +-10 %".

**The rate**: half of Eddy EOS's one-process drain rate in the latest ``make
bench`` run (``--max-rate``, default the 97,497 events/s of
docs/performance.md's latest run, so 48,748/s). ``--rate`` sets it directly,
for instance when the harness's producer cannot hold half of a new maximum on
this machine (the result says how much it produced: ``produced_per_s``).

At the end: the consumer lag when the load stopped, and how long the worker took
to reach the end (whether it kept up); and a cheap correctness check: for every
window that closed, the counts in its results add up to the readings produced
in it, and no window has two results. Results: ``bench/results/soak.{json,png}``.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from rich.console import Console

from bench.__main__ import _interrupt
from bench.chart import rss_chart
from bench.contenders import BY_NAME, Input, Launched, input_topic
from bench.errors import BenchError
from bench.latency import LiveLoad
from bench.rss import RssSampler, Sample, summary, to_json
from bench.run import Options, Run, start
from bench.standalone import measure_and_save
from bench.workload import BOUND_MS, WINDOW_MS

CONTENDER = "eddy-eos-100ms"
PARTITIONS = 6
SENSORS = 1_000
LATEST_MAX_RATE_PER_S = 97_497  # Eddy EOS 100 ms, one process: docs/performance.md, latest run
SAMPLE_MS = 5_000
REPORT_EVERY_S = 60.0
CATCH_UP_S = 120.0  # after the load stops: the worker must reach the end within this
TARGET_DEVIATION = 0.10


@dataclass
class Lag:
    """The worker's consumer lag (records produced, not committed) over time."""

    points: list[tuple[int, int]] = field(default_factory=list)  # (elapsed ms, records)

    def add(self, elapsed_ms: int, records: int) -> None:
        self.points.append((elapsed_ms, records))


def lag_now(run: Run, launched: Launched, inp: Input) -> int:
    end = sum(run.kafka.end_offsets(inp.topic, inp.partitions).values())
    return end - run.kafka.committed(launched.group, inp.topic, inp.partitions)


def closed_windows(load: LiveLoad) -> list[int]:
    """Window starts every partition has surely closed: a reading at or past
    window end + the watermark bound was produced on each (1,000 sensors over 6
    partitions: each sees one every few ms), with a second to spare."""
    last_ms = load.stopped_ms - 1_000
    return sorted(w for w in load.per_window if w + WINDOW_MS + BOUND_MS <= last_ms)


def check(run: Run, output: str, load: LiveLoad) -> dict[str, Any]:
    """Per closed window: the results' counts add up to the readings produced."""
    counted: dict[int, int] = defaultdict(int)
    seen: set[tuple[str, int]] = set()
    duplicates = 0
    for _p, _key, value in run.kafka.read(output):
        if value is None:
            continue
        r = orjson.loads(value)
        window = (r["sensor_id"], int(r["window_start_ms"]))
        duplicates += window in seen
        seen.add(window)
        counted[window[1]] += int(r["count"])
    windows = closed_windows(load)
    wrong = [w for w in windows if counted.get(w, 0) != load.per_window[w]]
    return {
        "ok": not wrong and not duplicates and not load.failed,
        "closed_windows": len(windows),
        "results": len(seen),
        "wrong_windows": len(wrong),
        "duplicates": duplicates,
        "produce_failures": load.failed,
        "examples": [
            f"window {w}: results count {counted.get(w, 0)}, produced {load.per_window[w]}"
            for w in wrong[:3]
        ],
    }


def soak(run: Run, args: argparse.Namespace) -> tuple[dict[str, Any], list[Sample]]:
    topic = input_topic(f"{run.prefix}soak-")
    run.kafka.create(topic, PARTITIONS)
    inp = Input(topic, PARTITIONS, 0)
    launched = start(run, BY_NAME[CONTENDER], inp, "soak")
    if launched.output is None:
        raise BenchError(f"{CONTENDER} has no output topic")  # Eddy always has one
    output = launched.output
    sampler = RssSampler(launched.proc.pid, SAMPLE_MS)
    load = LiveLoad(
        run.options.bootstrap, topic, PARTITIONS, args.rate, sensors=SENSORS, keep_times=False
    )
    lag = Lag()
    sampler.start()
    load.start()
    started = time.monotonic()
    try:
        _hold(run, launched, inp, load, sampler, lag, args.minutes * 60.0, started)
        load.stop()
        lag_at_stop = lag_now(run, launched, inp)
        caught_up_ms = _catch_up(run, launched, inp)
        time.sleep(2.0)  # the last results' transaction: committed with the last offsets
    finally:
        load.stop()
        sampler.stop()
        launched.proc.stop()
        shutil.rmtree(run.dir / f"{run.app_ids['soak']}-state", ignore_errors=True)
    warmup_ms = int(args.warmup_minutes * 60_000)
    per_process = summary(sampler.samples, after_ms=warmup_ms)
    held_s = (load.stopped_ms - load.started_ms) / 1_000
    result = {
        "contender": CONTENDER,
        "partitions": PARTITIONS,
        "sensors": SENSORS,
        "minutes": args.minutes,
        "warmup_minutes": args.warmup_minutes,
        "rate_per_s": args.rate,
        "produced": load.produced,
        "produced_per_s": round(load.produced / held_s) if held_s else 0,
        "lag_at_stop_records": lag_at_stop,
        "caught_up_ms": caught_up_ms,  # None: not at the end CATCH_UP_S after the load stopped
        "kept_up": caught_up_ms is not None,
        "rss_after_warmup": per_process,
        "target_max_deviation": TARGET_DEVIATION,
        "met": bool(per_process)
        and all(v["max_deviation"] <= TARGET_DEVIATION for v in per_process.values()),
        "correct": check(run, output, load),
        "lag": [{"elapsed_ms": ms, "records": n} for ms, n in lag.points],
        "samples": to_json(sampler.samples),
    }
    return result, sampler.samples


def _hold(
    run: Run,
    launched: Launched,
    inp: Input,
    load: LiveLoad,
    sampler: RssSampler,
    lag: Lag,
    duration_s: float,
    started: float,
) -> None:
    """Keep the load on for ``duration_s``, printing progress every minute."""
    next_report = started + REPORT_EVERY_S
    while (now := time.monotonic()) < started + duration_s:
        launched.proc.check_alive()
        if now >= next_report:
            next_report += REPORT_EVERY_S
            records = lag_now(run, launched, inp)
            lag.add(int((now - started) * 1_000), records)
            last = sampler.samples[-1].rss_bytes if sampler.samples else {}
            rss = "  ".join(f"{k} {v / 2**20:.0f} MB" for k, v in sorted(last.items()))
            run.console.print(
                f"[{(now - started) / 60:4.1f} min] produced {load.produced:,}  "
                f"lag {records:,}  {rss}"
            )
        time.sleep(1.0)


def _catch_up(run: Run, launched: Launched, inp: Input) -> int | None:
    """Milliseconds until the worker has committed everything produced (None: not
    within CATCH_UP_S)."""
    started = time.monotonic()
    while time.monotonic() - started < CATCH_UP_S:
        if lag_now(run, launched, inp) <= 0:
            return int((time.monotonic() - started) * 1_000)
        time.sleep(0.2)
    return None


def report(result: dict[str, Any], console: Console) -> None:
    caught_up = (
        f"caught up in {result['caught_up_ms']:,} ms" if result["kept_up"] else "did NOT catch up"
    )
    console.print(
        f"{result['minutes']:g} min at {result['rate_per_s']:,}/s offered, "
        f"{result['produced_per_s']:,}/s produced; lag at stop "
        f"{result['lag_at_stop_records']:,} records, {caught_up}"
    )
    for label, s in result["rss_after_warmup"].items():
        console.print(
            f"  {label:<10} min {s['min_mb']:.1f}  max {s['max_mb']:.1f}  "
            f"mean {s['mean_mb']:.1f} MB  flatness {s['flatness']:.3f}  "
            f"max deviation {s['max_deviation']:.3f}"
        )
    console.print(f"flat within +-{TARGET_DEVIATION:.0%}: {'met' if result['met'] else 'missed'}")
    c = result["correct"]
    console.print(
        f"windows: {c['closed_windows']} closed, {c['wrong_windows']} wrong, "
        f"{c['duplicates']} duplicated results, {c['produce_failures']} produce failures"
    )


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__)
    parser.add_argument("--minutes", type=float, default=30.0, help="load duration (30)")
    parser.add_argument(
        "--max-rate", type=int, default=LATEST_MAX_RATE_PER_S,
        help=f"Eddy EOS's drain rate, events/s (default {LATEST_MAX_RATE_PER_S:,}: latest run)",
    )  # fmt: skip
    parser.add_argument("--rate", type=int, help="offered events/s (default: half of --max-rate)")
    parser.add_argument("--warmup-minutes", type=float, help="left out of the figures (5)")
    parser.add_argument("--results-dir", type=Path, default=Path("bench/results"))
    parser.add_argument("--suite", default="soak", help="results file name (soak)")
    args = parser.parse_args(argv)
    args.rate = args.rate or args.max_rate // 2
    if args.warmup_minutes is None:
        # A short development soak keeps a proportionate warm-up.
        args.warmup_minutes = min(5.0, args.minutes / 6)
    return args


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _interrupt)
    console = Console(stderr=True)
    args = parse(sys.argv[1:] if argv is None else argv)
    options = Options(
        readings=0, partitions=[PARTITIONS], contenders=[CONTENDER], one_partition=[],
        cap_s=0, quick=False, results_dir=args.results_dir, suite=args.suite,
    )  # fmt: skip
    samples: list[Sample] = []  # the sampler's own, for the chart (the JSON's are rounded)

    def measure(run: Run) -> dict[str, Any]:
        result, sampled = soak(run, args)
        samples.extend(sampled)
        return result

    saved = measure_and_save("bench.soak", options, console, measure)
    if isinstance(saved, int):
        return saved
    result, path = saved.result, saved.path
    rss_chart(
        samples,
        path.with_suffix(".png"),
        f"Eddy worker RSS, {args.minutes:g} min at {args.rate:,} readings/s",
        warmup_ms=int(args.warmup_minutes * 60_000),
    )
    report(result, console)
    console.print(f"results: {path}, {path.with_suffix('.png')}")
    return 0 if result["correct"]["ok"] and result["kept_up"] else 1


if __name__ == "__main__":
    sys.exit(main())
