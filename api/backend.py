"""What the API needs from a worker; the worker implements it, tests may fake it."""

from __future__ import annotations

from typing import Any, Protocol

from service.queries import StateValue, TablePage, WindowPage, WindowTop


class Backend(Protocol):
    @property
    def worker_id(self) -> str: ...

    @property
    def max_results(self) -> int: ...

    def is_live(self) -> bool: ...

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        """Whether every pipeline finished restoring, and per-pipeline detail."""
        ...

    def sensor_windows(self, sensor_id: str, from_ms: int, to_ms: int, limit: int) -> WindowPage:
        """Raises ``service.queries.QueryError`` subclasses."""
        ...

    def windows(
        self, pipeline: str, key: str, from_ms: int, to_ms: int, limit: int
    ) -> WindowPage: ...

    def window_key_state(self, pipeline: str, key: str) -> StateValue: ...

    def window_top(
        self, pipeline: str, window_start_ms: int | None, size_ms: int, n: int, field: str
    ) -> WindowTop: ...

    def state_value(self, pipeline: str, state: str, key: str) -> StateValue:
        """Raises ``service.queries.QueryError`` subclasses."""
        ...

    def pipelines(self) -> dict[str, list[str]]:
        """Each pipeline on this worker with the tables its local partitions hold."""
        ...

    def table_entries(
        self, pipeline: str, table: str, key: str, from_ms: int, to_ms: int, limit: int
    ) -> TablePage:
        """Raises ``QueryError`` subclasses, or ValueError for a table keyed by time."""
        ...

    def remote_owners(self, pipeline: str) -> dict[str, list[int]]:
        """Other workers' endpoints -> partitions of ``pipeline`` they own ('' when
        a partition's owner is unknown)."""
        ...

    def table_keys(self, pipeline: str, table: str, limit: int) -> list[str]:
        """Keys of a table in the partitions served here; ValueError if keyed by time."""
        ...

    def watermarks(self) -> dict[str, dict[int, int]]:
        """Per pipeline, each partition served here and its watermark."""
        ...

    def now_ms(self) -> int: ...

    def metrics_text(self) -> tuple[bytes, str]:
        """Prometheus exposition and its content type."""
        ...

    def status(self) -> dict[str, Any]: ...
