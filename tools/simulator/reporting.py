"""Progress of a simulator run: a rich bar when bounded and interactive, else log lines.

Kept apart from :mod:`.producer` so sending and reporting can change separately.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Protocol

from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

log = logging.getLogger(__name__)

LOG_EVERY_S = 10.0
REFRESH_EVERY_S = 0.1


class Report(Protocol):
    def update(self, handed_over: int, elapsed_s: float, *, final: bool = False) -> None: ...


class _ProgressReport:
    """A rich progress bar for bounded runs: by count, duration, or whichever ends first."""

    def __init__(
        self, progress: Progress, count: int | None, duration_s: float | None, noun: str
    ) -> None:
        self._progress = progress
        self._count = count
        self._duration_s = duration_s
        self._noun = noun
        self._task = progress.add_task("starting", total=1.0)
        self._next_refresh = 0.0

    def update(self, handed_over: int, elapsed_s: float, *, final: bool = False) -> None:
        if elapsed_s < self._next_refresh and not final:
            return
        self._next_refresh = elapsed_s + REFRESH_EVERY_S
        done = [handed_over / self._count] if self._count else []
        done += [elapsed_s / self._duration_s] if self._duration_s else []
        text = f"sent {handed_over:,} {self._noun}"
        self._progress.update(self._task, completed=min(1.0, max(done)), description=text)


class _LogReport:
    """A log line every ``LOG_EVERY_S`` for unbounded or non-interactive runs."""

    def __init__(self, noun: str) -> None:
        self._noun = noun
        self._last_count = 0
        self._last_at = 0.0

    def update(self, handed_over: int, elapsed_s: float, *, final: bool = False) -> None:
        # The final count is in the run's summary; no need to log it twice.
        if final or elapsed_s - self._last_at < LOG_EVERY_S:
            return
        rate = (handed_over - self._last_count) / (elapsed_s - self._last_at)
        log.info(
            "simulator: sent %d %s (%.0f/s over the last %.0f s)",
            handed_over,
            self._noun,
            rate,
            elapsed_s - self._last_at,
        )
        self._last_count, self._last_at = handed_over, elapsed_s


@contextlib.contextmanager
def reporting(
    count: int | None, duration_s: float | None, progress: bool, noun: str
) -> Iterator[Report]:
    if not progress or (count is None and duration_s is None):
        yield _LogReport(noun)
        return
    columns = (TextColumn("{task.description}"), BarColumn(), TaskProgressColumn())
    with Progress(*columns, TimeElapsedColumn(), transient=False) as bar:
        yield _ProgressReport(bar, count, duration_s, noun)
