"""What the runtime needs of aiokafka's producer beyond its public API, in one place.

aiokafka's background sender learns of a transaction's failure first and says
little about it afterwards, and its ``stop()`` waits for in-flight batches and
transaction requests however long a lost broker makes them take. Both reads of
its internals are here, so that an aiokafka upgrade has one file to check, and
``tests/unit/test_producers.py`` pins them against the installed version.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError, ProducerFenced

log = logging.getLogger(__name__)


def raise_if_failed(producer: AIOKafkaProducer) -> None:
    """Name the failure aiokafka's sender met in the background.

    After a fence (or an abortable error) ``send`` only says "not in transaction"
    (IllegalOperation, not a KafkaError) and ``begin_transaction`` fails an
    assertion; this turns the transaction manager's state into the error the
    runtime acts on: drop the task (fenced) or reopen it (abortable).

    Raises:
        ProducerFenced: a newer producer owns the transactional id.
        KafkaError: the open transaction failed and must be aborted.
    """
    manager = getattr(producer, "_txn_manager", None)
    state = getattr(getattr(manager, "state", None), "name", "")
    if state == "FATAL_ERROR":
        raise ProducerFenced()
    if state == "ABORTABLE_ERROR":
        raise KafkaError("the transaction failed in the background; reopening")


async def stop_within(producer: AIOKafkaProducer, timeout_s: float, name: str) -> None:
    """Stop ``producer``, giving up on what it still has in flight after ``timeout_s``.

    A producer whose transaction coordinator or partition leader cannot be
    reached retries its requests for ever: ``stop()`` would wait with it. The
    task that owned it is reopened with a new producer (or the worker is
    stopping), so nothing it still holds is needed: its open transaction is
    aborted by the broker, or fenced by the new producer's first call.
    """
    try:
        await asyncio.wait_for(producer.stop(), timeout_s)
    except TimeoutError:
        log.warning("%s: the producer did not stop within %.0f s; abandoning it", name, timeout_s)
        sender = getattr(producer, "_sender", None)
        task = getattr(sender, "sender_task", None)
        if task is not None:
            task.cancel()  # its retries would go on in the background otherwise
        with contextlib.suppress(Exception):
            await asyncio.wait_for(producer.client.close(), timeout_s)
    except KafkaError as exc:
        log.debug("%s: the producer did not stop cleanly: %r", name, exc)
