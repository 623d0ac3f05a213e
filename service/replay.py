"""``python -m service replay``: run a window spec over a JSON Lines file.

Input lines are ``{"record": {...}}``, ``{"watermark": <ms>}`` or
``{"processing_time": <ms>}``; output is one JSON line per emission, in emission
order. At the end of the input the watermark goes to +infinity, as Flink does
for a bounded input. This is how users test a window definition and reprocess
history without Kafka (docs/replay.md).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

import orjson
from pydantic import ValidationError

from service.errors import ConfigError, EddyError
from service.eventtime.harness import Emission, WindowHarness
from service.eventtime.spec import ReplaySpec, field_getter


class ReplayInputError(EddyError):
    """A line of the input is not a record, a watermark or a processing time, or a
    record the spec cannot read. The message names the line; fix it or remove it."""


class _BadTimestamp(TypeError):
    """A record's timestamp field is not integer milliseconds."""


def load_spec(path: Path) -> ReplaySpec:
    try:
        raw = orjson.loads(path.read_bytes())
    except OSError as exc:
        raise ConfigError(f"cannot read spec {path}: {exc.strerror}") from None
    except orjson.JSONDecodeError as exc:
        raise ConfigError(f"spec {path} is not JSON: {exc}") from None
    try:
        spec = ReplaySpec.model_validate(raw)
        spec.window_spec()  # reject impossible combinations now, not mid-input
    except ValidationError as exc:
        problems = "; ".join(
            f"{_field_path(raw, e['loc'])}: {e['msg'].removeprefix('Value error, ')}"
            for e in exc.errors()
        )
        raise ConfigError(f"spec {path}: {problems}") from None
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"spec {path}: {exc}") from None
    return spec


def _field_path(raw: Any, loc: tuple[int | str, ...]) -> str:
    """The dotted path of a field as the user wrote it: pydantic puts the type tag
    of a tagged union in the path (``assigner.tumbling.size_ms``), the file does
    not (``assigner.size_ms``)."""
    parts: list[str] = []
    tagged = False  # the tag comes once, right after the union's own field
    for part in loc:
        if _has(raw, part):
            raw, tagged = raw[part], False
        elif not tagged and isinstance(raw, dict) and raw.get("type") == part:
            tagged = True
            continue
        parts.append(str(part))
    return ".".join(parts) or "spec"


def _has(raw: Any, part: int | str) -> bool:
    if isinstance(raw, dict):
        return part in raw
    return isinstance(raw, list) and isinstance(part, int) and 0 <= part < len(raw)


def harness_for(spec: ReplaySpec) -> WindowHarness:
    key_of = field_getter(spec.key)
    timestamp_of = field_getter(spec.timestamp)

    def key(record: Any) -> str:
        return str(key_of(record))

    def timestamp_ms(record: Any) -> int:
        value = timestamp_of(record)
        if type(value) is not int:
            raise _BadTimestamp(f"field {spec.timestamp!r} is {value!r}, not integer milliseconds")
        return value

    return WindowHarness(
        spec.window_spec(),
        key=key,
        timestamp_ms=timestamp_ms,
        watermark=spec.watermark_strategy(),
        late_output=spec.late_output,
    )


def replay(spec: ReplaySpec, lines: Iterable[bytes]) -> Iterator[Emission]:
    """Feed ``lines`` to a harness; yield emissions as they happen."""
    harness = harness_for(spec)
    emitted = 0
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        item = _parse(line, number)
        with _reported(f"line {number}"):
            _feed(harness, item, number)
        yield from harness.outputs[emitted:]
        emitted = len(harness.outputs)
    with _reported("at the end of input"):
        harness.end_of_input()
    yield from harness.outputs[emitted:]


@contextlib.contextmanager
def _reported(where: str) -> Iterator[None]:
    """A record the spec's fields or function cannot handle, as one line."""
    try:
        yield
    except KeyError as exc:
        raise ReplayInputError(f"{where}: the record has no field {exc}") from None
    except _BadTimestamp as exc:
        raise ReplayInputError(f"{where}: {exc}") from None
    except (TypeError, ValueError, ArithmeticError) as exc:
        raise ReplayInputError(f"{where}: the window function cannot use a record: {exc}") from None


def _parse(line: bytes, number: int) -> dict[str, Any]:
    try:
        item = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise ReplayInputError(f"line {number}: not JSON ({exc})") from None
    if not isinstance(item, dict) or len(item) != 1:
        raise ReplayInputError(
            f'line {number}: expected one of {{"record": ...}}, {{"watermark": ms}}, '
            '{"processing_time": ms}'
        )
    return item


def _feed(harness: WindowHarness, item: dict[str, Any], number: int) -> None:
    ((kind, value),) = item.items()
    if kind == "record" and not isinstance(value, dict):
        raise ReplayInputError(f"line {number}: a record must be a JSON object, got {value!r}")
    if kind in ("watermark", "processing_time") and type(value) is not int:
        raise ReplayInputError(f"line {number}: {kind!r} must be integer milliseconds")
    if kind == "record":
        harness.record(value)
    elif kind == "watermark":
        harness.watermark(value)
    elif kind == "processing_time":
        harness.processing_time(value)
    else:
        raise ReplayInputError(
            f'line {number}: unknown line {{"{kind}": ...}}; expected "record", '
            '"watermark" or "processing_time"'
        )


def run_cli(args: argparse.Namespace) -> int:
    spec = load_spec(Path(args.spec))
    try:
        with contextlib.ExitStack() as files:
            source = files.enter_context(Path(args.input).open("rb"))
            out: IO[bytes] = sys.stdout.buffer
            if args.output:
                out = files.enter_context(Path(args.output).open("wb"))
            count = 0
            for emission in replay(spec, source):
                out.write(orjson.dumps(emission.to_json()) + b"\n")
                count += 1
    except OSError as exc:
        raise ConfigError(f"cannot read or write {exc.filename}: {exc.strerror}") from None
    print(f"replay: {count} emissions", file=sys.stderr)
    return 0
