"""The measurements beyond the drains, run after them on the same input (full runs).

* Kafka's Java ceilings (consumer and producer performance tools);
* restore: Eddy EOS is restarted on its drained state's changelog, local state wiped;
* REST: Eddy EOS drains the input again while point queries arrive at 500/s,
  slowdown against the same contender's drain earlier in the run;
* latency: each windowed contender on a live topic at half of Eddy EOS's rate.
"""

from __future__ import annotations

import re
import shutil
import time
from typing import Any

import httpx

from bench import javaperf
from bench.contenders import BY_NAME, Input, Launched, input_topic
from bench.drain import drain
from bench.errors import BenchError
from bench.latency import LiveLoad, ResultReader, latencies, percentile
from bench.procs import own_cpu_ms
from bench.restload import RestLoad, probe
from bench.run import Run, fresh_app_id, progress, start
from bench.workload import shape_for

EDDY = "eddy-eos-100ms"
# Every Eddy variant (the targets are about them) and each peer's exactly-once.
LATENCY = [
    "eddy-alos-100ms",
    "eddy-eos-100ms",
    "eddy-eos-1s",
    "quix-eos-100ms",
    "kstreams-eos-100ms",
]


def run_extras(run: Run, inp: Input) -> None:
    r = run.results
    wanted = run.options.extras
    if "java" in wanted:
        r["java_ceilings"] = java_ceilings(run, inp)
    if EDDY in run.options.contenders:
        if "profile" in wanted:
            r["profile"] = profile(run, inp)
        if "restore" in wanted:
            r["restore"] = restore(run, inp)
        if "rest" in wanted:
            r["rest"] = rest_during_ingest(run, inp)
    base = _rate(r, EDDY, inp.partitions)
    if base and "latency" in wanted:
        r["latency"] = [
            latency(run, name, inp.partitions, base // 2)
            for name in LATENCY
            if name in run.options.contenders
        ]


def java_ceilings(run: Run, inp: Input) -> list[dict[str, Any]]:
    c = run.console
    with c.status("Kafka ConsumerPerformance…"):
        consumer = javaperf.consumer_perf(
            inp, run.options.bootstrap, fresh_app_id(run, "cperf"), run.dir
        )
    with c.status("Kafka ProducerPerformance…"):
        producer = javaperf.producer_perf(
            run.kafka, inp, run.options.bootstrap, f"{run.prefix}pperf", run.dir
        )
    for row in (consumer, producer):
        c.print(f"  {row['tool']:<28} {row['events_per_s']:>9,} events/s")
    return [consumer, producer]


def _rate(results: dict[str, Any], name: str, partitions: int) -> int | None:
    for d in results["drains"]:
        if d["contender"] == name and d["partitions"] == partitions:
            return int(d["events_per_s"])
    return None


def _wait_ready(launched: Launched, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        launched.proc.check_alive()
        try:
            if httpx.get(f"http://127.0.0.1:{launched.api_port}/readyz", timeout=2).is_success:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise BenchError(f"{launched.contender.name} not ready after {timeout_s:.0f} s")


def _metric(text: str, name: str) -> float:
    match = re.search(rf"^{name}\{{[^}}]*\}} ([0-9.e+]+)$", text, re.M)
    return float(match.group(1)) if match else 0.0


def restore(run: Run, inp: Input) -> dict[str, Any]:
    """Restart the drained Eddy EOS app with its local state gone: it restores every
    partition from the changelog. Timed from the first restoring partition to the
    last one ready (the worker's own metrics, polled every 50 ms)."""
    app_id = run.app_ids[f"{EDDY}-{inp.partitions}p"]
    shutil.rmtree(run.dir / f"{app_id}-state", ignore_errors=True)
    c = BY_NAME[EDDY]
    from bench.contenders import launch
    from bench.run import free_port

    launched = launch(
        c, inp, app_id, run.dir, run.options.bootstrap, free_port(), run.options.eddy_src
    )
    url = f"http://127.0.0.1:{launched.api_port}/metrics"
    first = last = None
    restored = 0.0
    try:
        with run.console.status("Restoring Eddy's state from its changelog…"):
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                launched.proc.check_alive()
                try:
                    text = httpx.get(url, timeout=2).text
                except httpx.HTTPError:
                    time.sleep(0.05)
                    continue
                now = time.monotonic()
                restoring = _metric(text, "eddy_restoring_partitions")
                restored = _metric(text, "eddy_restored_records_total")
                if first is None and (restoring > 0 or restored > 0):
                    first = now
                if first is not None and restoring == 0 and restored > 0:
                    last = now
                    break
                time.sleep(0.05)
        # The worker is now idle and ready: the REST service time with no ingest.
        sensors = shape_for(inp.records).sensors
        port = launched.api_port or 0
        idle = {
            "keep_alive": probe(port, sensors, fresh=False),
            "new_connection": probe(port, sensors, fresh=True),
        }
    finally:
        launched.proc.stop()
    if first is None or last is None:
        raise BenchError(f"restore not seen in 300 s; last log lines:\n{launched.proc.tail()}")
    elapsed_ms = max(1, int((last - first) * 1_000))
    for kind, values in idle.items():
        run.results.setdefault("rest_idle", {})[kind] = {
            "p50_ms": (percentile(values, 0.5) or 0) / 1_000,
            "p99_ms": (percentile(values, 0.99) or 0) / 1_000,
            "requests": len(values),
        }
    run.console.print(f"  REST on the idle worker: {run.results['rest_idle']}")
    row = {
        "records": int(restored),
        "elapsed_ms": elapsed_ms,
        "records_per_s": round(restored * 1_000 / elapsed_ms),
        "note": "first restoring partition to last ready, 50 ms polls of /metrics",
    }
    run.console.print(
        f"  restore: {row['records']:,} changelog records in {elapsed_ms:,} ms "
        f"= {row['records_per_s']:,} records/s"
    )
    return row


def profile(run: Run, inp: Input, seconds: int = 90) -> dict[str, Any]:
    """Eddy EOS under pyinstrument for ``seconds`` of the drain: where the time goes."""
    from bench.contenders import launch, profile_reports
    from bench.run import free_port

    label = f"{EDDY}-profile-{inp.partitions}p"
    out = (run.options.results_dir / f"{run.options.suite}-profile.txt").resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    launched = launch(
        BY_NAME[EDDY], inp, fresh_app_id(run, label), run.dir, run.options.bootstrap, free_port(),
        run.options.eddy_src, profile_to=out,
    )  # fmt: skip
    run.launched_groups.append(launched.group)
    try:
        with progress(run.console) as bar:
            task = bar.add_task(f"{label:<28}", total=inp.records)
            measured = drain(
                run.kafka, launched, inp, cap_s=seconds,
                on_progress=lambda n: bar.update(task, completed=n),
            )  # fmt: skip
    finally:
        launched.proc.stop(timeout_s=120)  # pyinstrument renders its report on exit
    state = run.dir / f"{run.app_ids[label]}-state"
    shutil.rmtree(profile_reports(state), ignore_errors=True)
    shutil.rmtree(state, ignore_errors=True)
    run.console.print(
        f"  profile: {out} ({measured.events_per_s:,.0f} events/s under the profiler)"
    )
    return {"path": str(out), "events_per_s_profiled": round(measured.events_per_s)}


def rest_during_ingest(run: Run, inp: Input) -> dict[str, Any]:
    c = BY_NAME[EDDY]
    label = f"{EDDY}-rest-{inp.partitions}p"
    launched = start(run, c, inp, label)
    load = RestLoad(
        launched.api_port or 0, run.options.rest_rate_per_s, shape_for(inp.records).sensors
    )
    try:
        _wait_ready(launched)
        load.start()
        harness_cpu_s = time.process_time()
        # The worker's own process answers the queries; its ingest processes are its
        # children. Its CPU per request is what decides how much load it can take.
        query_cpu_ms = own_cpu_ms(launched.proc.pid)
        with progress(run.console) as bar:
            task = bar.add_task(f"{label:<28}", total=inp.records)
            measured = drain(
                run.kafka, launched, inp, cap_s=run.options.cap_s,
                on_progress=lambda n: bar.update(task, completed=n),
            )  # fmt: skip
        harness_cpu_s = time.process_time() - harness_cpu_s
        query_cpu_ms = own_cpu_ms(launched.proc.pid) - query_cpu_ms
    finally:
        load.stop()
        launched.proc.stop()
    shutil.rmtree(run.dir / f"{run.app_ids[label]}-state", ignore_errors=True)
    base = _rate(run.results, EDDY, inp.partitions) or 0
    lat_ms = [us / 1_000 for us in load.latencies_us]
    p50 = percentile([int(x * 1_000) for x in lat_ms], 0.50)
    p99 = percentile([int(x * 1_000) for x in lat_ms], 0.99)
    bad = sum(n for status, n in load.statuses.items() if status >= 500)
    row = {
        "rate_per_s": run.options.rest_rate_per_s,
        "requests": len(lat_ms),
        "p50_ms": (p50 or 0) / 1_000,
        "p99_ms": (p99 or 0) / 1_000,
        "statuses": {str(k): v for k, v in sorted(load.statuses.items())},
        "errors": load.errors + bad,
        "ingest_per_s": round(measured.events_per_s),
        "baseline_per_s": base,
        "slowdown_pct": round((1 - measured.events_per_s / base) * 100, 1) if base else 0.0,
        "drain": measured.to_json(),
        "harness_cpu_pct": round(harness_cpu_s * 100_000 / max(1, measured.elapsed_ms)),
        "query_cpu_us_per_request": round(query_cpu_ms * 1_000 / max(1, len(lat_ms))),
    }
    run.console.print(
        f"  REST at {row['rate_per_s']}/s: p50 {row['p50_ms']:.1f} ms, p99 {row['p99_ms']:.1f} ms; "
        f"ingest {row['ingest_per_s']:,}/s vs {base:,}/s ({row['slowdown_pct']} % slower); "
        f"query process {row['query_cpu_us_per_request']} CPU µs per request"
    )
    return row


def latency(run: Run, name: str, partitions: int, rate_per_s: int) -> dict[str, Any]:
    c = BY_NAME[name]
    label = f"{name}-live-{partitions}p"
    topic = input_topic(f"{run.prefix}{label}-")
    run.kafka.create(topic, partitions)
    inp = Input(topic, partitions, 0)
    launched = start(run, c, inp, label)
    load = LiveLoad(run.options.bootstrap, topic, partitions, rate_per_s)
    reader = None
    committed = 0
    harness_cpu_s = 0.0
    try:
        if c.family == "eddy":
            _wait_ready(launched)
        reader = ResultReader(run.options.bootstrap, launched.output or "", partitions)
        load.start()
        harness_cpu_s = time.process_time()
        with run.console.status(
            f"{label}: {rate_per_s:,} readings/s for {run.options.latency_s} s…"
        ):
            end = time.monotonic() + run.options.latency_s
            while time.monotonic() < end:
                launched.proc.check_alive()
                time.sleep(0.5)
            load.stop()
            committed = run.kafka.committed(launched.group, topic, partitions)
            harness_cpu_s = time.process_time() - harness_cpu_s
            # The results of windows closed just before the stop still have to commit.
            time.sleep(3 + c.commit_interval_ms / 1_000)
    finally:
        load.stop()
        if reader is not None:
            reader.stop()
        launched.proc.stop()
    shutil.rmtree(run.dir / f"{run.app_ids[label]}-state", ignore_errors=True)
    values = latencies(load, reader) if reader is not None else []
    lag = load.produced - committed
    row = {
        "contender": name,
        "offered_per_s": rate_per_s,
        "produced": load.produced,
        "results": len(values),
        "p50_ms": percentile(values, 0.50),
        "p99_ms": percentile(values, 0.99),
        "max_ms": float(max(values)) if values else None,
        "lag_at_stop": lag,
        # The harness's producer and reader share the two cores with the contender.
        "harness_cpu_pct": round(harness_cpu_s / run.options.latency_s * 100),
        # Within two seconds of input behind when the load stopped: it kept up.
        "kept_up": lag <= 2 * rate_per_s,
        "cdf_ms": _cdf(values),
    }
    run.console.print(
        f"  latency {name:<22} p50 {row['p50_ms']} ms  p99 {row['p99_ms']} ms  "
        f"({len(values):,} results, lag {lag:,})"
    )
    run.kafka.delete([topic])
    return row


def _cdf(values: list[int], points: int = 200) -> list[float]:
    """The latency distribution at ``points`` evenly spaced quantiles (for the chart)."""
    if not values:
        return []
    ordered = sorted(values)
    return [
        float(ordered[min(len(ordered) - 1, i * len(ordered) // points)]) for i in range(points)
    ]
