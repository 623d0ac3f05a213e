"""One input of a stage: from a consumed record to keyed, timestamped elements.

Every stage reads its records through a :class:`Source`, so decoding,
dead-lettering and the key check are written once:

1. decode the value with the topic's serde (a bad record is dead-lettered with
   the reason and its original bytes);
2. read the Kafka key (UTF-8 text, or the topic's key serde; a key that is not
   valid UTF-8 is dead-lettered, never patched: two such keys would merge into
   one); if the topic declares its key, check that the Kafka record key is that
   key: a record keyed otherwise sits in the wrong partition, and processing it
   would spread one key's state over two tasks, so it is dead-lettered instead;
3. read the event time (a field of the value, or the Kafka timestamp) and check
   it is a real time (within +-2^53 ms; a record outside is dead-lettered);
4. run the fused stateless steps (filter, map, flat_map): one record gives zero
   or more elements, each with the record's event time;
5. key each element (the stage's key, or the record's own).

A user function that raises on a record sends the record to the dead-letter
topic with the exception and the line of the user's code that raised it.

Before a batch is read, :func:`prefetch_schemas` fetches the writer schemas its
records name that the topic's schema-registry serdes do not know yet, off the
event loop: reading a record never waits on the registry.
"""

from __future__ import annotations

import logging
import sysconfig
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, NamedTuple

import orjson
from pydantic import BaseModel

from eddy.eventtime.timestamps import EVENT_TIME_RANGE, MAX_EVENT_TIME_MS
from eddy.pipeline.base import InputRecord, Output
from eddy.schemas.base import BoundSerde
from eddy.serde import DecodeError, Serde

log = logging.getLogger(__name__)

Steps = Callable[[Any], Iterable[Any]]
# Frames in these folders are not the user's: Eddy itself, the standard library
# and installed packages (pydantic raising inside a user's validator, say).
_NOT_USER = tuple(
    {Path(__file__).resolve().parents[1]}
    | {Path(sysconfig.get_paths()[k]).resolve() for k in ("stdlib", "purelib", "platlib")}
)


class Read(NamedTuple):
    """What one record gives: its event time and its elements as ``(key, value)``.

    A named tuple rather than a frozen dataclass: one is built per record, and a
    frozen dataclass takes three times as long to build.
    """

    timestamp_ms: int
    elements: list[tuple[str, Any]]
    value: Any = None  # the record's decoded value (a punctuated watermark reads it)


