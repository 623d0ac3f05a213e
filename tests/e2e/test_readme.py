"""The README's agent, as a newcomer follows it: its code block saved as
``clicks.py`` in a folder outside the repository, then the README's own shell
lines run one by one on the real broker (topics, a worker, two records sent
with ``eddy send``), and the query it shows answers the window the README's
test expects. Only the environment differs: a topic prefix and app id of its
own, so reruns on one broker never meet."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import uuid
from pathlib import Path
from typing import IO

import httpx
import orjson
import pytest

from tests.support.kafka import wait_until
from tests.support.processes import free_port

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


def readme_blocks(language: str) -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(rf"```{language}[^\n]*\n(.*?)```", text, flags=re.DOTALL)


def the_agent() -> str:
    (block,) = [b for b in readme_blocks("python") if 'App("clicks")' in b]
    return block


def the_commands() -> list[str]:
    (block,) = [b for b in readme_blocks("bash") if "--app clicks:app" in b]
    return [line.strip() for line in block.splitlines() if line.strip()]


def start(line: str, cwd: Path, env: dict[str, str], log: IO[bytes]) -> subprocess.Popen[bytes]:
    """A line the README runs in the background (``... &``)."""
    return subprocess.Popen(shlex.split(line), cwd=cwd, env=env, stdout=log, stderr=log)


def run(line: str, cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run(
        ["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"{line}\n{done.stdout}\n{done.stderr}"
    return done.stdout


async def test_the_readme_agent_runs_as_the_readme_says(tmp_path: Path) -> None:
    folder = tmp_path / "newcomer"
    folder.mkdir()
    (folder / "clicks.py").write_text(the_agent())
    tag = uuid.uuid4().hex[:8]
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("EDDY_")}
    env.update(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}",
        EDDY_APP_ID=f"readme-{tag}",
        EDDY_TOPIC_PREFIX=f"readme-{tag}-",
        EDDY_HOME=str(tmp_path / "home"),
        EDDY_API_PORT=str(port),
    )
    commands = the_commands()
    assert commands[0] == "source .venv/bin/activate"  # the repository's venv: PATH above
    worker: subprocess.Popen[bytes] | None = None
    log = (tmp_path / "worker.log").open("wb")
    answer = ""
    try:
        for line in commands[1:]:
            if line.endswith("&"):
                worker = start(line.rstrip("& "), folder, env, log)
                await wait_until(lambda: _ready(port), timeout_s=120)
            elif line.startswith("curl"):
                query = line.replace("localhost:8000", f"localhost:{port}")
                answer = await _first_window(query, folder, env)
            else:
                sent = run(line, folder, env)
                if line.startswith("eddy send"):
                    assert set(orjson.loads(sent)) == {"topic", "partition", "offset"}
    finally:
        if worker is not None:
            worker.terminate()
            worker.wait(30)
        log.close()
    windows = orjson.loads(answer)["windows"]
    assert [(w["user"], w["window_start_ms"], w["value"]) for w in windows] == [("ann", 0, 1)]


def _ready(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


async def _first_window(query: str, folder: Path, env: dict[str, str]) -> str:
    """The README's curl, repeated until ann's first minute has closed (the
    worker commits every 100 ms, and a query shows committed state only)."""
    found = ""

    def closed() -> bool:
        nonlocal found
        done = subprocess.run(["bash", "-c", query], cwd=folder, env=env, capture_output=True)
        found = done.stdout.decode()
        return done.returncode == 0 and '"windows":[{' in found.replace(" ", "")

    await wait_until(closed, timeout_s=60)
    return found
