"""The session's broker: the one `make test` started, or one started (and stopped) here."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tools import localkafka


@pytest.fixture(scope="session", autouse=True)
def kafka_broker() -> Iterator[None]:
    started = localkafka.ensure_running()
    yield
    if started:
        localkafka.stop()
