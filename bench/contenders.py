"""Who runs in the benchmark, and how each one is started on an input topic.

Every contender is a separate process started the way its users start it, reads
the same pre-loaded topic from the beginning as a consumer group, and commits
its offsets; the harness watches those commits (:mod:`bench.drain`). What each
one writes is read back and checked against the recomputation
(:mod:`bench.verify`).

Eddy runs the reference app's ``sensor_averages`` agent (``EDDY_AGENTS``), whose
topics have fixed names behind ``EDDY_TOPIC_PREFIX``: an input is therefore
named ``<prefix>sensor-readings`` (:func:`input_topic`), and every Eddy contender
on it runs with that prefix, writing ``<prefix>sensor-averages``, which the
harness makes afresh before each one (:func:`output_topic`).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from bench.errors import BenchError
from bench.procs import Proc
from eddy.examples.topics import AVERAGES, LATE_READINGS, READINGS
from eddy.plane.status import reports_dir

KSTREAMS_DIR = Path(__file__).parent / "kstreams"
ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Contender:
    name: str
    family: str  # ceiling | eddy | faust | quix | kstreams
    guarantee: str = "at_least_once"  # or exactly_once
    commit_interval_ms: int = 100
    mode: str = ""  # ceilings: consume | json
    # Eddy's ingest processes, Kafka Streams' stream threads; 0: one per core.
    parallelism: int = 1

    @property
    def windowed(self) -> bool:
        """Whether it computes the windows (ceilings only read)."""
        return self.family != "ceiling"


CONTENDERS = [
    Contender("aiokafka-consume", "ceiling", mode="consume"),
    Contender("aiokafka-json", "ceiling", mode="json"),
    Contender("eddy-alos-100ms", "eddy", "at_least_once", 100),
    Contender("eddy-eos-100ms", "eddy", "exactly_once", 100),
    Contender("eddy-eos-1s", "eddy", "exactly_once", 1_000),
    # Faust's own default commit interval (2.8 s), at-least-once: its usual set-up.
    Contender("faust-alos", "faust", "at_least_once", 2_800),
    Contender("quix-alos-100ms", "quix", "at_least_once", 100),
    Contender("quix-eos-100ms", "quix", "exactly_once", 100),
    Contender("kstreams-alos-100ms", "kstreams", "at_least_once", 100),
    Contender("kstreams-eos-100ms", "kstreams", "exactly_once", 100),
    # The whole machine: Eddy's `eddy worker` default, Kafka Streams with a stream
    # thread per core.
    Contender("eddy-eos-100ms-all-cores", "eddy", "exactly_once", 100, parallelism=0),
    Contender("kstreams-eos-100ms-all-cores", "kstreams", "exactly_once", 100, parallelism=0),
]


def cores() -> int:
    """The cores this process may run on: what "all cores" means in a run."""
    return len(os.sched_getaffinity(0))


def parallelism_of(c: Contender) -> int:
    return c.parallelism or cores()


BY_NAME = {c.name: c for c in CONTENDERS}


@dataclass(frozen=True)
class Input:
    topic: str
    partitions: int
    records: int


@dataclass
class Launched:
    """A running contender: its process and where to look for its progress and output."""

    contender: Contender
    proc: Proc
    group: str
    output: str | None  # topic of window results (JSON), if any
    changelog: str | None = None  # Faust: its table changelog holds the results
    api_port: int | None = None


def input_topic(prefix: str) -> str:
    """The name of an input topic under ``prefix``: Eddy reads it with
    ``EDDY_TOPIC_PREFIX=prefix`` (the others read any topic)."""
    return f"{prefix}{READINGS.name}"


def eddy_prefix(inp: Input) -> str:
    """The topic prefix under which Eddy's ``sensor_averages`` reads ``inp``."""
    prefix, found, rest = inp.topic.rpartition(READINGS.name)
    if not found or rest:
        raise BenchError(f"input {inp.topic}: Eddy reads only topics named *{READINGS.name}")
    return prefix


def output_topic(c: Contender, inp: Input, app_id: str) -> str | None:
    """The topic of ``c``'s window results on ``inp`` (None: Faust, the ceilings).

    Eddy's is shared by the Eddy contenders of one input (they run one at a time):
    made afresh before each, it holds only the results of the one that runs.
    """
    if c.family == "eddy":
        return f"{eddy_prefix(inp)}{AVERAGES.name}"
    if c.family in ("quix", "kstreams"):
        return f"{app_id}-averages"
    return None


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EDDY_", "BENCH_"))}
    env.update(extra)
    return env


