"""Throughput of the event-time core on the tumbling-average workload.

Run ``python -m bench.core`` (``--records N``, ``--repeat R``, ``--profile``).

The workload is the sensor-averages agent (``agents/sensor_averages.py``): 100
sensors, a reading every 100 ms each, 5 s tumbling windows, count/avg/min/max
(:class:`Stats`), a bounded out-of-orderness watermark of 1 s, and every reading
delayed by a random 0-1 s before it arrives, so readings are up to 1 s out of
order and none is late. Two set-ups are measured:

* ``memory``: :class:`KeyedWindows` over dict state that hands out its live
  objects (:class:`LiveWindowState`). The test suite's
  :class:`eddy.eventtime.memory.MemoryWindowState` deep-copies on every get
  and put so tests catch an operator that forgets to put; that copy is test
  strictness, not part of the core, so it is left out here.
* ``rocksdb``: the same over :class:`eddy.tables.windows.StoredWindowState` and
  :class:`eddy.tables.windows.StoredTimers` on a :class:`eddy.tables.store.PartitionStore`
  in a temporary directory, with a checkpoint every 5,000 records as a worker
  does it: watermark snapshot into the ``meta`` table, changelog records
  encoded (``txn.changelog_records()``), then one ``WriteBatch`` commit.

Rates are records per CPU second of this process (``time.process_time``, so
one core), the best of ``--repeat`` rounds. The ``baseline`` row is a bare loop
over the same records that unpacks each and calls a no-op function; the three
runs take turns within each round, so their bests come from the same stretch of
a shared machine's load. ``x baseline`` (CPU time per record over the baseline's)
is the figure to compare across machines and runs: on a loaded two-core box the
absolute rates move by 20-30 % from one invocation to the next, the ratio less.
The input records are frozen out of the garbage collector's view (``gc.freeze``):
a worker holds one record at a time, not 300,000. Results go to
``bench/results/core.json``; ``--profile memory|rocksdb`` prints a cProfile
instead.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import platform
import pstats
import random
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from eddy.eventtime import BoundedOutOfOrderness, Stats, TimeWindow, Tumbling, WindowSpec
from eddy.eventtime.keyed import KeyedWindows
from eddy.eventtime.memory import MemoryTimerStore
from eddy.eventtime.window_state import WindowEntry

Record = tuple[str, int, dict[str, Any]]

SENSORS = 100
PERIOD_MS = 100  # each sensor reads every 100 ms: 1,000 readings per second of event time
WINDOW_MS = 5_000
BOUND_MS = 1_000
CHECKPOINT_EVERY = 5_000
TARGETS = {"memory": 300_000, "rocksdb": 100_000}
RESULTS = Path(__file__).resolve().parent / "results" / "core.json"


def readings(count: int, seed: int = 7) -> list[Record]:
    """``count`` readings in arrival order: event time plus a 0-1 s delay."""
    rng = random.Random(seed)
    timed: list[tuple[int, Record]] = []
    for i in range(count):
        sensor = f"sensor_{i % SENSORS}"
        ts = (i // SENSORS) * PERIOD_MS + rng.randrange(PERIOD_MS)
        value = {"sensor_id": sensor, "timestamp_ms": ts, "temperature": rng.uniform(20, 90)}
        timed.append((ts + rng.randrange(BOUND_MS + 1), (sensor, ts, value)))
    timed.sort(key=lambda pair: pair[0])
    return [record for _, record in timed]


def spec() -> WindowSpec:
    return WindowSpec(Tumbling(size_ms=WINDOW_MS), aggregate=Stats(_temperature))


def _temperature(reading: dict[str, Any]) -> float:
    return float(reading["temperature"])


class LiveWindowState:
    """Dict state that stores the objects it is given, as the RocksDB transaction
    does between checkpoints (``eddy.tables.windows.StoredWindowState``)."""

    def __init__(self) -> None:
        self.windows: dict[tuple[str, TimeWindow], WindowEntry] = {}
        self.sessions: dict[str, list[TimeWindow]] = {}
        self.key_states: dict[str, dict[str, Any]] = {}

    def get_window(self, key: str, window: TimeWindow) -> WindowEntry | None:
        return self.windows.get((key, window))

    def put_window(self, key: str, window: TimeWindow, entry: WindowEntry) -> None:
        self.windows[(key, window)] = entry

    def delete_window(self, key: str, window: TimeWindow) -> None:
        self.windows.pop((key, window), None)

    def get_sessions(self, key: str) -> list[TimeWindow]:
        return list(self.sessions.get(key, ()))

    def put_sessions(self, key: str, windows: list[TimeWindow]) -> None:
        self.sessions[key] = list(windows)

    def get_key_state(self, key: str) -> dict[str, Any]:
        return dict(self.key_states.get(key, {}))

    def put_key_state(self, key: str, state: dict[str, Any]) -> None:
        self.key_states[key] = dict(state)


def _noop(key: str, timestamp_ms: int, value: Any) -> None:
    return None


def run_baseline(records: list[Record]) -> int:
    sink = _noop
    for key, ts, value in records:
        sink(key, ts, value)
    return 0


def run_memory(records: list[Record]) -> int:
    windows = KeyedWindows(
        spec(),
        watermark=BoundedOutOfOrderness(BOUND_MS),
        state=LiveWindowState(),
        event_timers=MemoryTimerStore(),
        processing_timers=MemoryTimerStore(),
    )
    emitted = 0
    on_record = windows.on_record
    for key, ts, value in records:
        results, _late = on_record(key, ts, value, 0)
        if results:
            emitted += len(results)
    return emitted + len(windows.end_of_input())


def run_rocksdb(records: list[Record]) -> int:
    from eddy.tables.codecs import decode_json, decode_utf8, encode_json, encode_utf8
    from eddy.tables.store import PartitionStore, TableSpec
    from eddy.tables.windows import StoredTimers, StoredWindowState, timer_table

    meta: TableSpec[str, Any] = TableSpec(
        "meta", encode_utf8, decode_utf8, encode_json, decode_json
    )
    with tempfile.TemporaryDirectory(prefix="eddy-bench-") as tmp:
        store = PartitionStore(Path(tmp) / "state")
        try:
            txn = store.begin()
            windows = KeyedWindows(
                spec(),
                watermark=BoundedOutOfOrderness(BOUND_MS),
                state=StoredWindowState(txn),
                event_timers=StoredTimers(txn, timer_table("timers")),
                processing_timers=StoredTimers(txn, timer_table("timers.processing")),
            )
            emitted = 0
            offset = 0
            on_record = windows.on_record
            for i, (key, ts, value) in enumerate(records, start=1):
                results, _late = on_record(key, ts, value, 0)
                if results:
                    emitted += len(results)
                if i % CHECKPOINT_EVERY == 0:
                    txn.put(meta, "watermark", windows.snapshot())
                    changes = txn.changelog_records()
                    offset += len(changes)
                    txn.commit(changes, offset)
            emitted += len(windows.end_of_input())
            txn.commit(txn.changelog_records(), offset)
        finally:
            store.close()
    return emitted


def measure(
    runs: dict[str, Callable[[list[Record]], int]], records: list[Record], repeat: int
) -> dict[str, float]:
    """Best CPU seconds of each run over ``repeat`` rounds. The runs take turns
    within a round, so the baseline's best and a setup's best come from the same
    stretch of a shared machine's load. GC is collected before a run, on during."""
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(repeat):
        for name, run in runs.items():
            gc.collect()
            start = time.process_time()
            run(records)
            best[name] = min(best[name], time.process_time() - start)
    return best


