"""Eddy's topics: what they are, and creating or checking them at start."""

from __future__ import annotations

import argparse
import asyncio
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition, errors
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_delay, wait_exponential

from eddy.errors import BrokerUnavailableError, TopicMismatchError
from eddy.kafka_clients import connection_kwargs
from eddy.settings import Settings

if TYPE_CHECKING:
    from eddy.app.app import BuiltApp

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 20.0
COMPACTED = {"cleanup.policy": "compact", "min.compaction.lag.ms": "0"}


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    config: Mapping[str, str] = field(default_factory=dict)
    # Inputs whose keys must land in the same partition numbers as this topic's.
    exact_partitions: bool = True


def changelog_topic(settings: Settings, pipeline: str) -> str:
    return f"{settings.app_id}-{pipeline}-changelog"


def app_topics(built: BuiltApp) -> list[TopicSpec]:
    """Every topic the app's agents declare (inputs, outputs, late and side outputs,
    broadcast), its repartition topics, and the dead-letter topic."""
    settings = built.settings
    specs: dict[str, TopicSpec] = {}
    for agent in built.agents.values():
        for topic in agent.topics:
            name = settings.topic(topic.name)
            partitions = topic.partitions or settings.partitions
            specs[name] = TopicSpec(
                name, partitions, dict(topic.config), topic.partitions is not None
            )
        for internal in agent.internal:
            specs[internal.name] = TopicSpec(internal.name, internal.partitions)
    specs.setdefault(
        settings.dead_letters,
        TopicSpec(settings.dead_letters, settings.partitions, exact_partitions=False),
    )
    return list(specs.values())


def admin_client(settings: Settings) -> AIOKafkaAdminClient:
    return AIOKafkaAdminClient(
        **connection_kwargs(settings),
        client_id=f"{settings.app_id}-admin-{settings.worker_id}",
        request_timeout_ms=15_000,
    )


async def partition_counts(admin: AIOKafkaAdminClient, names: Iterable[str]) -> dict[str, int]:
    """Partition count of each existing topic among ``names``."""
    wanted = set(names)
    existing = set(await admin.list_topics()) & wanted
    if not existing:
        return {}
    described = await admin.describe_topics(sorted(existing))
    return {t["topic"]: len(t["partitions"]) for t in described if not t["error_code"]}


async def ensure_topics(settings: Settings, specs: Iterable[TopicSpec]) -> dict[str, int]:
    """Create missing topics; check that existing ones have the layout Eddy needs.

    Returns:
        The partition count of every topic in ``specs``.

    Raises:
        BrokerUnavailableError: Kafka did not answer.
        TopicMismatchError: an existing topic has the wrong partition count.
    """
    specs = list(specs)
    admin = await _connect(settings)
    try:
        counts = await partition_counts(admin, (s.name for s in specs))
        missing = [s for s in specs if s.name not in counts]
        if missing:
            new = [
                NewTopic(
                    s.name, s.partitions, settings.replication_factor, topic_configs=dict(s.config)
                )
                for s in missing
            ]
            response = await admin.create_topics(new)
            for name, code, *rest in response.topic_errors:
                # 36: another worker created it first, which is fine.
                if code not in (0, 36):
                    message = rest[0] if rest else ""
                    raise TopicMismatchError(
                        f"cannot create topic {name!r}: {errors.for_code(code).__name__} {message}"
                    )
            created = sorted(name for name, code, *_ in response.topic_errors if code == 0)
            if created:
                log.info("created %d topics: %s", len(created), ", ".join(created))
            counts = await _wait_for(admin, [s.name for s in specs])
            await _wait_until_led(settings, {name: counts[name] for name in created})
        for spec in specs:
            if spec.exact_partitions and counts[spec.name] != spec.partitions:
                raise TopicMismatchError(
                    f"topic {spec.name!r} has {counts[spec.name]} partitions, Eddy needs "
                    f"{spec.partitions} (set EDDY_PARTITIONS={counts[spec.name]} to match, or "
                    "recreate the topic)"
                )
        return counts
    finally:
        await admin.close()


async def _connect(settings: Settings) -> AIOKafkaAdminClient:
    """An admin client, retried for a while: a broker may still be starting."""
    try:
        async for attempt in AsyncRetrying(
            retry=retry_if_exception_type(KafkaError),
            wait=wait_exponential(multiplier=0.2, max=3),
            stop=stop_after_delay(CONNECT_TIMEOUT_S),
            reraise=True,
        ):
            with attempt:
                admin = admin_client(settings)
                try:
                    await admin.start()
                except BaseException:
                    await admin.close()
                    raise
                return admin
    except KafkaError as exc:
        raise BrokerUnavailableError(
            f"Kafka did not answer at {settings.bootstrap_servers} within "
            f"{CONNECT_TIMEOUT_S:.0f}s ({exc}); start it with `make kafka-start` or set "
            "EDDY_BOOTSTRAP_SERVERS"
        ) from None
    raise AssertionError("unreachable")


