"""What an agent holds beyond its state (an HTTP session, a connection pool) is
released when a replay or a test driver stops, as a worker's stop releases it:
the agent's close hook runs once, in the event loop that used the resource, also
when the replay stops on a failing line, and nothing is reported unclosed.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from eddy import App, BoundedOutOfOrderness, TestDriver, Topic

REPLAY = [sys.executable, "-m", "eddy", "replay"]

# An agent holding an aiohttp session, as agents/sensor_rooms.py does, without a
# service to ask: the session is opened by the first lookup and closed by the hook.
ROOMS_APP = """\
from pathlib import Path

import aiohttp

from eddy import App, BoundedOutOfOrderness, Topic

app = App("rooms")
READINGS = Topic("readings", key="id", timestamp="timestamp_ms")
LOCATED = Topic("located")
CLOSED = Path(__file__).with_name("closed.txt")


class Rooms:
    def __init__(self) -> None:
        self.session = None

    async def room_of(self, reading):
        if self.session is None:
            self.session = aiohttp.ClientSession()
        return {"a": "kitchen"}.get(reading["id"])

    async def close(self) -> None:
        if self.session is not None:
            await self.session.close()
        with CLOSED.open("a") as closed:
            closed.write("closed\\n")


def located(reading, room):
    if reading["id"] == "boom":
        raise ValueError("no room for boom")
    return {**reading, "room": room}


@app.define()
def rooms() -> None:
    client = Rooms()
    (
        app.stream(READINGS, watermark=BoundedOutOfOrderness(bound_ms=0))
        .enrich(client.room_of, into=located, fallback="UNKNOWN ROOM", on_close=client.close)
        .to(LOCATED)
    )
"""


def _replay(
    cwd: Path, app: str, agent: str, lines: list[str], env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m eddy replay`` as a user runs it, with no ``EDDY_*`` variable
    but those of ``env``; the output goes to stdout."""
    source = cwd / "in.jsonl"
    source.write_text("".join(f"{line}\n" for line in lines))
    clean = {k: v for k, v in os.environ.items() if not k.startswith("EDDY_")}
    return subprocess.run(
        [*REPLAY, "--app", app, "--agent", agent, "--input", str(source)],
        cwd=cwd,
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def _reading(key: str, timestamp_ms: int = 1_000) -> str:
    return json.dumps({"topic": "readings", "record": {"id": key, "timestamp_ms": timestamp_ms}})


def _nothing_unclosed(stderr: str) -> None:
    assert "Unclosed" not in stderr, stderr
    assert "ERROR" not in stderr, stderr
    assert "Traceback" not in stderr, stderr


def test_a_replay_closes_the_agents_http_session(tmp_path: Path) -> None:
    (tmp_path / "rooms.py").write_text(ROOMS_APP)
    done = _replay(tmp_path, "rooms:app", "rooms", [_reading("a"), _reading("b")])
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["value"]["room"] for line in done.stdout.splitlines()] == [
        "kitchen",
        "UNKNOWN ROOM",
    ]
    assert (tmp_path / "closed.txt").read_text() == "closed\n"  # once
    _nothing_unclosed(done.stderr)
    assert done.stderr.strip() == "replay: 2 emissions"


def test_a_replay_that_stops_on_a_failing_line_still_closes_the_session(tmp_path: Path) -> None:
    (tmp_path / "rooms.py").write_text(ROOMS_APP)
    lines = [_reading("a"), _reading("boom"), _reading("b")]
    done = _replay(tmp_path, "rooms:app", "rooms", lines)
    assert done.returncode == 2, done.stderr
    (error,) = done.stderr.strip().splitlines()
    assert error.startswith("eddy: line 2: an agent raised ValueError('no room for boom')")
    assert (tmp_path / "closed.txt").read_text() == "closed\n"
    _nothing_unclosed(done.stderr)


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A local port that accepts connections and never answers: every lookup
    times out, with no room service and no network."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield listener.getsockname()[1]