def before_agents(eddy_src: Path | None) -> bool:
    """Whether ``eddy_src`` is a tree from before the agent API (no ``eddy.examples.app``):
    its workers take ``EDDY_PIPELINES`` and a topic name per setting."""
    return eddy_src is not None and not (eddy_src / "agents" / "app.py").exists()


def has_query_plane(eddy_src: Path | None) -> bool:
    """Whether ``eddy_src`` (None: this checkout) runs ``eddy worker`` as ingest
    processes behind a query process (and so knows ``EDDY_WORKER_PROCESSES``)."""
    return eddy_src is None or (eddy_src / "service" / "plane").is_dir()


def eddy_package(eddy_src: Path | None, env: dict[str, str]) -> str:
    """The package ``python -m`` runs in ``eddy_src``: ``eddy`` (from its ``src/``,
    put first on ``env``'s path), or ``service`` in a tree from before the package
    had its own name."""
    if eddy_src is None:
        return "eddy"
    if (eddy_src / "src" / "eddy").exists():
        env["PYTHONPATH"] = str(eddy_src / "src")
        return "eddy"
    return "service"


def eddy_env(
    c: Contender,
    inp: Input,
    app_id: str,
    state_dir: Path,
    api_port: int,
    bootstrap: str,
    legacy: bool = False,
    query_plane: bool = True,
) -> dict[str, str]:
    """A worker running ``sensor_averages`` on ``inp`` (``legacy``: a tree from before
    the agent API, see :func:`before_agents`; same topics, older variables).
    ``query_plane``: the tree has one (:func:`has_query_plane`); it runs the
    contender's ingest processes (one, as workers always ran, unless it is an
    all-cores contender), so single-process drains compare across trees."""
    prefix = eddy_prefix(inp)
    topics = (
        {
            "EDDY_PIPELINES": "sensor_averages",
            "EDDY_READINGS_TOPIC": inp.topic,
            "EDDY_AVERAGES_TOPIC": f"{prefix}{AVERAGES.name}",
            "EDDY_LATE_TOPIC": f"{prefix}{LATE_READINGS.name}",
            "EDDY_DEAD_LETTER_TOPIC": f"{prefix}dead-letters",
            "EDDY_TOPIC_PREFIX": f"{app_id}-",
        }
        if legacy
        else {"EDDY_AGENTS": "sensor_averages", "EDDY_TOPIC_PREFIX": prefix}
    )
    return _clean_env(
        **topics,
        EDDY_BOOTSTRAP_SERVERS=bootstrap,
        EDDY_APP_ID=app_id,
        EDDY_PARTITIONS=str(inp.partitions),
        EDDY_STATE_DIR=str(state_dir),
        EDDY_PROCESSING_GUARANTEE=c.guarantee,
        EDDY_COMMIT_INTERVAL_MS=str(c.commit_interval_ms),
        EDDY_NUM_STANDBY_REPLICAS="0",  # one worker: nobody to keep a standby
        EDDY_API_PORT=str(api_port),
        EDDY_LOG_LEVEL="INFO",
        **({"EDDY_WORKER_PROCESSES": str(parallelism_of(c))} if query_plane else {}),
    )


def profile_reports(state: Path) -> Path:
    """Where a profiled ingest process writes its reports: where ``eddy worker``
    would have its ingest processes write them (shared memory, when there is one),
    so that the profile shows what writing them costs a worker."""
    return reports_dir(state / ".query")


