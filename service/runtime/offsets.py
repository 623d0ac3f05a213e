"""The group's committed offsets, read so that "none committed" means none.

aiokafka's ``consumer.committed()`` sends OffsetFetch (v2 or later against any
recent broker) and reads only the per-partition error codes. From v2 on, a
broker reports a failure of the whole request in the response's top-level error
code, with no partitions at all: the group coordinator still loading the group's
offsets after a broker restart, or no longer the coordinator. aiokafka then
answers None, "nothing committed", and a worker opening a partition would start
it over from the beginning on top of its restored state, processing every record
since then a second time. The chaos suite's broker restart found this (seed 23).

:func:`committed_offsets` sends the same request through the consumer's group
coordinator and checks both levels, retrying what is retriable. The coordinator
is aiokafka's, not public API, as :meth:`eddy.runtime.task.Task._raise_if_failed`
also reads; ``tests/unit/test_offsets.py`` holds the parts it relies on.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka import errors as kafka_errors
from aiokafka.protocol.commit import OffsetFetchRequest

RETRY_S = 0.1
# An OffsetFetch takes milliseconds; one unanswered this long asks the coordinator anew.
ATTEMPT_S = 5.0
# These errors name a coordinator that is not (or no longer) the group's: find it again.
_MOVED = (kafka_errors.NotCoordinatorForGroupError, kafka_errors.GroupCoordinatorNotAvailableError)


async def committed_offsets(
    consumer: AIOKafkaConsumer, tps: Sequence[TopicPartition], timeout_s: float
) -> dict[TopicPartition, int]:
    """The group's committed offset of each of ``tps`` that has one.

    Raises:
        TimeoutError: the coordinator did not answer for ``timeout_s``.
        KafkaError: a non-retriable error (the group not authorized, say).
    """
    coordinator: Any = consumer._coordinator  # not public API: see the module docstring
    return await asyncio.wait_for(_until_answered(coordinator, tps), timeout_s)


async def _until_answered(
    coordinator: Any, tps: Sequence[TopicPartition]
) -> dict[TopicPartition, int]:
    while True:
        await coordinator.ensure_coordinator_known()
        try:
            return await asyncio.wait_for(_fetch_once(coordinator, tps), ATTEMPT_S)
        except TimeoutError:
            # A coordinator that stopped answering (hung, or behind a cut link)
            # would hold the request for the consumer's whole request timeout.
            coordinator.coordinator_dead()
        except kafka_errors.KafkaError as exc:
            if not exc.retriable:
                raise
            if isinstance(exc, _MOVED):
                coordinator.coordinator_dead()
            await asyncio.sleep(RETRY_S)


async def _fetch_once(coordinator: Any, tps: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
    """One OffsetFetch; raises the error of the request or of any partition."""
    by_topic: dict[str, list[int]] = defaultdict(list)
    for tp in tps:
        by_topic[tp.topic].append(tp.partition)
    response = await coordinator._send_req(
        OffsetFetchRequest(coordinator.group_id, list(by_topic.items()))
    )
    _raise_for(getattr(response, "error_code", 0))  # v2+: the whole request failed
    found: dict[TopicPartition, int] = {}
    for topic, partitions in response.topics:
        for partition, offset, _metadata, error_code in partitions:
            if kafka_errors.for_code(error_code) is kafka_errors.UnknownTopicOrPartitionError:
                continue  # as aiokafka does: a topic deleted since; nothing committed
            _raise_for(error_code)
            if offset >= 0:  # -1: nothing committed for this partition
                found[TopicPartition(topic, partition)] = offset
    if tps and not response.topics:
        # No error and no partitions: not an answer a broker gives for partitions
        # it was asked about; taken as the coordinator not being ready, never as
        # "nothing committed".
        raise kafka_errors.GroupCoordinatorNotAvailableError()
    return found


def _raise_for(error_code: int) -> None:
    error = kafka_errors.for_code(error_code)
    if error is not kafka_errors.NoError:
        raise error()
