"""Integration fixtures: the real local Kafka broker, started if needed."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from eddy.settings import Settings
from eddy.worker import Worker
from tests.support.broker import kafka_broker  # noqa: F401  (autouse, session scope)
from tests.support.kafka import unique_settings


@pytest.fixture
def settings(tmp_path: Path, request: pytest.FixtureRequest) -> Settings:
    """Fresh topics and state per test; parametrize indirectly with a guarantee, or
    with other settings' values."""
    param = getattr(request, "param", "exactly_once")
    overrides = {"processing_guarantee": param} if isinstance(param, str) else param
    return unique_settings(tmp_path, **overrides)


@pytest.fixture
async def worker(settings: Settings) -> AsyncIterator[Worker]:
    """A worker in this event loop, started and stopped around the test."""
    worker = Worker(settings)
    await worker.start()
    try:
        yield worker
    finally:
        await worker.stop()
