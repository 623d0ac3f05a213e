"""The benchmark run: broker, inputs, every contender in turn, extra measurements, report.

Contenders run one at a time (two shared cores: anything concurrent would be
measured too), each on a fresh consumer group, state directory and output
topics, all named ``bench-<run>-...`` and deleted afterwards.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from confluent_kafka import KafkaException  # type: ignore[import-untyped]
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from bench.contenders import (
    BY_NAME,
    CONTENDERS,
    Contender,
    Input,
    Launched,
    build_kstreams,
    input_topic,
    output_topic,
)
from bench.contenders import launch as launch_contender
from bench.drain import Drain, drain
from bench.errors import BenchError
from bench.kafkaio import Kafka
from bench.verify import Verdict, verify
from bench.workload import Expected, Shape, base_ms, preload, shape_for
from eddy.paths import eddy_home

T = TypeVar("T")
# The measurements after the drains (bench.extras): Kafka's Java ceilings, Eddy EOS
# under the profiler, restore, REST during ingest, latency under live load.
EXTRAS = ("java", "profile", "restore", "rest", "latency")


@dataclass
class Options:
    readings: int
    partitions: list[int]
    contenders: list[str]
    one_partition: list[str]  # contenders also run on the 1-partition input
    cap_s: float  # longest a drain may take before it is cut short
    quick: bool
    results_dir: Path
    suite: str  # results file stem: full | quick | reduced
    bootstrap: str = "127.0.0.1:9092"
    extras: frozenset[str] = frozenset(EXTRAS)  # which of EXTRAS run after the drains
    latency_s: int = 60
    rest_rate_per_s: int = 500
    eddy_src: Path | None = None  # Eddy's source tree, if not this checkout


@dataclass
class Run:
    """Everything one invocation needs, and what it found."""

    options: Options
    console: Console
    kafka: Kafka
    tag: str = field(default_factory=lambda: uuid.uuid4().hex[:6])
    results: dict[str, Any] = field(default_factory=dict)
    launched_groups: list[str] = field(default_factory=list)
    app_ids: dict[str, str] = field(default_factory=dict)  # label -> app id of its last start

    @property
    def prefix(self) -> str:
        return f"bench-{self.tag}-"

    @property
    def dir(self) -> Path:
        return eddy_home() / "bench" / self.tag

    def app_id(self, name: str) -> str:
        return f"{self.prefix}{name}"

    def cleanup(self) -> None:
        """Delete this run's topics (ours, Quix's and Kafka Streams' internal ones)."""
        prefixes = (self.prefix, f"changelog__{self.prefix}", f"repartition__{self.prefix}")
        with contextlib.suppress(Exception):
            self.kafka.delete_prefixed(*prefixes)
        with contextlib.suppress(Exception):
            self.kafka.delete_groups(self.launched_groups)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def progress(console: Console) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )


def load_input(run: Run, partitions: int, shape: Shape | None = None) -> tuple[Input, Expected]:
    """Pre-load ``shape`` (default: the run's readings over :func:`shape_for`'s sensors)."""
    shape = shape or shape_for(run.options.readings)
    topic = input_topic(f"{run.prefix}{partitions}p-")
    run.kafka.create(topic, partitions)
    started = time.monotonic()
    with run.console.status(f"Pre-loading {shape.total:,} readings into {topic}…"):
        expected = preload(run.options.bootstrap, topic, partitions, shape, base_ms())
    if expected.late:
        raise BenchError(f"the workload has {expected.late} late readings; it must have none")
    run.console.print(
        f"Pre-loaded {expected.total:,} readings ({shape.sensors} sensors) into {topic} "
        f"in {time.monotonic() - started:.0f} s: {len(expected.windows):,} windows to close"
    )
    return Input(topic, partitions, expected.total), expected


def fresh_app_id(run: Run, label: str) -> str:
    app_id = run.app_id(label)
    if label in run.app_ids:
        # A step run again (the broker restarted): a fresh group, not the old offsets.
        app_id = f"{app_id}-{uuid.uuid4().hex[:4]}"
    run.app_ids[label] = app_id
    return app_id


def start(run: Run, c: Contender, inp: Input, label: str) -> Launched:
    app_id = fresh_app_id(run, label)
    output = output_topic(c, inp, app_id)
    if output is not None:
        # Kafka Streams never creates its output, Quix with 1 partition; made here for
        # all three alike (so a latency reader can subscribe before the first result).
        # Afresh: the Eddy contenders of one input share theirs (bench.contenders).
        run.kafka.create(output, inp.partitions)
    launched = launch_contender(
        c, inp, app_id, run.dir, run.options.bootstrap, free_port(), run.options.eddy_src
    )
    run.launched_groups.append(launched.group)
    return launched


