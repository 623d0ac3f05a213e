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
    """A line of the input is not a record, a watermark or a processing time. The
    message names the line; fix it or remove it."""


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
            f"{'.'.join(str(p) for p in e['loc']) or 'spec'}: {e['msg']}" for e in exc.errors()
        )
        raise ConfigError(f"spec {path}: {problems}") from None
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"spec {path}: {exc}") from None
    return spec


def harness_for(spec: ReplaySpec) -> WindowHarness:
    key_of = field_getter(spec.key)
    return WindowHarness(
        spec.window_spec(),
        key=lambda record: str(key_of(record)),
        timestamp_ms=field_getter(spec.timestamp),
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
        _feed(harness, _parse(line, number), number)
        yield from harness.outputs[emitted:]
        emitted = len(harness.outputs)
    harness.end_of_input()
    yield from harness.outputs[emitted:]


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
    try:
        if kind == "record":
            harness.record(value)
        elif kind in ("watermark", "processing_time") and type(value) is int:
            if kind == "watermark":
                harness.watermark(value)
            else:
                harness.processing_time(value)
        else:
            raise ReplayInputError(f"line {number}: {kind!r} with {value!r} is not an input line")
    except (KeyError, TypeError) as exc:
        reason = f"the record lacks a field or has a bad one ({exc!r})"
        raise ReplayInputError(f"line {number}: {reason}") from None


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
