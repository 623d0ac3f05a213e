"""A measurement that runs on a thread of its own while the bench waits or drives
something else: the live load, the RSS sampler, the REST load."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import ClassVar


@dataclass
class Background:
    """Runs :meth:`_run` on a daemon thread from :meth:`start` to :meth:`stop`.

    ``_run`` returns once ``_stop`` is set; a daemon thread, so a bench that
    dies of an exception is not kept alive by its own load. The fields are
    ``init=False`` so that a subclass's fields without defaults may follow.
    """

    thread_name: ClassVar[str] = "bench-background"
    _stop: threading.Event = field(default_factory=threading.Event, init=False)
    _thread: threading.Thread | None = field(default=None, init=False)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Idempotent: a ``finally`` may stop what the happy path already stopped."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        raise NotImplementedError
