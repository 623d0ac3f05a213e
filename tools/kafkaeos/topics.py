"""The test's topics, recreated for every run, and what group ``EosTest`` committed.

The topic names are fixed by Kafka's driver and verifier, so runs cannot be told
apart by a prefix: each run deletes group ``EosTest`` (the verifier trusts its
committed offsets, which outlive a deleted topic) and the topics, and creates
the topics anew.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import GroupCoordinatorNotAvailableError
from aiokafka.protocol.admin import DeleteGroupsRequest
from aiokafka.structs import OffsetAndMetadata

from eddy.settings import Settings
from eddy.topics import admin_client
from tools.kafkaeos.app import GROUP_ID, TOPICS

NAMES = tuple(t.name for t in TOPICS)
INPUTS = ("data", "repartition")  # what group EosTest reads
GONE_TIMEOUT_S = 60.0


GROUP_ID_NOT_FOUND = 69
# COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR
COORDINATOR_MOVING = frozenset({14, 15, 16})


class StaleOffsetsError(RuntimeError):
    """Group ``EosTest`` could not be deleted, or still has offsets: a member of
    another run is alive. Stop it (``kafka-consumer-groups --describe``)."""


async def recreate(settings: Settings, partitions: int) -> None:
    """Delete the test's topics (and so the group's offsets), then create them anew.

    Raises:
        StaleOffsetsError: see the class.
        TimeoutError: the broker did not finish deleting them.
    """
    admin = admin_client(settings)
    await admin.start()
    try:
        await _delete_group(admin)
        doomed = [n for n in NAMES if n in set(await admin.list_topics())]
        if doomed:
            await admin.delete_topics(doomed)
        await _until(lambda names: not set(NAMES) & names, admin.list_topics)
        if await _committed(admin):
            raise StaleOffsetsError(f"group {GROUP_ID} kept offsets of deleted topics")
        rf = settings.replication_factor
        await admin.create_topics([NewTopic(n, partitions, rf) for n in NAMES])
        await _until(lambda names: set(NAMES) <= names, admin.list_topics)
    finally:
        await admin.close()


async def _delete_group(admin: AIOKafkaAdminClient) -> None:
    """DeleteGroups for ``EosTest`` (aiokafka's admin has the request, not the call).
    A cluster that just started may name a coordinator that is not one yet: ask again."""
    deadline = time.monotonic() + GONE_TIMEOUT_S
    while True:
        coordinator = await _coordinator(admin)
        request = DeleteGroupsRequest([GROUP_ID])
        response = await admin._send_request_to_node(coordinator, request)
        codes = {code for _, code in response.results} - {0, GROUP_ID_NOT_FOUND}
        if not codes:
            return
        if not codes <= COORDINATOR_MOVING or time.monotonic() > deadline:
            raise StaleOffsetsError(f"cannot delete group {GROUP_ID}: error {sorted(codes)}")
        await asyncio.sleep(1.0)


async def _coordinator(admin: AIOKafkaAdminClient) -> int:
    """The group's coordinator; a broker that just started creates its offsets topic
    on the first request and has no coordinator for a few seconds."""
    deadline = time.monotonic() + GONE_TIMEOUT_S
    while True:
        try:
            node: int = await admin.find_coordinator(GROUP_ID)
            return node
        except GroupCoordinatorNotAvailableError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(1.0)


async def _committed(admin: AIOKafkaAdminClient) -> dict[TopicPartition, OffsetAndMetadata]:
    offsets: dict[TopicPartition, OffsetAndMetadata]
    offsets = await admin.list_consumer_group_offsets(GROUP_ID, await _coordinator(admin))
    return offsets


async def delete(settings: Settings, names: list[str]) -> None:
    """Remove a run's own topics (its changelogs and dead letters)."""
    admin = admin_client(settings)
    await admin.start()
    try:
        doomed = [n for n in names if n in set(await admin.list_topics())]
        if doomed:
            await admin.delete_topics(doomed)
    finally:
        await admin.close()


async def run_topics(settings: Settings, app_id: str) -> list[str]:
    """The topics a run's workers created for themselves (``<app id>-...``)."""
    admin = admin_client(settings)
    await admin.start()
    try:
        return sorted(t for t in await admin.list_topics() if t.startswith(f"{app_id}-"))
    finally:
        await admin.close()


async def _until(
    done: Callable[[set[str]], bool], list_topics: Callable[[], Awaitable[list[str]]]
) -> None:
    """Until the broker's topics satisfy ``done``.

    Raises:
        TimeoutError: not within GONE_TIMEOUT_S (a deletion or creation stuck).
    """
    deadline = time.monotonic() + GONE_TIMEOUT_S
    while time.monotonic() < deadline:
        if done(set(await list_topics())):
            return
        await asyncio.sleep(0.3)
    raise TimeoutError(f"the test's topics did not settle within {GONE_TIMEOUT_S:.0f} s")


def input_partitions(partitions: int) -> list[TopicPartition]:
    return [TopicPartition(t, p) for t in INPUTS for p in range(partitions)]
