"""Shared fixtures. Broker fixtures live in tests/integration and tests/e2e."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

# CI machines are shared and slow: no flaky deadlines, more examples on request.
settings.register_profile("default", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", parent=settings.get_profile("default"), max_examples=2_000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
