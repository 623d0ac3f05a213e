"""``eddy send TOPIC VALUE``: one record onto a topic of the app, checked and
keyed as the app's producers would, to try an agent by hand (Faust's ``faust
send``). The value is JSON text; it must be a value of the topic (a pydantic
model validates it), and its key is the topic's key field unless ``--key``
says otherwise."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import orjson
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from eddy.app.app import BuiltApp
from eddy.app.topic import Topic
from eddy.errors import BrokerUnavailableError, ConfigError
from eddy.kafka_clients import connection_kwargs
from eddy.serde import DecodeError

SEND_TIMEOUT_S = 30.0


def app_topic(built: BuiltApp, name: str) -> Topic[Any]:
    """The topic ``name`` among those the app's agents declare."""
    found = {t.name: t for agent in built.agents.values() for t in agent.topics}
    if name not in found:
        known = ", ".join(sorted(found)) or "none"
        raise ConfigError(f"send: the app has no topic {name!r} (its topics: {known})")
    return found[name]


def encoded(topic: Topic[Any], text: str, key: str | None) -> tuple[bytes | None, bytes]:
    """The record's key and value bytes, or a ConfigError saying what is wrong."""
    try:
        value = topic.codec.decode(text.encode())
    except DecodeError as exc:
        raise ConfigError(f"send: not a value of topic {topic.name!r}: {exc}") from None
    if key is None and topic.key_of is not None:
        key = topic.key_of(value)
    data = topic.codec.encode(value)
    return (None if key is None else str(key).encode()), data


async def _produce(built: BuiltApp, topic: str, key: bytes | None, value: bytes) -> Any:
    producer = AIOKafkaProducer(enable_idempotence=True, **connection_kwargs(built.settings))
    try:
        await asyncio.wait_for(producer.start(), SEND_TIMEOUT_S)
        return await asyncio.wait_for(producer.send_and_wait(topic, value, key=key), SEND_TIMEOUT_S)
    except (KafkaError, TimeoutError, OSError) as exc:
        raise BrokerUnavailableError(
            f"send: cannot write to {topic} at {built.settings.bootstrap_servers}: "
            f"{exc or type(exc).__name__}"
        ) from None
    finally:
        await producer.stop()


def run_cli(args: argparse.Namespace) -> int:
    from eddy.app.loader import load_app_and_settings

    app, settings = load_app_and_settings(getattr(args, "app", None))
    built = app.build(settings)
    topic = app_topic(built, args.topic)
    key, value = encoded(topic, args.value, args.key)
    physical = settings.topic(topic.name)
    meta = asyncio.run(_produce(built, physical, key, value))
    answer = {"topic": physical, "partition": meta.partition, "offset": meta.offset}
    print(orjson.dumps(answer).decode())
    return 0
