"""What the API needs from a worker: a worker serving its own API implements it
(``service/worker.py``), so does the query plane of ``eddy worker``
(``service/plane/backend.py``); tests may fake it."""

from __future__ import annotations

from typing import Any, Protocol

from eddy.app.plan import View
from eddy.app.queries import Owner, StateValue, TablePage, WindowPage
from eddy.app.scans import KeyPage, SlicePage


class Backend(Protocol):
    @property
    def worker_id(self) -> str: ...

    @property
    def max_results(self) -> int: ...

    def is_live(self) -> bool: ...

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        """Whether every stage finished restoring, and per-stage detail."""
        ...

    def views(self) -> list[View]:
        """What the agents on this worker serve (window results, queryable states)."""
        ...

    def agents(self) -> dict[str, list[str]]:
        """Each agent on this worker and the stages it runs as."""
        ...

    def windows(
        self,
        agent: str,
        key: str,
        from_ms: int,
        to_ms: int,
        limit: int,
        *,
        newest_first: bool = False,
    ) -> WindowPage:
        """Raises ``eddy.app.queries.QueryError`` subclasses."""
        ...

    def state(self, agent: str, state: str, key: str) -> StateValue: ...

    def owner(self, agent: str, key: str) -> Owner: ...

    async def keys(
        self, agent: str, name: str, prefix: str, after: str | None, limit: int
    ) -> KeyPage:
        """Keys of a view over the partitions served here, within the scan budget
        (``service/app/scans.py``), and those partitions."""
        ...

    async def window_slice(
        self,
        agent: str,
        window_start_ms: int | None,
        after: str | None,
        order_by: str | None,
        descending: bool,
        limit: int,
    ) -> SlicePage:
        """Every key's result of one window over the partitions served here, within
        the scan budget. Raises ValueError for an ``order_by`` the results lack."""
        ...

    def remote_owners(self, agent: str) -> dict[str, list[int]]:
        """Other workers' endpoints -> partitions of ``agent`` they own ('' when a
        partition's owner is unknown)."""
        ...

    def stages(self) -> dict[str, list[str]]:
        """Each stage on this worker with the tables its local partitions hold."""
        ...

    def agent_of(self, stage: str) -> str:
        """The agent a stage on this worker is part of."""
        ...

    def table_entries(
        self, stage: str, table: str, key: str, from_ms: int, to_ms: int, limit: int
    ) -> TablePage:
        """Raises ``QueryError`` subclasses, or ValueError for a table keyed by time."""
        ...

    def watermarks(self) -> dict[str, dict[int, int]]:
        """Per stage, each partition served here and its watermark."""
        ...

    def now_ms(self) -> int: ...

    def metrics_text(self) -> tuple[bytes, str]:
        """Prometheus exposition and its content type."""
        ...

    def status(self) -> dict[str, Any]: ...
