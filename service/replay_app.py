"""Replaying agents of an app over a file, with no broker.

``eddy replay --app clicks:app --agent clicks_per_minute --input clicks.jsonl``
runs the agents as one partition of a worker would (the test driver): the same
decoding, dead-lettering, operators and state, a checkpoint after every line.
Records a stage sends to a topic another stage reads (a repartition topic) are
fed to it; what reaches any other topic is the output. At the end of the input
the watermark goes to +infinity, as in a replay of a spec and in
:meth:`TestDriver.end_of_input`: every window closes, every event-time timer
fires. With ``keep_open`` nothing is flushed: the output is what the running
agents would have emitted so far.

Input lines: ``{"topic": name, "record": {...}}`` (or ``"raw": "text"`` for bytes
that are not JSON), optionally with ``"key"`` (default: the record's key as its
topic declares it) and ``"timestamp_ms"`` (the Kafka timestamp); or
``{"processing_time": ms}``; or ``{"watermark": ms}``. Times are integer
milliseconds within the range a worker accepts (+-2^53).

Where a worker would retry a record an agent fails on and then dead-letter it
(an output JSON cannot carry, such as an overflowed aggregate, or an exception in
the agent's code), the replay stops with one line naming the input line and, for
the agent's code, the user's file and line. Either way the driver closes the
agents' resources when the replay ends (:meth:`TestDriver.close`).
"""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from eddy import testing
from eddy.errors import EddyError
from eddy.eventtime.timestamps import EVENT_TIME_RANGE, is_event_time
from eddy.pipeline.source import failure
from eddy.replay_files import InputLine, ReplayInputError
from eddy.serde import EncodeError
from eddy.testing import Sent, TestDriver


def replay_app(
    driver: TestDriver, lines: Iterable[InputLine], *, keep_open: bool = False
) -> Iterator[dict[str, Any]]:
    """Feed the input's lines (:func:`~eddy.replay_files.read_records`) to the
    driver's agents; yield every output record as JSON. What the driver recorded as
    sent is forgotten once yielded: the replay of a long input holds one line's
    output, not all of it. At the end the watermark goes to +infinity unless
    ``keep_open``."""
    internal = set(driver.internal_topics)
    del driver.sent[:]
    for number, value in lines:
        item = _parse(value, number)
        with _reported(f"line {number}"):
            _feed(driver, item, number)
        yield from _outputs(driver, internal)
    if keep_open:
        return
    with _reported("at the end of input"):
        driver.end_of_input()
    yield from _outputs(driver, internal)


def _outputs(driver: TestDriver, internal: set[str]) -> Iterator[dict[str, Any]]:
    fresh = driver.sent[:]
    del driver.sent[:]
    return (_to_json(s) for s in fresh if s.topic not in internal and not s.is_marker)


@contextlib.contextmanager
def _reported(where: str) -> Iterator[None]:
    """What goes wrong while the agents run, as one line saying where."""
    try:
        yield
    except ReplayInputError:  # already names its line
        raise
    except EddyError as exc:  # one line already (a registry down, say): say where
        raise ReplayInputError(f"{where}: {exc}") from None
    except EncodeError as exc:  # JSON cannot carry a value (NaN, infinity: an overflow)
        raise ReplayInputError(
            f"{where}: a result or a state value cannot be written: {exc}"
        ) from None
    except Exception as exc:  # an agent's code failed: say where, one line
        raise ReplayInputError(f"{where}: {failure('an agent', exc)}") from None


def _feed(driver: TestDriver, item: dict[str, Any], number: int) -> None:
    if "processing_time" in item:
        driver.set_time(item["processing_time"])
    elif "watermark" in item:
        driver.watermark(item["watermark"])
    else:
        value = item["raw"].encode() if "raw" in item else orjson.dumps(item["record"])
        try:
            driver.send(
                item["topic"], value, key=item.get("key"), timestamp_ms=item.get("timestamp_ms")
            )
        except ValueError as exc:
            if _refused_by_driver(exc):  # a topic no agent reads
                raise ReplayInputError(f"line {number}: {exc}") from None
            raise


def _refused_by_driver(exc: BaseException) -> bool:
    """Whether the driver refused the record itself (it raises before any agent
    runs), rather than an agent failing on it."""
    frames = traceback.extract_tb(exc.__traceback__)
    return bool(frames) and Path(frames[-1].filename) == Path(testing.__file__)


def _parse(item: Any, number: int) -> dict[str, Any]:
    if isinstance(item, dict) and len(item) == 1:
        ((kind, value),) = item.items()
        if kind in ("processing_time", "watermark"):
            if type(value) is not int:
                raise ReplayInputError(f"line {number}: {kind!r} must be integer milliseconds")
            _check_time(kind, value, number)
            return item
    allowed = {"topic", "record", "raw", "key", "timestamp_ms"}
    ok = (
        isinstance(item, dict)
        and isinstance(item.get("topic"), str)
        and set(item) <= allowed
        and len({"record", "raw"} & set(item)) == 1
        and isinstance(item.get("raw", ""), str)
        and isinstance(item.get("key", ""), str)
        and type(item.get("timestamp_ms", 0)) is int
    )
    if not ok:
        raise ReplayInputError(
            f'line {number}: expected {{"topic": name, "record": {{...}}}} (or "raw": "text"; '
            'optional "key", "timestamp_ms"), {"processing_time": ms} or {"watermark": ms}'
        )
    if "timestamp_ms" in item:
        _check_time("timestamp_ms", item["timestamp_ms"], number)
    return dict(item)


def _check_time(name: str, value: int, number: int) -> None:
    if not is_event_time(value):
        raise ReplayInputError(f"line {number}: {name!r} {value} is outside {EVENT_TIME_RANGE}")


def _to_json(sent: Sent) -> dict[str, Any]:
    body: dict[str, Any] = {"topic": sent.topic, "key": _text(sent.key)}
    body["value"] = _json_or_text(sent.value)
    if sent.timestamp_ms is not None:
        body["timestamp_ms"] = sent.timestamp_ms
    if sent.reason is not None:
        body["reason"] = sent.reason
    return body


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", "replace")


def _json_or_text(data: bytes | None) -> Any:
    if data is None:
        return None
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return data.decode("utf-8", "replace")