@dataclass(frozen=True)
class Source:
    """How a stage reads one topic (``topic`` is the name on the broker)."""

    topic: str
    serde: Serde[Any]
    record_key: Callable[[Any], str] | None = None
    timestamp_ms: Callable[[Any], int] | None = None
    steps: Steps | None = None
    key: Callable[[Any], str] | None = None
    # How elements (after the steps) are written to and read from a repartition
    # topic; None: the topic's serde (when there are no steps, elements are values).
    element_serde: Serde[Any] | None = None
    # How Kafka keys are read; None: UTF-8 text.
    key_serde: Serde[Any] | None = None
    # The Kafka key is the key (Topic(kafka_key=True)): a record without one has none.
    require_key: bool = False

    @property
    def element(self) -> Serde[Any]:
        return self.element_serde or self.serde

    def after_repartition(self, topic: str) -> Source:
        """This input as read back from repartition topic ``topic``: elements keyed
        by the Kafka key Eddy wrote, timed by the Kafka timestamp it set."""
        return Source(topic, self.element, None, None, None, None)

    @property
    def keyed(self) -> bool:
        """Whether every element has a key its stage may keep state under."""
        return self.key is not None or self.record_key is not None or self.require_key

    async def prefetch(self, records: Sequence[InputRecord]) -> None:
        """Fetch the writer schemas ``records`` name that this input's registry
        serdes (values, keys) do not know yet."""
        if isinstance(self.serde, BoundSerde):
            await _prefetch(self.serde, [r.value for r in records])
        if isinstance(self.key_serde, BoundSerde):
            await _prefetch(self.key_serde, [r.key for r in records])

    def read(self, record: InputRecord, out: Output) -> Read | None:
        """The record's elements, or None after dead-lettering it.

        Runs once per record: the common case (no steps, no ``key_by``) is written
        out here rather than through the helpers below.
        """
        try:
            value = self.serde.decode(record.value)
        except DecodeError as exc:
            out.dead_letter(record, exc.reason)
            return None
        record_key = self._record_key(record, value, out)
        if record_key is False:
            return None
        timestamp_ms = self._timestamp(record, value, out)
        if timestamp_ms is None:
            return None
        if self.steps is None and self.key is None:
            key: Any = record_key  # a str, or None: the record has no key
            return Read(timestamp_ms, [(key, value)], value)
        elements = self._elements(record, value, out)
        if elements is None:
            return None
        return self._keyed(record, value, elements, record_key, timestamp_ms, out)

    def _record_key(self, record: InputRecord, value: Any, out: Output) -> str | bool | None:
        if self.key_serde is not None:
            return self._decoded_key(record, value, out)
        if self.record_key is None:
            if record.key is not None:
                try:
                    return record.key.decode()
                except UnicodeDecodeError as exc:
                    out.dead_letter(record, f"key: {not_text(exc)}")
                    return False
            if self.require_key:
                out.dead_letter(record, f"no key: topic {self.topic} is keyed by its Kafka keys")
                return False
            return None
        try:
            key = self.record_key(value)
        except Exception as exc:  # a user function failed on this record: keep the record
            out.dead_letter(record, failure("key", exc))
            return False
        if type(key) is not str:
            out.dead_letter(record, f"key: {key!r} is not a str")
            return False
        if record.key != key.encode():
            found = None if record.key is None else shown_key(record.key)
            out.dead_letter(
                record,
                f"record key {found!r} is not its value's key {key!r}: topic {self.topic} is "
                "declared keyed by it, and a record in another key's partition would split "
                "that key's state",
            )
            return False
        return key

    def _decoded_key(self, record: InputRecord, value: Any, out: Output) -> str | bool | None:
        """The key decoded by the topic's key serde (the keyed-by check compares it,
        not the bytes: the same key has other bytes under another schema id)."""
        assert self.key_serde is not None
        if record.key is None:
            return None
        try:
            key = as_key(self.key_serde.decode(record.key))
        except DecodeError as exc:
            out.dead_letter(record, f"key: {exc.reason}")
            return False
        if self.record_key is None:
            return key
        try:
            expected = self.record_key(value)
        except Exception as exc:  # a user function failed on this record: keep the record
            out.dead_letter(record, failure("key", exc))
            return False
        if expected != key:
            out.dead_letter(
                record,
                f"record key {key!r} is not its value's key {expected!r}: topic {self.topic} "
                "is declared keyed by it",
            )
            return False
        return key

    def _timestamp(self, record: InputRecord, value: Any, out: Output) -> int | None:
        if self.timestamp_ms is None:
            # A producer may set any 64-bit Kafka timestamp: held to the same range.
            return _in_range(record, record.timestamp, "Kafka timestamp", out)
        try:
            timestamp_ms = self.timestamp_ms(value)
        except Exception as exc:  # a user function failed on this record: keep the record
            out.dead_letter(record, failure("timestamp", exc))
            return None
        if type(timestamp_ms) is not int:
            out.dead_letter(record, f"timestamp: {timestamp_ms!r} is not integer milliseconds")
            return None
        return _in_range(record, timestamp_ms, "timestamp", out)

    def _elements(self, record: InputRecord, value: Any, out: Output) -> Sequence[Any] | None:
        if self.steps is None:
            return (value,)
        try:
            return list(self.steps(value))
        except Exception as exc:  # a user function failed on this record: keep the record
            out.dead_letter(record, failure("a step", exc))
            return None

    def _keyed(
        self,
        record: InputRecord,
        value: Any,
        elements: Sequence[Any],
        record_key: Any,
        timestamp_ms: int,
        out: Output,
    ) -> Read | None:
        if self.key is None:
            return Read(timestamp_ms, [(record_key, e) for e in elements], value)
        keyed = []
        for element in elements:
            try:
                key = self.key(element)
            except Exception as exc:  # a user function failed on this record: keep it
                out.dead_letter(record, failure("key_by", exc))
                return None
            if type(key) is not str:
                out.dead_letter(record, f"key_by: {key!r} is not a str")
                return None
            keyed.append((key, element))
        return Read(timestamp_ms, keyed, value)


