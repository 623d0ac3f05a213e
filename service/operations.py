"""Long operations a worker runs for a REST client: a snapshot, a savepoint, a
stop. The request starts one and answers at once with where to ask how it went
(``GET /operations/{id}``), as Flink's REST API answers a savepoint trigger with
a request id; the client polls. Operations live in the worker's memory, the
newest :data:`KEPT` of them."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from eddy.eventtime import Clock

log = logging.getLogger(__name__)
KEPT = 100
Status = Literal["running", "succeeded", "failed"]


@dataclass
class Operation:
    operation_id: str
    kind: str
    started_ms: int
    status: Status = "running"
    finished_ms: int | None = None
    result: dict[str, Any] | None = None
    error: str | None = None
    _task: asyncio.Task[None] | None = field(default=None, repr=False, compare=False)


class Operations:
    """Runs operations in the background and remembers how they went."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._operations: OrderedDict[str, Operation] = OrderedDict()

    def start(self, kind: str, run: Callable[[], Awaitable[dict[str, Any]]]) -> Operation:
        operation = Operation(uuid.uuid4().hex, kind, self._clock.now_ms())
        operation._task = asyncio.create_task(self._run(operation, run), name=f"{kind}-op")
        self._operations[operation.operation_id] = operation
        while len(self._operations) > KEPT:
            self._operations.popitem(last=False)
        return operation

    def get(self, operation_id: str) -> Operation | None:
        return self._operations.get(operation_id)

    async def _run(
        self, operation: Operation, run: Callable[[], Awaitable[dict[str, Any]]]
    ) -> None:
        try:
            operation.result = await run()
            operation.status = "succeeded"
        except Exception as exc:  # the client reads the failure from the operation
            log.warning("%s %s failed: %s", operation.kind, operation.operation_id, exc)
            operation.error = str(exc) or repr(exc)
            operation.status = "failed"
        finally:
            operation.finished_ms = self._clock.now_ms()