def run_one(run: Run, c: Contender, inp: Input, expected: Expected) -> dict[str, Any]:
    """Drain ``inp`` with ``c``, then check its windows."""
    label = f"{c.name}-{inp.partitions}p"
    launched = start(run, c, inp, label)
    try:
        with progress(run.console) as bar:
            task = bar.add_task(f"{label:<28}", total=inp.records)
            measured: Drain = drain(
                run.kafka,
                launched,
                inp,
                cap_s=run.options.cap_s,
                on_progress=lambda n: bar.update(task, completed=n),
            )
        # Window results still in flight when the input is committed: at-least-once
        # contenders send results before they commit offsets, exactly-once ones in the
        # same transaction, so a short pause covers every contender's last flush.
        time.sleep(2.0 if c.windowed else 0.0)
    finally:
        launched.proc.stop()
    # A drain cut short at the time cap left windows unclosed: nothing to check.
    check = c.windowed and measured.drained
    verdict: Verdict = verify(run.kafka, launched, expected) if check else Verdict()
    row: dict[str, Any] = {
        "contender": c.name,
        "partitions": inp.partitions,
        "guarantee": c.guarantee,
        "commit_interval_ms": c.commit_interval_ms,
        **measured.to_json(),
        "correct": verdict.to_json() if check else None,
    }
    status = verdict.summary() if check else "reads only" if not c.windowed else "not checked"
    cut = "" if measured.drained else f" (cut at {run.options.cap_s:.0f} s)"
    run.console.print(
        f"  {label:<28} {measured.events_per_s:>9,.0f} events/s{cut}  "
        f"{measured.cpu_s_per_million:6.1f} CPU s/M  "
        f"{measured.peak_rss_bytes / 2**20:6.0f} MB  {status}"
    )
    if check and not verdict.ok:
        run.results.setdefault("failures", []).append(f"{label}: {verdict.summary()}")
    shutil.rmtree(run.dir / f"{run.app_ids[label]}-state", ignore_errors=True)
    return row


def broker_pid() -> int | None:
    from tools import localkafka

    return localkafka.running_pid()


def attempt(run: Run, step: Callable[[], T], name: str) -> T | None:
    """Run one step; if the broker restarted under it (a shared machine: other test
    suites restart the local broker), wait for it and run the step once more. A step
    that fails otherwise is recorded and the run goes on."""
    for tries in (1, 2):
        pid = broker_pid()
        try:
            return step()
        except (BenchError, KafkaException) as exc:
            restarted = broker_pid() != pid or not _broker_answers(run.options.bootstrap)
            if restarted and tries == 1:
                run.console.print(f"[yellow]  {name}: the broker restarted; again once[/yellow]")
                _wait_for_broker(run.options.bootstrap)
                continue
            run.console.print(f"[red]  {name}: {exc}[/red]")
            run.results.setdefault("failures", []).append(f"{name}: {exc}")
    return None


def _broker_answers(bootstrap: str) -> bool:
    from eddy.errors import EddyError
    from tools import localkafka

    try:
        localkafka.wait_until_ready(bootstrap, 5)
    except EddyError:
        return False
    return True


def _wait_for_broker(bootstrap: str, timeout_s: float = 600, pause_s: float = 5) -> None:
    from eddy.errors import EddyError
    from tools import localkafka

    time.sleep(pause_s)  # a broker on its way down still answers
    try:
        localkafka.wait_until_ready(bootstrap, timeout_s)
    except EddyError:
        raise BenchError(f"the broker did not come back in {timeout_s:.0f} s") from None


@contextlib.contextmanager
def session(options: Options, console: Console) -> Iterator[Run]:
    """A run on the local broker (started if none answers, and then stopped after);
    its topics and groups deleted on the way out."""
    from tools import localkafka  # the broker helper imports the whole service

    started_broker = localkafka.ensure_running(console)
    kafka: Kafka | None = None
    try:
        with console.status("Waiting for the broker to answer…"):
            _wait_for_broker(options.bootstrap, pause_s=0)
        kafka = Kafka(options.bootstrap)
        run = Run(options, console, kafka)
        run.dir.mkdir(parents=True, exist_ok=True)
        try:
            yield run
        finally:
            run.cleanup()
    finally:
        if kafka is not None:
            kafka.close()
        if started_broker:
            localkafka.stop(console)


def execute(options: Options, console: Console) -> dict[str, Any]:
    with session(options, console) as run:
        run.results = {
            "suite": options.suite,
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "readings": options.readings,
            "machine": machine(),
            "drains": [],
        }
        _execute(run)
    return run.results


def _execute(run: Run) -> None:
    options, console = run.options, run.console
    if any(BY_NAME[n].family == "kstreams" for n in options.contenders):
        with console.status("Building the Kafka Streams contender (mvn package)…"):
            build_kstreams()
    for partitions in options.partitions:
        inp, expected = load_input(run, partitions)
        run.results.setdefault("inputs", {})[str(partitions)] = expected.to_json()
        names = (
            options.contenders
            if partitions != 1 or len(options.partitions) == 1
            else [n for n in options.contenders if n in options.one_partition]
        )
        for name in names:
            step = partial(run_one, run, BY_NAME[name], inp, expected)
            row = attempt(run, step, name)
            if row is not None:
                run.results["drains"].append(row)
        if options.extras and partitions == max(options.partitions):
            from bench.extras import run_extras

            attempt(run, partial(run_extras, run, inp), "extras")
        run.kafka.delete([inp.topic])
        if partitions != options.partitions[-1]:
            from bench.report import write

            write(run.results, options, console)  # an interrupted run keeps this much


def machine() -> dict[str, Any]:
    import os
    import platform

    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def default_contenders() -> list[str]:
    return [c.name for c in CONTENDERS]
