"""What a watermark that closes every key's window costs: ``python -m bench.closing``.

Tumbling windows are aligned, so one watermark closes the window of every key
at once, and the results of all of them wait for the same checkpoint: this burst,
not the steady per-reading cost, is what the end-to-end latency of a result
measures. Here ``sensor_averages``' own stage (``eddy.examples.app``) runs in this
process over a RocksDB store, as one partition of a worker runs it: ``--keys``
sensors send a reading every 100 ms each for ``--seconds`` of event time, in
order, so a window closes for every key every 5 s. Two figures, CPU µs per
closed window (``time.process_time``), best of ``--repeat`` runs:

* ``firing``: the records whose watermark closed windows (the timers, the
  results, their records to send and to keep for queries);
* ``checkpoint``: the checkpoint right after each of those records (the
  changelog records of the results, of the deleted windows and timers, and the
  ``WriteBatch``), without Kafka.

Results go to ``bench/results/closing.json``.
"""

from __future__ import annotations

import argparse
import gc
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from aiokafka.structs import ConsumerRecord

from bench.workload import encode
from eddy.app.loader import load_app_and_settings
from eddy.metrics import Metrics
from eddy.pipeline.base import Pipeline
from eddy.runtime.output import TaskOutput
from eddy.tables.store import PartitionStore

RESULTS = Path(__file__).resolve().parent / "results" / "closing.json"
STAGE = "sensor_averages"
PERIOD_MS = 100
BASE_MS = 1_800_000_000_000


def stage() -> Pipeline:
    app, settings = load_app_and_settings("eddy.examples.app:app")
    return next(s for s in app.build(settings, agents=[STAGE]).stages if s.name == STAGE)


def records(topic: str, keys: int, seconds: int) -> list[ConsumerRecord[bytes, bytes]]:
    """Every key's readings, in event-time order, as the consumer hands them over."""
    found: list[ConsumerRecord[bytes, bytes]] = []
    for at_ms in range(0, seconds * 1_000, PERIOD_MS):
        for k in range(keys):
            sensor, offset = f"sensor_{k}", len(found)
            value = encode(sensor, BASE_MS + at_ms, 20.0 + k % 70, offset)
            found.append(
                ConsumerRecord(
                    topic, 0, offset, BASE_MS + at_ms, 0, sensor.encode(), value, None, 0, 0, []
                )
            )
    return found


def run(pipeline: Pipeline, inputs: list[ConsumerRecord[bytes, bytes]]) -> dict[str, float]:
    """One pass; CPU seconds of the closing records and of their checkpoints."""
    firing_s = checkpoint_s = 0.0
    closed = 0
    with tempfile.TemporaryDirectory(prefix="eddy-closing-") as tmp:
        store = PartitionStore(Path(tmp) / "state")
        txn = store.begin()
        logic: Any = pipeline.create_logic(0, store, txn)
        out = TaskOutput(STAGE, "dead-letters", Metrics(), {})
        clock = time.process_time
        for n, record in enumerate(inputs):
            started = clock()
            logic.process(record, out)
            while logic.firing_due:  # bounded firing: the runtime checkpoints between
                logic.fire_due(out)
            elapsed = clock() - started
            results = len(out.take())
            if not results and n % 5_000:
                continue  # not a closing (every 5,000 records a checkpoint all the same)
            started = clock()
            logic.prepare_commit()
            txn.commit(txn.changelog_records(), n)
            if results:
                firing_s += elapsed
                checkpoint_s += clock() - started
                closed += results
        store.close()
    return {"firing_s": firing_s, "checkpoint_s": checkpoint_s, "closed": closed}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.closing", description=__doc__)
    parser.add_argument("--keys", type=int, default=1_000)
    parser.add_argument("--seconds", type=int, default=61)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    pipeline = stage()
    inputs = records(pipeline.sources[0], args.keys, args.seconds)
    gc.collect()
    gc.freeze()  # the input is held whole here; a worker holds a fetch
    runs = [run(pipeline, inputs) for _ in range(args.repeat)]
    closed = runs[0]["closed"]
    report = {
        "keys": args.keys,
        "seconds": args.seconds,
        "windows_closed": closed,
        "firing_us_per_window": round(min(r["firing_s"] for r in runs) / closed * 1e6, 2),
        "checkpoint_us_per_window": round(min(r["checkpoint_s"] for r in runs) / closed * 1e6, 2),
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n")
    print(
        f"{closed:,} windows closed by {args.keys:,}-key watermarks: firing "
        f"{report['firing_us_per_window']} µs, checkpoint {report['checkpoint_us_per_window']} µs "
        f"per window (CPU, best of {args.repeat}); wrote {args.output}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
