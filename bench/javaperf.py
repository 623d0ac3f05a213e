"""Kafka's own ceilings: ``ConsumerPerformance`` and ``ProducerPerformance`` (Java).

They run from the local broker's jars (``make kafka-jars``), so they are the
clients of the broker's own version. The consumer reads the same pre-loaded
topic; its rate is Kafka's ``fetch.nMsg.sec`` (the group join is left out, as it
is for every contender). The producer writes 150-byte records, as many as the
input holds, to a fresh topic with the input's partitions, ``acks=all`` and
idempotence on, which is how Eddy's own producers write.
"""

from __future__ import annotations

import re
import time
from typing import Any

from bench.contenders import Input
from bench.errors import BenchError
from bench.kafkaio import Kafka
from bench.procs import Proc

CONSUMER = "org.apache.kafka.tools.ConsumerPerformance"
PRODUCER = "org.apache.kafka.tools.ProducerPerformance"
RECORD_BYTES = 150
TIMEOUT_S = 600.0


def _command(main_class: str, *args: str) -> list[str]:
    from tools import localkafka

    return localkafka.tool_command(main_class, *args)


def _run(name: str, argv: list[str], log_dir: Any) -> tuple[str, int, int]:
    """Run a tool to the end: its output, CPU ms and peak RSS bytes."""
    proc = Proc(name, argv, log_dir / f"{name}.log")
    cpu = peak = 0
    deadline = time.monotonic() + TIMEOUT_S
    while proc.alive():
        cpu = max(cpu, proc.cpu_ms())
        peak = max(peak, proc.peak_rss_bytes())
        if time.monotonic() > deadline:
            proc.stop(5)
            raise BenchError(f"{name} did not finish in {TIMEOUT_S:.0f} s")
        time.sleep(0.1)
    code = proc.wait(5)
    text = proc.log_path.read_text(errors="replace")
    if code != 0:
        raise BenchError(f"{name} exited with {code}:\n{proc.tail()}")
    return text, cpu, peak


def consumer_perf(inp: Input, bootstrap: str, group: str, log_dir: Any) -> dict[str, Any]:
    argv = _command(
        CONSUMER, "--bootstrap-server", bootstrap, "--topic", inp.topic,
        "--messages", str(inp.records), "--group", group, "--timeout", "60000",
    )  # fmt: skip
    text, cpu, peak = _run("kafka-consumer-perf", argv, log_dir)
    # header: start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg,
    # nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
    rows = [line for line in text.splitlines() if re.match(r"^\d{4}-\d\d-\d\d", line)]
    if not rows:
        raise BenchError(f"ConsumerPerformance printed no result:\n{text[-1_000:]}")
    fields = [f.strip() for f in rows[-1].split(",")]
    consumed = int(fields[4])
    return {
        "tool": "kafka ConsumerPerformance",
        "partitions": inp.partitions,
        "events_per_s": round(float(fields[9])),
        "records": consumed,
        "cpu_s_per_million": round(cpu / consumed * 1_000, 2) if consumed else None,
        "peak_rss_mb": round(peak / 2**20, 1),
        "note": "fetch.nMsg.sec; CPU includes JVM start-up",
    }


def producer_perf(
    kafka: Kafka, inp: Input, bootstrap: str, topic: str, log_dir: Any
) -> dict[str, Any]:
    kafka.create(topic, inp.partitions)
    try:
        argv = _command(
            PRODUCER, "--topic", topic, "--num-records", str(inp.records),
            "--record-size", str(RECORD_BYTES), "--throughput", "-1",
            "--producer-props", f"bootstrap.servers={bootstrap}", "acks=all",
            "enable.idempotence=true", "linger.ms=5", "batch.size=262144",
        )  # fmt: skip
        text, cpu, peak = _run("kafka-producer-perf", argv, log_dir)
    finally:
        kafka.delete([topic])
    match = re.search(
        r"(\d+) records sent, ([\d.]+) records/sec .*?([\d.]+) ms avg latency.*?"
        r"(\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th",
        text,
    )
    if match is None:
        raise BenchError(f"ProducerPerformance printed no summary:\n{text[-1_000:]}")
    sent = int(match.group(1))
    return {
        "tool": "kafka ProducerPerformance",
        "partitions": inp.partitions,
        "events_per_s": round(float(match.group(2))),
        "records": sent,
        "cpu_s_per_million": round(cpu / sent * 1_000, 2) if sent else None,
        "peak_rss_mb": round(peak / 2**20, 1),
        "produce_p50_ms": int(match.group(4)),
        "produce_p99_ms": int(match.group(6)),
        "note": f"{RECORD_BYTES} B records, acks=all; CPU includes JVM start-up",
    }
