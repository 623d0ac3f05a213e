"""What happens when a pipeline's code raises on a record (Flink's restart
strategies, per partition).

The partition's open transaction is aborted and the partition reopens from its
last commit after a delay, so state never keeps half of a failed record. The
same record failing ``max_record_attempts`` times is poison: on the next replay
it goes to the dead-letter topic with the error instead of looping forever.

* ``fixed_delay``: restart after ``restart_delay_ms``, as often as needed;
* ``failure_rate``: the same, but more than ``restart_max_failures`` failures
  within ``restart_interval_ms`` stop the worker;
* ``none``: the first failure stops the worker.

Two failures are the record's own, the same on every replay, and need no second
attempt: a record whose state change cannot be encoded (found by the careful
replay of :mod:`eddy.runtime.task`) is poison at once, and a record that was
in flight when the process died twice in a row (:mod:`eddy.runtime.inflight`)
is poison when the partition opens. Neither counts against the strategy: they
are bad input, dead-lettered as a malformed record is.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from eddy.errors import EddyError
from eddy.pipeline.source import user_frame
from eddy.settings import RestartStrategy, Settings
from eddy.tables.store import UnwritableStateError

RecordId = tuple[str, int, int]  # topic, partition, offset
DIED_TWICE = (
    "the process died twice while processing this record (killed by a signal or exited: "
    "a crash in native code, or out of memory?); it was not processed"
)


class RecordFailedError(Exception):
    """The pipeline's code raised on one record."""

    def __init__(self, record: RecordId, cause: BaseException) -> None:
        super().__init__(f"record {record} failed: {cause!r}")
        self.record = record
        self.cause = cause

    @property
    def deterministic(self) -> bool:
        """It fails the same way on every replay: no point in trying it again."""
        return isinstance(self.cause, UnwritableStateError)


class ReplayCarefully(Exception):
    """What a task must write cannot be encoded: a state entry at the checkpoint, or an
    output. The task is discarded and replays its records from the last commit
    carefully: each record's state changes are encoded after it (so the record that
    made one unwritable is found, and dead-lettered at once), and an output that
    cannot be encoded is dead-lettered. Outside the careful replay an unwritable
    output asks for one too, so which record is dead-lettered never depends on where
    the checkpoints fell.

    Attributes:
        until: the careful replay lasts until these offsets are committed (at least
            the record being processed, if one was).
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.until: dict[Any, int] = {}


class RestartsExhaustedError(EddyError):
    """The restart strategy gave up: the worker stops with this message."""


@dataclass
class RestartPolicy:
    strategy: RestartStrategy
    delay_ms: int
    max_record_attempts: int
    max_failures: int
    interval_ms: int

    def __post_init__(self) -> None:
        self._attempts: dict[RecordId, int] = {}
        # Records to dead-letter on their next replay, with the reason.
        self.poisoned: dict[RecordId, str] = {}
        self._failures_at: deque[float] = deque()

    @classmethod
    def from_settings(cls, settings: Settings) -> RestartPolicy:
        return cls(
            settings.restart_strategy,
            settings.restart_delay_ms,
            settings.max_record_attempts,
            settings.restart_max_failures,
            settings.restart_interval_ms,
        )

    def on_failure(self, failure: RecordFailedError) -> float:
        """Count a failure; the delay in seconds before the partition reopens.

        Raises:
            RestartsExhaustedError: the strategy allows no more restarts.
        """
        if failure.deterministic:
            self.poisoned[failure.record] = (
                f"the state it changed cannot be written: {failure.cause}"
            )
            return 0.0
        attempts = self._attempts.get(failure.record, 0) + 1
        self._attempts[failure.record] = attempts
        if attempts >= self.max_record_attempts:
            # The reason names the line of the agent's code that raised, if it did.
            self.poisoned[failure.record] = (
                f"processing failed {attempts} times: {failure.cause!r}{user_frame(failure.cause)}"
            )
        if self.strategy is RestartStrategy.NONE:
            raise RestartsExhaustedError(
                f"{failure}; restart strategy 'none' (set EDDY_RESTART_STRATEGY to restart)"
            )
        now = time.monotonic()
        self._failures_at.append(now)
        while self._failures_at and self._failures_at[0] < now - self.interval_ms / 1000:
            self._failures_at.popleft()
        if (
            self.strategy is RestartStrategy.FAILURE_RATE
            and len(self._failures_at) > self.max_failures
        ):
            raise RestartsExhaustedError(
                f"{failure}; {len(self._failures_at)} failures within "
                f"{self.interval_ms} ms is above EDDY_RESTART_MAX_FAILURES={self.max_failures}"
            )
        return self.delay_ms / 1000

    def died_twice(self, record: RecordId) -> None:
        """The process died twice with ``record`` in flight: dead-letter it unprocessed."""
        self.poisoned[record] = DIED_TWICE

    def dead_lettered(self, record: RecordId) -> None:
        """The poison record is out of the way; forget it."""
        self.poisoned.pop(record, None)
        self._attempts.pop(record, None)
