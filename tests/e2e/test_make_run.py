"""`make run` as a user runs it and stops it.

One run with every agent: broker, room service, PostgreSQL, worker and
simulator come up, readings get rooms, window results reach PostgreSQL, and
one Ctrl-C stops it. Two more runs, stopped as soon as everything is up: by
SIGTERM to the process group, and by two Ctrl-C two seconds apart. After each
stop, within 60 s nothing the run started runs (its ports are closed, no
process of its session or carrying its mark is left), and its output says how
the stop went, snapshot included.

`make run` stops the broker and PostgreSQL only if it started them, so the
module stops the suite's first and starts them again at the end, once for all
three runs; the runs use a broker of their own with empty data (see
``run_home``), which starts in seconds."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import orjson
import pytest

from eddy.paths import eddy_home
from eddy.pipeline.pgmigrate import quote
from eddy.settings import load_settings
from tests.support.kafka import read_all
from tests.support.postgres import rows_of
from tests.support.processes import free_port
from tools import localkafka, postgres
from tools.localkafka.config import layout as kafka_layout

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
MARK = "MAKE_RUN_STOP_MARK"  # in every process the run starts: their environment inherits it
BROKER_PORT = 9092
POSTGRES_PORT = 5433
STOPPED_WITHIN_S = 60.0
BANNER_END = "Ctrl-C stops everything this started."


@dataclass
class RunHome:
    """The runs' EDDY_HOME, and the PostgreSQL schemas they made (dropped at the end)."""

    path: Path
    schemas: list[str] = field(default_factory=list)


@pytest.fixture(scope="module")
def run_home() -> Iterator[RunHome]:
    """The runs' EDDY_HOME, with the suite's broker and PostgreSQL stopped (they are
    started again afterwards). Its broker's data starts empty, so it starts in
    seconds (the suite's holds thousands of partitions); the jars and PostgreSQL
    are the suite's. In /tmp and world-readable: PostgreSQL's user walks the path."""
    if localkafka.status().external:
        pytest.skip("a broker that is not eddy's answers on 9092: make run would not own it")
    home = RunHome(Path(tempfile.mkdtemp(prefix="eddy-make-run-")))
    home.path.chmod(0o755)
    run_kafka = kafka_layout(home=home.path / "kafka")
    run_kafka.version_dir.mkdir(parents=True)
    run_kafka.lib.symlink_to(localkafka.fetch())
    # The suite's PostgreSQL folder, made if no test has started PostgreSQL yet (a
    # fresh clone): its first start, through the link, creates its data there.
    suite_postgres = eddy_home() / "postgres"
    suite_postgres.mkdir(parents=True, exist_ok=True)
    (home.path / "postgres").symlink_to(suite_postgres)
    broker_was = localkafka.is_running()
    postgres_was = postgres.status().running
    localkafka.stop()
    postgres.stop()
    try:
        yield home
    finally:
        if broker_was:
            localkafka.ensure_running()
        if home.schemas:
            started = postgres.ensure_running()
            loop = asyncio.new_event_loop()  # not asyncio.run: it unsets the suite's loop
            try:
                loop.run_until_complete(_drop_schemas(home.schemas))
            finally:
                loop.close()
            if started and not postgres_was:
                postgres.stop()
        elif postgres_was:
            postgres.ensure_running()
        shutil.rmtree(home.path, ignore_errors=True)


async def _drop_schemas(schemas: list[str]) -> None:
    connection = await asyncpg.connect(postgres.dsn())
    try:
        for schema in schemas:
            await connection.execute(f"DROP SCHEMA IF EXISTS {quote(schema)} CASCADE")
    finally:
        await connection.close()


