"""A local server that a test's fixture or a command starts and stops: started on
entering a ``with`` block, stopped on leaving it however it is left."""

from __future__ import annotations

import abc
from types import TracebackType
from typing import Self


class Managed(abc.ABC):
    """Use as a context manager, or call :meth:`start` and :meth:`stop`."""

    @abc.abstractmethod
    def start(self) -> Self:
        """Start and wait until it answers; ``self``, to be written inline."""

    @abc.abstractmethod
    def stop(self) -> None:
        """Stop; nothing to do if it is not running."""

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
