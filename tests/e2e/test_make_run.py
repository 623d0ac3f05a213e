"""`make run` as a user runs it (``python -m tools run``): broker, room service,
PostgreSQL, worker and simulator come up; readings get rooms and window results
reach PostgreSQL; everything stops cleanly at the end of ``--duration``."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from eddy.settings import load_settings
from tests.support.kafka import read_all
from tests.support.postgres import rows_of
from tests.support.processes import free_port

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


async def test_make_run_enriches_readings_and_fills_postgres(
    tmp_path: Path, postgres_dsn: str, fresh_schema: Callable[[], str]
) -> None:
    tag = uuid.uuid4().hex[:8]
    schema = fresh_schema()
    env = {k: v for k, v in os.environ.items() if not k.startswith("EDDY_")}
    # tools/ is the repository's, not installed: importable from any directory this way.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.update(
        EDDY_APP_ID=f"run-{tag}",
        EDDY_TOPIC_PREFIX=f"run-{tag}-",  # in front of every topic, dead letters too
        EDDY_DEAD_LETTER_TOPIC="dead",
        EDDY_API_PORT=str(free_port()),
        EDDY_ROOM_SERVICE_URL=f"http://127.0.0.1:{free_port()}",
        EDDY_POSTGRES_SCHEMA=schema,
    )
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "tools", "run", "--duration", "45", "--rate", "200"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=400,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3_000:]
    assert "Traceback" not in output
    assert "sensor_rooms" in output  # the banner
    assert "postgres_sink" in output
    assert "stopped cleanly" in output
    assert_the_readme_shows_this(output, f"run-{tag}-", schema)

    settings = load_settings(topic_prefix=f"run-{tag}-", app_id=f"run-{tag}")
    enriched = await read_all(settings, settings.topic("sensor-rooms"), min_records=1)
    rooms = {orjson.loads(r.value)["room"] for r in enriched}
    assert rooms
    assert rooms <= {f"room_{n}" for n in range(8)}  # sensor_1..10 all have a room
    windows = await rows_of(postgres_dsn, schema, "sensor_window_averages")
    latest = await rows_of(postgres_dsn, schema, "sensor_latest")
    assert len(windows) > 10
    assert 0 < len(latest) <= 10


def _shape(line: str, prefix: str = "", schema: str = "eddy") -> str:
    """A line with what differs between runs taken out: numbers, the folder, this
    test's topic prefix and schema."""
    if prefix:  # the topics' prefix, then the app id it is made of
        line = line.replace(prefix, "").replace(prefix.rstrip("-"), "eddy")
    line = line.replace(f"from {schema}.", "from SCHEMA.")
    line = re.sub(r"/\S*?/\.eddy/", "HOME/.eddy/", line)
    return re.sub(r"\d+", "0", line).rstrip()


def assert_the_readme_shows_this(output: str, prefix: str, schema: str) -> None:
    """Every line of the README's `make run` sample is a line this run printed,
    but for numbers and paths: the README cannot go stale."""
    readme = (ROOT / "README.md").read_text()
    sample = readme.split("### What `make run` shows", 1)[1].split("```", 2)[1]
    printed = {_shape(line, prefix, schema) for line in output.splitlines()}
    # The test's PostgreSQL is the fixture's, so this run neither starts nor stops it.
    expected = [
        _shape(line).replace(", PostgreSQL", "")
        for line in sample.strip().splitlines()
        if not line.startswith("PostgreSQL stopped")
    ]
    missing = [line for line in expected if line not in printed]
    assert missing == [], "\n".join(missing)
