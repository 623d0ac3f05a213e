"""Integration fixtures: the real local Kafka broker, started if needed."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from service import localkafka
from service.settings import Settings
from service.worker import Worker
from tests.support.kafka import unique_settings


@pytest.fixture(scope="session", autouse=True)
def kafka_broker() -> Iterator[None]:
    """The broker `make test` started, or one started here (and stopped after)."""
    started = localkafka.ensure_running()
    yield
    if started:
        localkafka.stop()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return unique_settings(tmp_path)


@pytest.fixture
async def worker(settings: Settings) -> AsyncIterator[Worker]:
    """A worker in this event loop, started and stopped around the test."""
    worker = Worker(settings)
    await worker.start()
    try:
        yield worker
    finally:
        await worker.stop()