class MakeRun:
    """`make run` in a session of its own, as a terminal would run it."""

    def __init__(self, home: Path, log: Path, schema: str, agents: str | None = None) -> None:
        self.tag = uuid.uuid4().hex[:8]
        self.prefix = f"stop-{self.tag}-"  # in front of every topic, dead letters too
        self.api_port, self.rooms_port = free_port(), free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("EDDY_")}
        env.update(
            {MARK: self.tag},
            EDDY_HOME=str(home),
            EDDY_APP_ID=f"stop-{self.tag}",
            EDDY_TOPIC_PREFIX=self.prefix,
            EDDY_DEAD_LETTER_TOPIC="dead",
            EDDY_API_PORT=str(self.api_port),
            EDDY_ROOM_SERVICE_URL=f"http://127.0.0.1:{self.rooms_port}",
            EDDY_POSTGRES_SCHEMA=schema,
        )
        if agents is not None:
            env["EDDY_AGENTS"] = agents
        self.log = log
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                ["make", "--no-print-directory", "-C", str(ROOT), "run", "DURATION=600"],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.session = self.process.pid

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, text: str, timeout_s: float = 300.0) -> None:
        deadline = time.monotonic() + timeout_s
        while text not in self.output():
            assert self.process.poll() is None, f"make run exited:\n{self.output()[-3_000:]}"
            assert time.monotonic() < deadline, f"no {text!r} yet:\n{self.output()[-3_000:]}"
            time.sleep(0.2)

    def signal_group(self, sig: int) -> None:
        """`kill -SIG -- -PGID`: make and the launcher both receive it."""
        os.killpg(self.session, sig)

    def left_behind(self) -> list[str]:
        """Processes of its session, or carrying its mark, still alive."""
        left = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                environ = (entry / "environ").read_bytes()
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue  # gone meanwhile, or not ours to read
            state, group, session = stat[0], int(stat[2]), int(stat[3])
            marked = f"{MARK}={self.tag}".encode() in environ.split(b"\0")
            if state != "Z" and (marked or self.session in (group, session)):
                left.append(f"{entry.name}: {command[:200]}")
        return left

    def kill_leftovers(self) -> None:
        with_pids = [int(line.split(":")[0]) for line in self.left_behind()]
        for pid in with_pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def stop_and_check(self, signals: Sequence[int]) -> tuple[str, int | None]:
        """Send ``signals`` (2 s apart), assert that within 60 s its ports are closed
        and no process of it is left; its output and exit status."""
        for n, sig in enumerate(signals):
            if n:
                time.sleep(2.0)  # the spec: two Ctrl-C two seconds apart
            self.signal_group(sig)
        open_ports, left, elapsed_s = wait_until_gone(self)
        output = self.output()
        assert open_ports == [], f"{open_ports} still open after {elapsed_s:.0f} s:\n{output}"
        assert left == [], "\n".join(["left running:", *left, output])
        code = self.process.wait(5)
        assert "Traceback" not in output
        assert "stopping (press Ctrl-C again to force)" in output
        assert "stopping: simulator, worker, rooms, broker, PostgreSQL" in output
        assert "Kafka stopped" in output
        assert "PostgreSQL stopped" in output
        return output, code


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1.0)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def wait_until_gone(run: MakeRun) -> tuple[list[int], list[str], float]:
    """The ports still open and the processes left, once they are none or after 60 s."""
    ports = [run.api_port, run.rooms_port, BROKER_PORT, POSTGRES_PORT]
    started = time.monotonic()
    while True:
        open_ports = [port for port in ports if port_open(port)]
        left = run.left_behind()
        elapsed = time.monotonic() - started
        if (not open_ports and not left) or elapsed > STOPPED_WITHIN_S:
            return open_ports, left, elapsed
        time.sleep(0.2)


def assert_stopped_cleanly(output: str, code: int | None, sig: int) -> None:
    """One signal: make, itself sent it too, may end by it once its child has
    (as it does for a Ctrl-C at a terminal); the launcher's own verdict is its
    last line."""
    assert code in (0, -sig), output
    assert "stopped cleanly" in output
    assert_the_snapshot_is_complete(output)


def assert_the_snapshot_is_complete(output: str) -> None:
    taken = [line for line in output.splitlines() if line.startswith("snapshot ")]
    assert len(taken) == 1, output
    assert "incomplete" not in taken[0], output
    assert " rows): " in taken[0], output


