"""``python -m bench.memory``: RSS of each Eddy worker process with 1M keys in state.

One reading from each of 1,000,000 sensors, then each sensor's closing reading
(``bench.workload``), pre-loaded over 6 partitions and drained by the
``eddy-eos-100ms`` contender (``eddy worker``: one ingest process and its query
process, exactly-once, 100 ms commits). When it has drained, the state holds
a million window results kept for queries and a million open windows (those of
the closing readings). Every process's RSS is sampled each second from launch
to stop; the figures are each one's peak and final RSS, the keys in state
(RocksDB's estimate, from the worker's ``/metrics``) and the drain's events/s.
The windows are checked against the recomputation like every bench drain.
Target (issue #20): RSS <= 400 MB per process. Results: ``bench/results/memory.json``.
"""

from __future__ import annotations

import argparse
import re
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console

from bench.__main__ import _interrupt
from bench.contenders import BY_NAME
from bench.drain import drain
from bench.rss import RssSampler, summary, to_json
from bench.run import Options, Run, load_input, progress, start
from bench.standalone import measure_and_save
from bench.verify import verify
from bench.workload import Shape

CONTENDER = "eddy-eos-100ms"
KEYS = 1_000_000
PARTITIONS = 6
TARGET_MB = 400
SAMPLE_MS = 1_000
SETTLE_S = 10.0  # after the drain: what the worker holds once idle is the "final" RSS


def state_keys(api_port: int | None) -> int:
    """Sum of ``eddy_state_keys`` over the worker's partitions (RocksDB's estimate)."""
    text = httpx.get(f"http://127.0.0.1:{api_port}/metrics", timeout=10).text
    return sum(metric_values(text, "eddy_state_keys"))


def metric_values(text: str, name: str) -> list[int]:
    """Every sample of one Prometheus metric in an exposition text."""
    pattern = rf"^{name}(?:\{{[^}}]*\}})? ([0-9.e+]+)$"
    return [int(float(v)) for v in re.findall(pattern, text, re.M)]


def measure(run: Run, shape: Shape, cap_s: float) -> dict[str, Any]:
    inp, expected = load_input(run, PARTITIONS, shape)
    label = f"memory-{PARTITIONS}p"
    launched = start(run, BY_NAME[CONTENDER], inp, label)
    sampler = RssSampler(launched.proc.pid, SAMPLE_MS)
    sampler.start()
    try:
        with progress(run.console) as bar:
            task = bar.add_task(f"{CONTENDER:<28}", total=inp.records)
            measured = drain(
                run.kafka, launched, inp, cap_s=cap_s,
                on_progress=lambda n: bar.update(task, completed=n),
            )  # fmt: skip
        time.sleep(SETTLE_S)
        keys = state_keys(launched.api_port)
    finally:
        sampler.stop()
        launched.proc.stop()
    shutil.rmtree(run.dir / f"{run.app_ids[label]}-state", ignore_errors=True)
    verdict = verify(run.kafka, launched, expected) if measured.drained else None
    per_process = summary(sampler.samples)
    return {
        "contender": CONTENDER,
        "sensors": shape.sensors,
        "records": inp.records,
        "partitions": PARTITIONS,
        "state_keys": keys,
        "drain": measured.to_json(),
        "rss_per_process": {
            k: {"peak_mb": v["peak_mb"], "final_mb": v["final_mb"]} for k, v in per_process.items()
        },
        "target_mb": TARGET_MB,
        "met": all(v["peak_mb"] <= TARGET_MB for v in per_process.values()),
        "correct": {**verdict.to_json(), "summary": verdict.summary()} if verdict else None,
        "samples": to_json(sampler.samples),
    }


def report(result: dict[str, Any], console: Console) -> None:
    d = result["drain"]
    console.print(
        f"{result['sensors']:,} sensors, {result['records']:,} records: "
        f"{d['events_per_s']:,} events/s, {result['state_keys']:,} keys in state"
    )
    for label, rss in result["rss_per_process"].items():
        peak, final = rss["peak_mb"], rss["final_mb"]
        console.print(f"  {label:<10} peak {peak:7.1f} MB  final {final:7.1f} MB")
    verdict = "met" if result["met"] else "missed"
    console.print(f"target <= {TARGET_MB} MB per process: {verdict}")
    correct = result["correct"]
    console.print(f"windows: {correct['summary'] if correct else 'not checked (not drained)'}")


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.memory", description=__doc__)
    parser.add_argument("--keys", type=int, default=KEYS, help="distinct sensors (1,000,000)")
    parser.add_argument("--cap-s", type=float, default=600.0, help="longest the drain may take")
    parser.add_argument("--results-dir", type=Path, default=Path("bench/results"))
    parser.add_argument("--suite", default="memory", help="results file name (memory)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _interrupt)
    console = Console(stderr=True)
    args = parse(sys.argv[1:] if argv is None else argv)
    options = Options(
        readings=args.keys, partitions=[PARTITIONS], contenders=[CONTENDER], one_partition=[],
        cap_s=args.cap_s, quick=False, results_dir=args.results_dir, suite=args.suite,
    )  # fmt: skip
    # One reading per sensor: every key in state, as few records as that takes.
    shape = Shape(readings=args.keys, sensors=args.keys)
    saved = measure_and_save(
        "bench.memory", options, console, lambda run: measure(run, shape, args.cap_s)
    )
    if isinstance(saved, int):
        return saved
    report(saved.result, console)
    console.print(f"results: {saved.path}")
    correct = saved.result["correct"]
    return 0 if correct and correct["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