def launch(
    c: Contender,
    inp: Input,
    app_id: str,
    run_dir: Path,
    bootstrap: str,
    api_port: int,
    eddy_src: Path | None = None,
    profile_to: Path | None = None,
) -> Launched:
    """Start ``c`` on ``inp``; ``app_id`` (unique per run) names its group and topics.

    ``eddy_src``: run Eddy's worker from another source tree (``python -m`` imports
    from the working directory), e.g. a ``git archive`` of the commit to measure.
    ``profile_to``: run Eddy under pyinstrument, its text report written there.
    """
    log = run_dir / f"{app_id}.log"
    state = run_dir / f"{app_id}-state"
    py = sys.executable
    if c.family == "ceiling":
        argv = [py, "-m", "bench.ceiling", "--bootstrap", bootstrap, "--topic", inp.topic]
        argv += ["--partitions", str(inp.partitions), "--group", app_id, "--mode", c.mode]
        argv += ["--commit-interval-ms", str(c.commit_interval_ms)]
        return Launched(c, Proc(c.name, argv, log, _clean_env(), ROOT), app_id, None)
    if c.family == "eddy":
        env = eddy_env(
            c, inp, app_id, state, api_port, bootstrap, before_agents(eddy_src),
            has_query_plane(eddy_src),
        )  # fmt: skip
        package = eddy_package(eddy_src, env)
        argv = [py, "-m", package, "worker"]
        if profile_to is not None:
            if has_query_plane(eddy_src):
                # The ingest process alone, its own API on api_port: `eddy worker`
                # would put the query process under the profiler instead.
                argv = [py, "-m", f"{package}.plane.ingest", "--index", "0"]
                argv += ["--status-dir", str(profile_reports(state))]
                argv += ["--parent-pid", str(os.getpid())]
            # A statistical profiler (1 ms samples) rather than cProfile: it leaves the
            # per-call costs of a hot loop of small functions undistorted.
            argv[1:1] = ["-m", "pyinstrument", "-r", "text", "-o", str(profile_to)]
        proc = Proc(c.name, argv, log, env, eddy_src or ROOT)
        output = output_topic(c, inp, app_id)
        return Launched(c, proc, f"{app_id}.sensor_averages", output, api_port=api_port)
    if c.family == "faust":
        env = _clean_env(
            BENCH_FAUST_BOOTSTRAP=bootstrap,
            BENCH_FAUST_APP_ID=app_id,
            BENCH_FAUST_INPUT=inp.topic,
            BENCH_FAUST_PARTITIONS=str(inp.partitions),
            BENCH_FAUST_GUARANTEE=c.guarantee,
            BENCH_FAUST_COMMIT_INTERVAL_S=str(c.commit_interval_ms / 1_000),
            BENCH_FAUST_DATA_DIR=str(state),
        )
        argv = [py, "-m", "bench.faust_app", "worker", "--loglevel", "warn"]
        proc = Proc(c.name, argv, log, env, ROOT)
        return Launched(c, proc, app_id, None, changelog=f"{app_id}-averages-changelog")
    output = f"{app_id}-averages"  # output_topic(): Quix and Kafka Streams
    if c.family == "quix":
        argv = [py, "-m", "bench.quix_app", "--bootstrap", bootstrap, "--input", inp.topic]
        argv += ["--output", output, "--group", app_id, "--state-dir", str(state)]
        argv += ["--guarantee", c.guarantee.replace("_", "-")]
        argv += ["--commit-interval-ms", str(c.commit_interval_ms)]
        return Launched(c, Proc(c.name, argv, log, _clean_env(), ROOT), app_id, output)
    if c.family == "kstreams":
        classpath = f"{KSTREAMS_DIR / 'target' / 'classes'}:{KSTREAMS_DIR / 'target' / 'lib'}/*"
        argv = [
            "java",
            "-Xmx1g",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-cp",
            classpath,
            "eddy.bench.Averages",
            bootstrap,
            inp.topic,
        ]
        argv += [output, app_id, str(state), c.guarantee, str(c.commit_interval_ms)]
        argv += [str(parallelism_of(c))]
        return Launched(c, Proc(c.name, argv, log, _clean_env(), ROOT), app_id, output)
    raise BenchError(f"unknown contender family {c.family}")


def build_kstreams() -> None:
    """``mvn package`` the Kafka Streams contender (a no-op when it is up to date)."""
    sources = [*KSTREAMS_DIR.rglob("*.java"), KSTREAMS_DIR / "pom.xml"]
    built = KSTREAMS_DIR / "target" / "classes" / "eddy" / "bench" / "Averages.class"
    lib = KSTREAMS_DIR / "target" / "lib"
    if built.exists() and lib.is_dir():
        newest = max(p.stat().st_mtime for p in sources)
        if built.stat().st_mtime >= newest:
            return
    try:
        result = subprocess.run(
            ["mvn", "-q", "-B", "package", "-DskipTests"],
            cwd=KSTREAMS_DIR,
            capture_output=True,
            text=True,
            timeout=900,
        )
    except FileNotFoundError:
        raise BenchError("Kafka Streams contender: mvn not found (install Maven)") from None
    except subprocess.TimeoutExpired:
        raise BenchError("Kafka Streams contender: mvn package took over 15 min") from None
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).splitlines()[-15:])
        raise BenchError(f"Kafka Streams contender: mvn package failed:\n{tail}")
