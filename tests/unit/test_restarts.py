"""Restart strategies: when a failure restarts a partition, when it stops the worker,
and when a record counts as poison."""

from __future__ import annotations

import pytest

from eddy.runtime.restarts import RecordFailedError, RestartPolicy, RestartsExhaustedError
from eddy.settings import RestartStrategy


def failure(offset: int) -> RecordFailedError:
    return RecordFailedError(("readings", 0, offset), ValueError("bad"))


def policy(strategy: RestartStrategy, **overrides: int) -> RestartPolicy:
    values = {"delay_ms": 250, "max_record_attempts": 2, "max_failures": 3, "interval_ms": 60_000}
    values.update(overrides)
    return RestartPolicy(strategy, **values)


def test_fixed_delay_restarts_forever_and_marks_poison_after_the_attempts() -> None:
    p = policy(RestartStrategy.FIXED_DELAY)
    assert p.on_failure(failure(7)) == 0.25
    assert p.poisoned == {}
    assert p.on_failure(failure(7)) == 0.25
    assert p.poisoned == {("readings", 0, 7): "processing failed 2 times: ValueError('bad')"}
    for offset in range(100, 120):  # other records: never exhausted
        p.on_failure(failure(offset))
    p.dead_lettered(("readings", 0, 7))
    assert ("readings", 0, 7) not in p.poisoned


def test_failure_rate_stops_the_worker_above_its_rate() -> None:
    p = policy(RestartStrategy.FAILURE_RATE)
    for offset in range(3):
        p.on_failure(failure(offset))
    with pytest.raises(RestartsExhaustedError, match="EDDY_RESTART_MAX_FAILURES=3"):
        p.on_failure(failure(3))


def test_none_stops_at_the_first_failure_saying_what_to_set() -> None:
    with pytest.raises(RestartsExhaustedError, match="EDDY_RESTART_STRATEGY"):
        policy(RestartStrategy.NONE).on_failure(failure(0))


def _agent_code(reading: dict[str, float]) -> float:
    return 1 / reading["temperature"]


def test_a_poison_records_reason_names_the_line_of_the_agents_code_that_raised() -> None:
    try:
        _agent_code({"temperature": 0.0})
    except ZeroDivisionError as exc:
        cause = exc
    p = policy(RestartStrategy.FIXED_DELAY, max_record_attempts=1)
    p.on_failure(RecordFailedError(("readings", 0, 3), cause))
    line = _agent_code.__code__.co_firstlineno + 1
    assert p.poisoned[("readings", 0, 3)] == (
        "processing failed 1 times: ZeroDivisionError('float division by zero') "
        f"at test_restarts.py:{line} in _agent_code"
    )