async def _wait_for(admin: AIOKafkaAdminClient, names: list[str]) -> dict[str, int]:
    # Metadata of freshly created topics can lag a moment behind the create call.
    for _ in range(100):
        counts = await partition_counts(admin, names)
        if len(counts) == len(names):
            return counts
        await asyncio.sleep(0.1)
    missing = sorted(set(names) - set(counts))
    raise BrokerUnavailableError(f"topics {missing} did not appear after creation")


async def _wait_until_led(settings: Settings, counts: Mapping[str, int]) -> None:
    """Return once the broker answers for every partition of the new topics.

    A new topic's metadata names its leader before that broker has loaded the
    partition; a consumer asking for offsets in between gets NOT_LEADER, and
    aiokafka's reset of a fresh assignment was seen to keep failing so for a
    minute (without refreshing its metadata) after the partition was ready.
    Asking for the end offsets here, with aiokafka's own retries and metadata
    refreshes, holds the worker back until the first real request succeeds.
    """
    if not counts:
        return
    tps = [TopicPartition(name, p) for name, n in counts.items() for p in range(n)]
    consumer = AIOKafkaConsumer(
        **connection_kwargs(settings), group_id=None, enable_auto_commit=False
    )
    try:
        await consumer.start()
        await consumer.end_offsets(tps)
    except KafkaError as exc:
        raise BrokerUnavailableError(
            f"the new topics' partitions have no leader yet ({exc}): is the broker healthy?"
        ) from None
    finally:
        await consumer.stop()


def topic_roles(built: BuiltApp) -> list[dict[str, Any]]:
    """Every topic the app uses, with what each is for (generated from the code,
    for ``eddy topics list`` and docs/topics.md)."""
    settings = built.settings
    roles: dict[str, list[str]] = {}
    partitions = {spec.name: spec.partitions for spec in app_topics(built)}

    def add(topic: str, role: str) -> None:
        roles.setdefault(topic, []).append(role)

    for agent, compiled in built.agents.items():
        internal = {i.name for i in compiled.internal}
        for stage in compiled.stages:
            for topic in stage.sources:
                add(topic, f"{'repartition' if topic in internal else 'input'} of {agent}")
            broadcast = getattr(stage, "broadcast_topic", None)
            if broadcast is not None:
                add(broadcast, f"broadcast input of {agent}")
            late = getattr(stage, "late_output", None)
            for topic in stage.output_topics:
                if topic not in internal:
                    add(topic, f"{'late records' if topic == late else 'output'} of {agent}")
            changelog = changelog_topic(settings, stage.name)
            add(changelog, f"state changelog of {_stage_of(agent, stage.name)} (compacted)")
            partitions.setdefault(changelog, settings.partitions)
    add(settings.dead_letters, "dead letters of every agent")
    return [
        {"topic": name, "partitions": partitions.get(name, settings.partitions), "roles": found}
        for name, found in sorted(roles.items())
    ]


def _stage_of(agent: str, stage: str) -> str:
    return agent if stage == agent else f"{agent} (stage {stage})"


def run_cli(args: argparse.Namespace) -> int:
    from eddy.app.loader import load_app_and_settings

    app, settings = load_app_and_settings(getattr(args, "app", None))
    built = app.build(settings)
    if args.action == "list":
        return _list(built, as_json=args.json, markdown=getattr(args, "markdown", False))
    specs = app_topics(built)
    for stage in built.stages:
        specs.append(
            TopicSpec(changelog_topic(settings, stage.name), settings.partitions, COMPACTED)
        )
    counts = asyncio.run(ensure_topics(settings, specs))
    print(f"{len(counts)} topics ready on {settings.bootstrap_servers} (eddy topics list: each)")
    return 0


def _list(built: BuiltApp, *, as_json: bool, markdown: bool = False) -> int:
    found = topic_roles(built)
    if as_json:
        print(orjson.dumps(found, option=orjson.OPT_INDENT_2).decode())
    elif markdown:
        print(topics_table(found))
    else:
        for row in found:
            count = row["partitions"]
            partitions = f"{count} partition{'' if count == 1 else 's'}"
            print(f"{row['topic']}  ({partitions}): {'; '.join(row['roles'])}")
    return 0


def topics_table(found: list[dict[str, Any]]) -> str:
    """A markdown table of :func:`topic_roles` (docs/configuration.md is generated
    from it, so the docs list exactly the topics the code creates)."""
    rows = ["| topic | partitions | what it is |", "|---|---|---|"]
    for row in found:
        rows.append(f"| `{row['topic']}` | {row['partitions']} | {'; '.join(row['roles'])} |")
    return "\n".join(rows)
