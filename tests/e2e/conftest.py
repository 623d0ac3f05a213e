"""End-to-end fixtures: the real broker; tests start worker processes themselves."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from service import localkafka


@pytest.fixture(scope="session", autouse=True)
def kafka_broker() -> Iterator[None]:
    started = localkafka.ensure_running()
    yield
    if started:
        localkafka.stop()
