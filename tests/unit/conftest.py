"""Fixtures of the query process's tests (test_query_plane.py, test_fastpath.py):
stores and reports written by hand (tests/support/queryhost.py), and the query
plane over them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from eddy.plane.backend import QueryPlane
from eddy.plane.stages import Secondaries
from tests.support.queryhost import Host, query_plane


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Host]:
    found = Host(tmp_path)
    found.publish()
    yield found
    found.close()


@pytest.fixture
def plane(host: Host, tmp_path: Path) -> Iterator[QueryPlane]:
    secondaries = Secondaries(tmp_path / "secondary")
    yield query_plane(host, tmp_path, secondaries)
    secondaries.close()
