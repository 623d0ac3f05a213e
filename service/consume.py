"""``eddy consume TOPIC``: read a topic of the app, decoded as the app declares it.

The reading twin of ``eddy send`` (Kafka's console consumer, ``kcat -C``): each
record's key and value go through the topic's own serdes (JSON validated by its
model, or Avro, Protobuf and JSON Schema through the schema registry), so what is
printed is what the agents see. It reads every partition without a consumer
group (it commits nothing and moves no agent's offsets) and with
``read_committed`` isolation, so the records of an aborted transaction (a worker
that crashed mid-checkpoint under exactly-once) never show. A record that does
not decode is printed raw with the reason, and reading goes on: that is the record
one wants to see. A topic the app does not declare (a dead-letter or repartition
topic) is read raw.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, ConsumerRecord
from aiokafka.errors import KafkaError
from pydantic import BaseModel

from eddy.app.app import BuiltApp
from eddy.app.plan import Builder
from eddy.app.topic import Topic
from eddy.errors import BrokerUnavailableError, ConfigError
from eddy.kafka_clients import connection_kwargs
from eddy.redact import redact
from eddy.serde import DecodeError, Serde

CONNECT_TIMEOUT_S = 30.0
#: How long one poll waits at most: the idle timeout and Ctrl-C are checked this often.
POLL_MS = 500
#: Without --follow or --count, reading stops after this long without a record.
DEFAULT_TIMEOUT_MS = 5000


@dataclass(frozen=True)
class Decoder:
    """How the records of one topic are read: the app's serdes, or raw bytes."""

    value: Serde[Any] | None  # None: the app does not declare the topic (raw)
    key: Serde[Any] | None = None  # None: UTF-8 text, as the agents read keys

    def decode(self, record: ConsumerRecord[bytes, bytes]) -> dict[str, Any]:
        """The record as one JSON document: decoded key and value, or raw ones with
        ``error`` saying why they did not decode."""
        line: dict[str, Any] = {
            "partition": record.partition,
            "offset": record.offset,
            "timestamp_ms": record.timestamp,
        }
        errors: list[str] = []
        line["key"] = self._decoded(self.key, record.key, "key", errors)
        line["value"] = self._decoded(self.value, record.value, "value", errors)
        line["headers"] = {name: raw_json(data) for name, data in record.headers}
        if errors:
            line["error"] = "; ".join(errors)
        return line

    def _decoded(
        self, serde: Serde[Any] | None, data: bytes | None, what: str, errors: list[str]
    ) -> Any:
        if data is None or serde is None:
            return raw_json(data)
        try:
            return jsonable(serde.decode(data))
        except DecodeError as exc:
            # A reason may quote the registry's URL: never with its password.
            errors.append(f"{what}: {redact(str(exc))}")
            return raw_json(data)


def raw_json(data: bytes | None) -> Any:
    """Bytes as JSON can carry them: their text if they are UTF-8, else
    ``{"base64": ...}`` (a string could be either, an object cannot)."""
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}


def jsonable(value: Any) -> Any:
    """A decoded value as JSON: a pydantic model by its fields, a Protobuf message
    by its field names (int64 as text, as Protobuf's JSON mapping writes it)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if hasattr(value, "DESCRIPTOR") and hasattr(value, "SerializeToString"):
        from google.protobuf.json_format import MessageToDict

        return MessageToDict(value, preserving_proto_field_name=True)
    return value


def declared_topics(built: BuiltApp) -> dict[str, Topic[Any]]:
    """The topics the app's agents declare, by their name in the app."""
    return {t.name: t for agent in built.agents.values() for t in agent.topics}


def decoder_for(built: BuiltApp, topic: Topic[Any] | None) -> Decoder:
    """The serdes a source of ``topic`` would read it with (registry ones bound)."""
    if topic is None:
        return Decoder(None)
    builder = Builder(built.settings, built.schemas)
    return Decoder(builder.codec(topic), builder.key_codec(topic))


def text_line(line: dict[str, Any]) -> str:
    """One record for a person: ``partition=0 offset=5 timestamp_ms=1000 key=s1
    value={...}``, then its headers and the reason it did not decode, if any."""
    parts = [
        f"partition={line['partition']}",
        f"offset={line['offset']}",
        f"timestamp_ms={line['timestamp_ms']}",
        f"key={_text(line['key'])}",
        f"value={_text(line['value'])}",
    ]
    if line["headers"]:
        parts.append(f"headers={_text(line['headers'])}")
    if "error" in line:
        parts.append(f"error={line['error']}")
    return " ".join(parts)


def _text(value: Any) -> str:
    # Text as it is, unless a line break or a control character would cut the
    # line: then quoted, as JSON escapes it.
    if isinstance(value, str) and value.isprintable():
        return value
    return orjson.dumps(value).decode()


