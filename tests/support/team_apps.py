"""A team's own app, run as they would run it: a package in a folder outside the
repository, its topics created by ``eddy topics create``, a worker started with
``python -m eddy worker --app``, and its dead-letter topic read as they would
read it."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
from aiokafka import AIOKafkaConsumer, TopicPartition

from eddy.kafka_clients import connection_kwargs
from eddy.settings import Settings, build
from tests.support.kafka import topic_partitions
from tests.support.processes import free_port


class Worker:
    """``python -m eddy worker --app <package>.app:app``, one ingest process."""

    def __init__(self, root: Path, env: dict[str, str], log: Path, package: str) -> None:
        self.url = f"http://127.0.0.1:{env['EDDY_API_PORT']}"
        self.log_path = log
        self._log = log.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "eddy", "worker", "--app", f"{package}.app:app"],
            cwd=root,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def ready(self) -> bool:
        try:
            return httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> int:
        self.process.terminate()
        code = self.process.wait(60)
        self._log.close()
        return code


def app_env(tmp_path: Path, tag: str) -> dict[str, str]:
    """A worker's environment: topics, group and state of its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EDDY_")}
    env.update(
        EDDY_APP_ID=f"app-{tag}",
        EDDY_TOPIC_PREFIX=f"c{tag}-",
        EDDY_DEAD_LETTER_TOPIC=f"c{tag}-dead",
        EDDY_STATE_DIR=str(tmp_path / "state"),
        EDDY_PARTITIONS="3",
        EDDY_COMMIT_INTERVAL_MS="100",
        EDDY_SESSION_TIMEOUT_MS="6000",
        EDDY_WORKER_PROCESSES="1",
        EDDY_API_PORT=str(free_port()),
    )
    return env


async def user_app(
    tmp_path: Path,
    package: str,
    source: str,
    files: dict[str, str] | None = None,
    **env_vars: str,
) -> tuple[Path, dict[str, str], Settings]:
    """A team's app in a folder outside the repository, its topics created: the
    folder to run in, the worker's environment and the settings it runs with.

    Args:
        files: more modules of the package, by file name.
        env_vars: ``EDDY_*`` variables of the app's (the schema registry's URL...).
    """
    root = tmp_path / "outside"
    (root / package).mkdir(parents=True)
    (root / package / "__init__.py").write_text("")
    (root / package / "app.py").write_text(source)
    for name, text in (files or {}).items():
        (root / package / name).write_text(text)
    tag = uuid.uuid4().hex[:8]
    env = {**app_env(tmp_path, tag), **env_vars}
    settings = build(Settings, {"topic_prefix": f"c{tag}-", "dead_letter_topic": f"c{tag}-dead"})
    created = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "eddy", "topics", "create", "--app", f"{package}.app:app"],
        cwd=root, env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    return root, env, settings


class DeadLetters:
    """Reads the dead-letter topic as a user would (committed records only), noting
    when each arrived."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.seen: list[tuple[float, dict[str, str], bytes | None]] = []
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        consumer = AIOKafkaConsumer(
            **connection_kwargs(self.settings),
            group_id=None,
            isolation_level="read_committed",
            auto_offset_reset="earliest",
        )
        await consumer.start()
        count = await topic_partitions(self.settings, self.settings.dead_letters)
        consumer.assign([TopicPartition(self.settings.dead_letters, p) for p in range(count)])
        self._task = asyncio.create_task(self._read(consumer))

    async def _read(self, consumer: AIOKafkaConsumer) -> None:
        try:
            while True:
                batch = await consumer.getmany(timeout_ms=20)
                for records in batch.values():
                    for r in records:
                        headers = {name: raw.decode() for name, raw in r.headers}
                        self.seen.append((time.monotonic(), headers, r.value))
        finally:
            await consumer.stop()

    def of(self, stage: str) -> Iterator[tuple[float, dict[str, str], bytes | None]]:
        return (seen for seen in self.seen if seen[1]["eddy.pipeline"] == stage)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