def test_the_reference_sensor_rooms_replay_closes_its_session(
    tmp_path: Path, silent_port: int
) -> None:
    record = {"sensor_id": "s1", "timestamp_ms": 1_000, "temperature": 60.0}
    line = json.dumps({"topic": "sensor-readings", "record": record})
    env = {
        "EDDY_ROOM_SERVICE_URL": f"http://127.0.0.1:{silent_port}",
        "EDDY_LOOKUP_TIMEOUT_MS": "100",
    }
    done = _replay(tmp_path, "eddy.examples.app:app", "sensor_rooms", [line], env)
    assert done.returncode == 0, done.stderr
    (out,) = done.stdout.splitlines()
    assert json.loads(out)["value"] == {**record, "room": "UNKNOWN ROOM"}
    _nothing_unclosed(done.stderr)


# -- the test driver ------------------------------------------------------------------


class Resource:
    """A resource an agent's lookups use; records the loop it was closed in."""

    def __init__(self) -> None:
        self.closed_in: list[asyncio.AbstractEventLoop] = []
        self.used_in: list[asyncio.AbstractEventLoop] = []

    async def lookup(self, value: Any) -> str:
        self.used_in.append(asyncio.get_running_loop())
        return "found"

    async def close(self) -> None:
        self.closed_in.append(asyncio.get_running_loop())


def _app(resource: Resource) -> tuple[App, Topic[Any], Topic[Any]]:
    app = App("resources")
    source = Topic("items", key="id", timestamp="ts_ms")
    sink = Topic("found")

    def into(value: dict[str, Any], answer: str) -> dict[str, Any]:
        if value["id"] == "bad":
            raise ValueError("cannot enrich bad")
        return {**value, "answer": answer}

    (
        app.stream(source, name="finder", watermark=BoundedOutOfOrderness(bound_ms=0))
        .enrich(resource.lookup, into=into, fallback="none", on_close=resource.close)
        .to(sink)
    )
    return app, source, sink


def test_the_driver_runs_the_close_hook_once_in_the_loop_that_used_the_resource() -> None:
    resource = Resource()
    app, source, sink = _app(resource)
    with TestDriver(app) as driver:
        driver.send(source, {"id": "a", "ts_ms": 1})
        assert [o.value["answer"] for o in driver.read(sink)] == ["found"]
        assert resource.closed_in == []
    assert resource.closed_in == resource.used_in[:1]
    driver.close()  # closing again does nothing
    assert len(resource.closed_in) == 1


def test_the_driver_runs_the_close_hook_when_the_agent_failed() -> None:
    resource = Resource()
    app, source, _ = _app(resource)
    with pytest.raises(ValueError, match="cannot enrich bad"), TestDriver(app) as driver:
        driver.send(source, {"id": "bad", "ts_ms": 1})
    assert resource.closed_in == resource.used_in[:1]


async def test_async_with_runs_the_close_hook_in_the_callers_loop() -> None:
    resource = Resource()
    app, source, sink = _app(resource)
    async with TestDriver(app) as driver:
        await driver.asend(source, {"id": "a", "ts_ms": 1})
        assert [o.value["answer"] for o in driver.read(sink)] == ["found"]
    assert resource.closed_in == [asyncio.get_running_loop()]


async def test_a_plain_with_around_the_async_twins_says_to_close_in_the_loop() -> None:
    resource = Resource()
    app, source, _ = _app(resource)
    driver = TestDriver(app)
    await driver.asend(source, {"id": "a", "ts_ms": 1})
    with pytest.raises(RuntimeError, match=r"async with TestDriver\(...\)"):
        driver.close()
    assert resource.closed_in == []
    assert not _exists(driver.stores()["finder"].path)  # the state is gone all the same


def _exists(path: Path) -> bool:
    return path.exists()


def test_a_close_hook_that_fails_is_logged_and_the_driver_still_closes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """As a worker's stop: the failure is said, and the rest is released."""

    async def broken() -> None:
        raise ConnectionError("the pool is gone")

    resource = Resource()
    resource.close = broken  # type: ignore[method-assign]
    app, source, _ = _app(resource)
    with TestDriver(app) as driver:
        driver.send(source, {"id": "a", "ts_ms": 1})
        state = driver.stores()["finder"].path
    (record,) = [r for r in caplog.records if r.levelname == "ERROR"]
    assert record.getMessage() == "finder: closing the pipeline's resources failed"
    assert not state.exists()
