"""``eddy send TOPIC VALUE``: one record onto a topic of the app, checked and
keyed as the app's producers would, to try an agent by hand (Faust's ``faust
send``). The value is JSON text; it must be a value of the topic (a pydantic
model validates it), and its key is the topic's key field unless ``--key``
says otherwise. A topic of a schema registry's format (Avro, Protobuf, JSON
Schema) is written in it, with the schema's id, as the app's producers write it."""

from __future__ import annotations

import argparse
import asyncio
import logging
from typing import Any

import orjson
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError
from pydantic import BaseModel

from eddy.app.app import BuiltApp
from eddy.app.plan import Builder
from eddy.app.topic import Topic
from eddy.errors import BrokerUnavailableError, ConfigError
from eddy.kafka_clients import connection_kwargs
from eddy.schemas.base import SchemaSerde
from eddy.serde import DecodeError, EncodeError, Json, JsonModel, Serde

SEND_TIMEOUT_S = 30.0


def app_topic(built: BuiltApp, name: str) -> Topic[Any]:
    """The topic ``name`` among those the app's agents declare."""
    found = {t.name: t for agent in built.agents.values() for t in agent.topics}
    if name not in found:
        known = ", ".join(sorted(found)) or "none"
        raise ConfigError(f"send: the app has no topic {name!r} (its topics: {known})")
    return found[name]


def encoded(
    topic: Topic[Any], text: str, key: str | None, builder: Builder | None = None
) -> tuple[bytes | None, bytes]:
    """The record's key and value bytes, or a ConfigError saying what is wrong.

    Args:
        builder: binds a schema registry's serdes (needed for such a topic only).
    """
    registry = isinstance(topic.serde, SchemaSerde) or isinstance(topic.key_serde, SchemaSerde)
    # The text is JSON whatever the topic's format: read it as the topic's model.
    reader = _json_reader(topic) if registry else topic.codec
    try:
        value = reader.decode(text.encode())
    except DecodeError as exc:
        raise ConfigError(f"send: not a value of topic {topic.name!r}: {exc}") from None
    if key is None and topic.key_of is not None:
        key = topic.key_of(value)
    if not registry:
        return (None if key is None else str(key).encode()), topic.codec.encode(value)
    if builder is None:
        raise ConfigError(f"send: topic {topic.name!r} needs the schema registry")
    target = builder.target(topic)
    try:
        data = target.encode(value)
    except EncodeError as exc:
        raise ConfigError(f"send: not a value of topic {topic.name!r}: {exc}") from None
    return target.key(None if key is None else str(key)), data


def _json_reader(topic: Topic[Any]) -> Serde[Any]:
    model = topic.value
    if isinstance(model, type) and issubclass(model, BaseModel):
        return JsonModel(model)
    return Json()


def headers_of(pairs: list[str]) -> list[tuple[str, bytes]]:
    """``--header NAME=VALUE`` options as Kafka headers, in the order given."""
    headers = []
    for pair in pairs:
        name, equals, value = pair.partition("=")
        if not equals or not name:
            raise ConfigError(f"send: --header {pair!r} is not NAME=VALUE")
        headers.append((name, value.encode()))
    return headers


async def _produce(
    built: BuiltApp,
    topic: str,
    key: bytes | None,
    value: bytes,
    headers: list[tuple[str, bytes]],
) -> Any:
    producer = AIOKafkaProducer(enable_idempotence=True, **connection_kwargs(built.settings))
    try:
        await asyncio.wait_for(producer.start(), SEND_TIMEOUT_S)
        sent = producer.send_and_wait(topic, value, key=key, headers=headers)
        return await asyncio.wait_for(sent, SEND_TIMEOUT_S)
    except (KafkaError, TimeoutError, OSError) as exc:
        raise BrokerUnavailableError(
            f"send: cannot write to {topic} at {built.settings.bootstrap_servers}: "
            f"{exc or type(exc).__name__}"
        ) from None
    finally:
        await producer.stop()


def run_cli(args: argparse.Namespace) -> int:
    from eddy.app.loader import load_app_and_settings

    # The registry client logs each request; a command's output is its own lines.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    app, settings = load_app_and_settings(getattr(args, "app", None))
    built = app.build(settings)
    topic = app_topic(built, args.topic)
    headers = headers_of(getattr(args, "header", []))
    key, value = encoded(topic, args.value, args.key, Builder(settings, built.schemas))
    physical = settings.topic(topic.name)
    meta = asyncio.run(_produce(built, physical, key, value, headers))
    answer = {"topic": physical, "partition": meta.partition, "offset": meta.offset}
    print(orjson.dumps(answer).decode())
    return 0
