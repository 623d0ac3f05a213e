"""Shared fixtures. Broker fixtures live in tests/integration and tests/e2e."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# CI machines are shared and slow: no flaky deadlines, more examples on request.
settings.register_profile("default", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", parent=settings.get_profile("default"), max_examples=2_000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that needs a server (the broker, the registry, PostgreSQL, Spark,
    fixed ports) runs in one group: under ``pytest -n 2 --dist loadgroup`` (make test)
    they run one at a time on one worker, as they must (one broker owns port 9092),
    while the other worker runs the unit tests."""
    unit = Path(__file__).parent / "unit"
    for item in items:
        if unit not in item.path.parents:
            item.add_marker(pytest.mark.xdist_group("servers"))