def profile(run: Callable[[list[Record]], int], records: list[Record], top: int = 25) -> None:
    profiler = cProfile.Profile()
    profiler.runcall(run, records)
    pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(top)


def table(rows: Iterable[dict[str, Any]]) -> str:
    lines = [f"{'setup':<10}{'records/s':>14}{'us/record':>12}{'x baseline':>12}{'target':>12}"]
    for row in rows:
        target = f"{row['target']:,}" if row.get("target") else "-"
        lines.append(
            f"{row['setup']:<10}{row['records_per_s']:>14,.0f}{row['us_per_record']:>12.2f}"
            f"{row['x_baseline']:>12.1f}{target:>12}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.core", description=__doc__)
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--profile",
        choices=["memory", "rocksdb"],
        default=None,
        help="print a cProfile of one run instead: memory (in-memory state) or rocksdb",
    )
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument("--label", default="", help="what was measured, kept in the report")
    args = parser.parse_args(argv)

    records = readings(args.records)
    # The input stays alive for the whole run; keep the collector from re-scanning
    # its million objects, which a worker (holding one record at a time) never pays.
    gc.collect()
    gc.freeze()
    runs: dict[str, Callable[[list[Record]], int]] = {
        "baseline": run_baseline,
        "memory": run_memory,
        "rocksdb": run_rocksdb,
    }
    if args.profile:
        profile(runs[args.profile], records)
        return 0
    emitted = run_memory(records)
    if emitted != run_rocksdb(records):
        raise SystemExit("memory and RocksDB state emitted different numbers of windows")
    seconds = measure(runs, records, args.repeat)
    rows = []
    for name, cpu in seconds.items():
        rows.append(
            {
                "setup": name,
                "records_per_s": args.records / cpu,
                "us_per_record": cpu / args.records * 1e6,
                "x_baseline": cpu / seconds["baseline"],
                "target": TARGETS.get(name),
                "meets_target": None
                if name not in TARGETS
                else args.records / cpu >= TARGETS[name],
            }
        )
    report = {
        "label": args.label,
        "workload": {
            "records": args.records,
            "sensors": SENSORS,
            "window_ms": WINDOW_MS,
            "bound_ms": BOUND_MS,
            "max_delay_ms": BOUND_MS,
            "aggregate": "Stats (count, avg, min, max)",
            "checkpoint_every": CHECKPOINT_EVERY,
            "windows_emitted": emitted,
        },
        "method": f"time.process_time, best of {args.repeat} interleaved rounds, one process",
        "python": platform.python_version(),
        "machine": platform.machine(),
        "results": rows,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n")
    print(table(rows))
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
