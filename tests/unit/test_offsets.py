"""Opening a partition never takes a coordinator that cannot answer yet for
"nothing committed" (which would start the partition over on top of its state)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.consumer.group_coordinator import GroupCoordinator
from aiokafka.errors import GroupAuthorizationFailedError

from eddy.runtime.offsets import committed_offsets

TP = TopicPartition("readings", 3)
LOADING, NOT_COORDINATOR, NOT_AUTHORIZED = 14, 16, 30


class Response:
    def __init__(self, topics: list[Any], error_code: int = 0) -> None:
        self.topics = topics
        self.error_code = error_code


class Coordinator:
    """What ``committed_offsets`` uses of aiokafka's group coordinator."""

    group_id = "group"

    def __init__(self, *responses: Response) -> None:
        self.responses = list(responses)
        self.dead = 0

    async def ensure_coordinator_known(self) -> None:
        pass

    def coordinator_dead(self) -> None:
        self.dead += 1

    async def _send_req(self, request: Any) -> Response:
        return self.responses.pop(0)


class Consumer:
    def __init__(self, coordinator: Coordinator) -> None:
        self._coordinator = coordinator


def answered(offset: int) -> Response:
    return Response([(TP.topic, [(TP.partition, offset, "", 0)])])


def committed(coordinator: Coordinator) -> dict[TopicPartition, int]:
    consumer: Any = Consumer(coordinator)
    return asyncio.run(committed_offsets(consumer, [TP], timeout_s=5))


def test_a_coordinator_still_loading_the_group_is_asked_again_not_taken_for_none() -> None:
    # OffsetFetch v2+: the group-level error, and no partitions at all; aiokafka's
    # consumer.committed() answers None to this.
    coordinator = Coordinator(Response([], LOADING), Response([], NOT_COORDINATOR), answered(871))
    assert committed(coordinator) == {TP: 871}
    assert coordinator.dead == 1  # the coordinator moved: found again


def test_an_answer_without_error_and_without_partitions_is_not_nothing_committed() -> None:
    assert committed(Coordinator(Response([]), answered(5))) == {TP: 5}


def test_nothing_committed_is_an_answer_for_the_partition_with_offset_minus_one() -> None:
    assert committed(Coordinator(answered(-1))) == {}


def test_a_partition_level_error_is_retried_and_a_fatal_one_raised() -> None:
    loading = Response([(TP.topic, [(TP.partition, -1, "", LOADING)])])
    assert committed(Coordinator(loading, answered(9))) == {TP: 9}
    with pytest.raises(GroupAuthorizationFailedError):
        committed(Coordinator(Response([], NOT_AUTHORIZED)))


def test_aiokafka_still_has_what_the_check_relies_on() -> None:
    assert "_coordinator" in AIOKafkaConsumer.__init__.__code__.co_names
    for name in ("ensure_coordinator_known", "coordinator_dead", "_send_req"):
        assert callable(getattr(GroupCoordinator, name))