@dataclass
class Reading:
    """What to read and when to stop."""

    topic: str  # physical name
    from_end: bool
    count: int | None
    timeout_ms: int | None  # None: until --count records, or Ctrl-C
    decoder: Decoder
    emit: Callable[[dict[str, Any]], None]
    note: str | None = None  # said once on stderr when reading starts (a raw topic)
    read: int = 0
    undecoded: int = 0

    def done(self) -> bool:
        return self.count is not None and self.read >= self.count


async def consume(built: BuiltApp, reading: Reading, declared: list[str]) -> None:
    """Read ``reading.topic`` from every partition until a stop condition holds.

    Raises:
        BrokerUnavailableError: the broker did not answer.
        ConfigError: the topic does not exist on the broker.
    """
    # No group: every partition is assigned to this consumer, nothing is committed,
    # so where it starts is the reset policy's to say.
    consumer = AIOKafkaConsumer(
        group_id=None,
        enable_auto_commit=False,
        isolation_level="read_committed",
        auto_offset_reset="latest" if reading.from_end else "earliest",
        **connection_kwargs(built.settings),
    )
    try:
        await _start(consumer, built)
        await _check_exists(consumer, reading.topic, declared)
        if reading.note is not None:
            print(reading.note, file=sys.stderr)
        consumer.subscribe([reading.topic])
        await _read(consumer, reading)
    finally:
        await consumer.stop()


async def _start(consumer: AIOKafkaConsumer, built: BuiltApp) -> None:
    try:
        await asyncio.wait_for(consumer.start(), CONNECT_TIMEOUT_S)
    except (KafkaError, TimeoutError, OSError) as exc:
        raise BrokerUnavailableError(
            f"consume: cannot reach the broker at {built.settings.bootstrap_servers}: "
            f"{exc or type(exc).__name__}"
        ) from None


async def _check_exists(consumer: AIOKafkaConsumer, topic: str, declared: list[str]) -> None:
    # topics() lists what exists without asking for the topic itself, which a
    # broker with auto.create.topics.enable would answer by creating it.
    if topic not in await consumer.topics():
        known = ", ".join(declared) or "none"
        raise ConfigError(f"consume: no topic {topic!r} on the broker (the app's topics: {known})")


async def _read(consumer: AIOKafkaConsumer, reading: Reading) -> None:
    last_ms = time.monotonic() * 1000
    while not reading.done():
        batches = await consumer.getmany(timeout_ms=POLL_MS)
        now_ms = time.monotonic() * 1000
        if not batches:
            if reading.timeout_ms is not None and now_ms - last_ms >= reading.timeout_ms:
                return
            continue
        last_ms = now_ms
        for records in batches.values():
            for record in records:
                line = reading.decoder.decode(record)
                reading.undecoded += "error" in line
                reading.emit(line)
                reading.read += 1
                if reading.done():
                    return


def run_cli(args: argparse.Namespace) -> int:
    from eddy.app.loader import load_app_and_settings

    # The registry client logs each request; a command's output is its own lines.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    app, settings = load_app_and_settings(getattr(args, "app", None))
    built = app.build(settings)
    topics = declared_topics(built)
    declared = sorted(topics)
    # The app's name for a topic, or its name on the broker (prefix and all).
    topic = topics.get(args.topic) or {settings.topic(n): t for n, t in topics.items()}.get(
        args.topic
    )
    note = None
    if topic is None:  # a dead-letter or repartition topic, say: its full name
        note = (
            f"consume: the app declares no topic {args.topic!r} (its topics: "
            f"{', '.join(declared) or 'none'}): its records are shown raw"
        )
    physical = args.topic if topic is None else settings.topic(topic.name)
    timeout_ms = args.timeout_ms
    if timeout_ms is None and not args.follow and args.count is None:
        timeout_ms = DEFAULT_TIMEOUT_MS
    reading = Reading(
        topic=physical,
        from_end=args.from_end,
        count=args.count,
        timeout_ms=timeout_ms,
        decoder=decoder_for(built, topic),
        emit=_printer(args.json),
        note=note,
    )
    # --follow ends with Ctrl-C: that is its normal end, not an error.
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(consume(built, reading, declared))
    summary = f"consume: {reading.read} records"
    if reading.undecoded:
        summary += f", {reading.undecoded} not decoded (printed raw, with the reason)"
    print(summary, file=sys.stderr)
    return 0


def _printer(as_json: bool) -> Callable[[dict[str, Any]], None]:
    def emit(line: dict[str, Any]) -> None:
        text = orjson.dumps(line).decode() if as_json else text_line(line)
        print(text, flush=True)

    return emit
