"""The worker's fetch never waits past the next checkpoint: on a quiet input the
results of a commit interval are committed when it ends, not up to a fetch's wait
later."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from eddy.runtime.engine import FETCH_WAIT_MS, fetch_wait_ms


@given(now_ms=st.integers(0, 10**9), until_due_ms=st.integers(-10_000, 10_000))
def test_a_fetch_waits_at_most_until_the_next_checkpoint(now_ms: int, until_due_ms: int) -> None:
    wait_ms = fetch_wait_ms((now_ms + until_due_ms) / 1000, now_ms / 1000)
    assert 0 <= wait_ms <= FETCH_WAIT_MS
    if until_due_ms <= 0:
        assert wait_ms == 0  # a due checkpoint is not held back at all
    elif until_due_ms < FETCH_WAIT_MS:
        assert until_due_ms <= wait_ms <= until_due_ms + 1  # whole ms, rounded up
    else:
        assert wait_ms == FETCH_WAIT_MS