async def test_make_run_enriches_readings_fills_postgres_and_stops_on_one_ctrl_c(
    run_home: RunHome, tmp_path: Path
) -> None:
    schema = f"test_{uuid.uuid4().hex[:12]}"
    run_home.schemas.append(schema)
    run = MakeRun(run_home.path, tmp_path / "make-run.log", schema)  # every agent
    try:
        await asyncio.to_thread(run.wait_for, BANNER_END)
        settings = load_settings(topic_prefix=run.prefix, app_id=run.prefix.rstrip("-"))
        # Read while the first windows close (about 15 s), not after.
        (windows, latest), enriched = await asyncio.gather(
            rows_once_windows_close(run, schema),
            read_all(settings, settings.topic("sensor-rooms"), min_records=1, timeout_s=10.0),
        )
        assert windows
        assert 0 < len(latest) <= 10  # one row per sensor
        rooms = {orjson.loads(r.value)["room"] for r in enriched}
        assert rooms
        assert rooms <= {f"room_{n}" for n in range(8)}  # sensor_1..10 all have a room
        output, code = await asyncio.to_thread(run.stop_and_check, [signal.SIGINT])
    finally:
        run.kill_leftovers()
    assert_stopped_cleanly(output, code, signal.SIGINT)
    assert "sensor_rooms" in output  # the banner
    assert "postgres_sink" in output
    assert_the_readme_shows_this(output, run.prefix, schema, run_home.path)


async def rows_once_windows_close(
    run: MakeRun, schema: str, timeout_s: float = 120.0
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The sink's tables once the first windows reached them (or at the timeout): the
    first close about ten seconds after the banner."""
    deadline = time.monotonic() + timeout_s
    windows: list[tuple[Any, ...]] = []
    latest: list[tuple[Any, ...]] = []
    while time.monotonic() < deadline:
        assert run.process.poll() is None, f"make run exited:\n{run.output()[-3_000:]}"
        with contextlib.suppress(asyncpg.PostgresError):  # tables not made yet
            windows = await rows_of(postgres.dsn(), schema, "sensor_window_averages")
            latest = await rows_of(postgres.dsn(), schema, "sensor_latest")
        if windows and latest:
            break
        await asyncio.sleep(1.0)
    return windows, latest


STOPS = {
    "one SIGTERM": [signal.SIGTERM],
    "two Ctrl-C 2 s apart": [signal.SIGINT, signal.SIGINT],
}


@pytest.mark.parametrize("stop", list(STOPS))
def test_make_run_leaves_nothing_running(stop: str, run_home: RunHome, tmp_path: Path) -> None:
    # Just the agents that need the room service and PostgreSQL, so it has every
    # kind of child `make run` has and is up sooner; sensor_alerts because the
    # simulator's sensor scenario writes its thresholds topic.
    agents = "sensor_rooms,postgres_sink,sensor_alerts"
    run = MakeRun(run_home.path, tmp_path / "make-run.log", "make_run_stop", agents)
    try:
        run.wait_for(BANNER_END)  # the banner's last line: everything is up
        output, code = run.stop_and_check(STOPS[stop])
    finally:
        run.kill_leftovers()
    if len(STOPS[stop]) == 1:
        assert_stopped_cleanly(output, code, STOPS[stop][0])
    else:
        assert code != 0, output
        assert "forcing the stop: killing " in output
        assert "stopped by force" in output
        # Forced during the snapshot, or after it: either way the output says.
        if "no snapshot at exit: the stop was forced" not in output:
            assert_the_snapshot_is_complete(output)


def _shape(line: str, prefix: str = "", schema: str = "eddy", home: Path | None = None) -> str:
    """A line with what differs between runs taken out: numbers, the folder, this
    test's topic prefix and schema."""
    if prefix:  # the topics' prefix, then the app id it is made of
        line = line.replace(prefix, "").replace(prefix.rstrip("-"), "eddy")
    if home is not None:
        line = line.replace(f"{home}/", "HOME/.eddy/")
    line = line.replace(f"from {schema}.", "from SCHEMA.")
    line = re.sub(r"/\S*?/\.eddy/", "HOME/.eddy/", line)
    return re.sub(r"\d+", "0", line).rstrip()


def assert_the_readme_shows_this(output: str, prefix: str, schema: str, home: Path) -> None:
    """Every line of the README's `make run` sample is a line this run printed,
    but for numbers and paths: the README cannot go stale."""
    readme = (ROOT / "README.md").read_text()
    sample = readme.split("### What `make run` shows", 1)[1].split("```", 2)[1]
    printed = {_shape(line, prefix, schema, home) for line in output.splitlines()}
    # The README's run found a broker running; this one started its own.
    expected = [
        _shape(line).replace("rooms, PostgreSQL", "rooms, broker, PostgreSQL")
        for line in sample.strip().splitlines()
    ]
    missing = [line for line in expected if line not in printed]
    assert missing == [], "\n".join(missing)