def _in_range(record: InputRecord, timestamp_ms: int, what: str, out: Output) -> int | None:
    """``timestamp_ms`` if it is a real time (is_event_time), else dead-letter the record."""
    if -MAX_EVENT_TIME_MS <= timestamp_ms <= MAX_EVENT_TIME_MS:
        return timestamp_ms
    out.dead_letter(
        record, f"{what}: {timestamp_ms} ms is outside {EVENT_TIME_RANGE} (not a real time)"
    )
    return None


async def prefetch_schemas(pipeline: object, topic: str, records: Sequence[InputRecord]) -> None:
    """Before a task reads a batch of ``topic``: fetch, off the event loop, the
    writer schemas its records name that the pipeline's inputs of that topic do
    not know yet, so reading finds them cached. Never raises: what could not be
    fetched fails the records that need it, when they are read."""
    for source in _inputs(pipeline):
        if source.topic == topic:
            try:
                await source.prefetch(records)
            except Exception:  # a bug here must not stop the task: reading says more
                log.exception("fetching the schemas of a batch of %s failed", topic)


def _inputs(pipeline: object) -> list[Source]:
    """The sources of any stage: one (``source``), co-partitioned (``inputs``),
    and a broadcast input."""
    found = list(getattr(pipeline, "inputs", ()))
    for name in ("source", "broadcast"):
        one = getattr(pipeline, name, None)
        if isinstance(one, Source):
            found.append(one)
    return found


async def _prefetch(serde: BoundSerde, raws: list[bytes | None]) -> None:
    missing = serde.missing(raws)
    if missing:
        await serde.binding.registry.prefetch(missing)


def as_key(decoded: Any) -> str:
    """A decoded Kafka key as the str Eddy keys state by: itself if a str, its UTF-8
    text if bytes (as a key without a key serde), else its canonical JSON (sorted
    fields; bytes inside as Avro's JSON encoding writes them), so equal keys are
    equal strings.

    Raises:
        DecodeError: bytes that are not UTF-8, or a value JSON cannot hold.
    """
    if isinstance(decoded, str):
        return decoded
    if isinstance(decoded, bytes | bytearray):
        try:
            return bytes(decoded).decode()
        except UnicodeDecodeError as exc:
            raise DecodeError(not_text(exc)) from None
    if isinstance(decoded, BaseModel):
        decoded = decoded.model_dump(mode="json")
    try:
        return orjson.dumps(
            decoded,
            option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS,
            default=_json_of_key_part,
        ).decode()
    except TypeError as exc:
        raise DecodeError(f"a key of {type(decoded).__name__} Eddy cannot key by: {exc}") from None


def _json_of_key_part(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("latin-1")  # Avro's JSON encoding: one code point a byte
    if isinstance(value, Decimal):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


def not_text(exc: UnicodeDecodeError) -> str:
    """Why a key is refused: its bytes are not UTF-8 text."""
    bad = exc.object[exc.start : exc.start + 4]
    return (
        f"not UTF-8 text ({exc.reason} at byte {exc.start}: {bytes(bad)!r}); Eddy keys "
        "records by text and never patches a key (two keys would merge): give the topic a "
        "key_serde that reads these keys"
    )


def shown_key(key: bytes) -> str:
    """A Kafka key as a message shows it: its text, or its bytes if it has none."""
    try:
        return key.decode()
    except UnicodeDecodeError:
        return repr(key)


def failure(what: str, exc: BaseException) -> str:
    """``<what> raised <exc> at <file>:<line> in <function>``: the innermost frame
    of the user's code, so a dead letter points at the line to fix."""
    return f"{what} raised {exc!r}{user_frame(exc)}"


def user_frame(exc: BaseException) -> str:
    """`` at <file>:<line> in <function>`` of the innermost frame of the user's
    code in ``exc``'s traceback, or "" if none is the user's."""
    frames = traceback.extract_tb(exc.__traceback__)
    user = [f for f in frames if not _is_library(f.filename)]
    if not user:
        return ""
    frame = user[-1]
    return f" at {Path(frame.filename).name}:{frame.lineno} in {frame.name}"


def _is_library(filename: str) -> bool:
    path = Path(filename).resolve()
    return any(path.is_relative_to(folder) for folder in _NOT_USER)
