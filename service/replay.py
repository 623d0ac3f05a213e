"""``python -m eddy replay``: run a window spec over a JSON Lines file.

Input lines are ``{"record": {...}}``, ``{"watermark": <ms>}`` or
``{"processing_time": <ms>}``; output is one JSON line per emission, in emission
order, in the form of a replay of agents (``{"topic", "key", "value",
"timestamp_ms"}``: the record a worker would send). At the end of the input the
watermark goes to +infinity, as Flink does for a bounded input, unless
``--keep-open`` says to leave the windows open. This is how users test a window
definition and reprocess history without Kafka (docs/replay.md).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

import orjson
from pydantic import BaseModel, ValidationError

from eddy.errors import ConfigError, EddyError
from eddy.eventtime.harness import ProcessHarness, WindowHarness
from eddy.eventtime.process import Emitted
from eddy.eventtime.process_spec import ProcessReplaySpec
from eddy.eventtime.spec import ReplaySpec, field_getter
from eddy.eventtime.timestamps import EVENT_TIME_RANGE, is_event_time
from eddy.replay_files import (
    DEFAULT_MAX_LINE_BYTES,
    InputLine,
    ReplayInputError,
    output_file,
    read_records,
)
from eddy.serde import EncodeError, encode_json

#: A spec is a page of JSON; anything larger is not one (``--spec /dev/zero``).
MAX_SPEC_BYTES = 1024 * 1024


class _BadRecord(Exception):
    """A record lacks what the spec reads from it: a field, or a time in range. The
    input's mistake, told apart from an error of the user's function."""


AnySpec = ReplaySpec | ProcessReplaySpec


def load_spec(path: Path) -> AnySpec:
    try:
        with path.open("rb") as source:
            text = source.read(MAX_SPEC_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"cannot read spec {path}: {exc.strerror}") from None
    if len(text) > MAX_SPEC_BYTES:
        raise ConfigError(f"spec {path} is larger than {MAX_SPEC_BYTES} bytes: not a spec")
    try:
        raw = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise ConfigError(f"spec {path} is not JSON: {exc}") from None
    try:
        spec: AnySpec
        if isinstance(raw, dict) and raw.get("kind") == "pipeline":
            raise ConfigError(
                f"spec {path}: whole agents replay with --app module:app --agent NAME "
                "(no spec); see docs/replay.md"
            )
        if isinstance(raw, dict) and raw.get("kind") == "process":
            spec = ProcessReplaySpec.model_validate(raw)
            spec.build_function()  # reject an unknown function now, not mid-input
        else:
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


def _key_reader(path: str) -> Callable[[Any], str]:
    read = _reader(path)
    return lambda record: str(read(record))


def _reader(path: str) -> Callable[[Any], Any]:
    """Read a (dotted) field of a record; a missing one is a :class:`_BadRecord`."""
    get = field_getter(path)

    def read(record: Any) -> Any:
        try:
            return get(record)
        except KeyError as exc:
            raise _BadRecord(f"the record has no field {exc}") from None
        except TypeError:  # a part of the path is not an object
            raise _BadRecord(f"the record has no field {path!r}") from None

    return read


def _time_reader(path: str) -> Callable[[Any], int]:
    """Read a record's time: integer milliseconds within the range the worker
    accepts (it dead-letters a record outside it)."""
    read = _reader(path)

    def timestamp_ms(record: Any) -> int:
        value = read(record)
        if type(value) is not int:
            raise _BadRecord(f"field {path!r} is {value!r}, not integer milliseconds")
        if not is_event_time(value):
            raise _BadRecord(f"field {path!r} is {value} ms, outside {EVENT_TIME_RANGE}")
        return value

    return timestamp_ms


def harness_for(spec: ReplaySpec) -> WindowHarness:
    return WindowHarness(
        spec.window_spec(),
        key=_key_reader(spec.key),
        timestamp_ms=_time_reader(spec.timestamp),
        watermark=spec.watermark_strategy(),
        late_output=spec.late_output,
        inputs=spec.inputs or ("input",),
    )


def process_harness_for(spec: ProcessReplaySpec) -> ProcessHarness:
    def no_time(record: Any) -> None:
        return None  # this input has no event time

    times: list[Callable[[Any], int | None]] = [
        no_time if i.timestamp is None else _time_reader(i.timestamp) for i in spec.inputs
    ]
    return ProcessHarness(
        spec.build_function(),
        key=[_key_reader(i.key) for i in spec.inputs],
        timestamp_ms=times,
        watermark=spec.watermark_strategy(),
        inputs=[i.name for i in spec.inputs],
    )


def replay(
    spec: AnySpec, lines: Iterable[InputLine], *, keep_open: bool = False
) -> Iterator[bytes]:
    """Feed the input's lines (:func:`~eddy.replay_files.read_records`) to a
    harness; yield each emission as a JSON line as it happens. Emissions are not
    kept once yielded, so a long input costs the memory of its state, not of its
    output. At the end the watermark goes to +infinity (every window fires, every
    event-time timer), unless ``keep_open``: then the output stops where the input
    does, as a running worker's would.

    Raises:
        ReplayInputError: a line the spec cannot read, the function failing on it, or
            an emission JSON cannot carry (an overflow); the message names the line.
    """
    harness: WindowHarness | ProcessHarness
    if isinstance(spec, ProcessReplaySpec):
        harness = process_harness_for(spec)
    else:
        harness = harness_for(spec)
    users = isinstance(spec, ProcessReplaySpec)  # the function is the user's code
    # A window result's record names its key as the spec's key field does.
    key_field = "key" if isinstance(spec, ProcessReplaySpec) else spec.key
    for number, value in lines:
        item = _parse(value, number)
        with _reported(f"line {number}", users):
            _feed(harness, item, number)
        yield from _encoded(_drained(harness, key_field), f"line {number}")
    if keep_open:
        return
    with _reported("at the end of input", users):
        harness.end_of_input()
    yield from _encoded(_drained(harness, key_field), "at the end of input")


def _drained(harness: WindowHarness | ProcessHarness, key_field: str) -> list[dict[str, Any]]:
    """The emissions since the last line, as the JSON objects the replay writes: the
    records a worker would send, as a replay of agents writes them."""
    if isinstance(harness, ProcessHarness):
        return [_process_line(e) for e in harness.drain()]
    return [e.to_json(key_field) for e in harness.drain()]


def _process_line(emitted: Emitted) -> dict[str, Any]:
    line: dict[str, Any] = {"topic": emitted.output, "key": emitted.key, "value": emitted.value}
    if emitted.timestamp_ms is not None:
        line["timestamp_ms"] = emitted.timestamp_ms
    return line


@contextlib.contextmanager
def _reported(where: str, users: bool) -> Iterator[None]:
    """A record the spec's fields or function cannot handle, as one line. A process
    function is the user's code: whatever it raises names the user's file and line."""
    try:
        yield
    except ReplayInputError:  # already names its line
        raise
    except EddyError as exc:  # one line already; say where
        raise ReplayInputError(f"{where}: {exc}") from None
    except _BadRecord as exc:
        raise ReplayInputError(f"{where}: {exc}") from None
    except Exception as exc:  # the user's function, or a record the window function cannot use
        if users:
            # Imported here: the worker's modules it lives with load RocksDB.
            from eddy.pipeline.source import failure

            raise ReplayInputError(f"{where}: {failure('the process function', exc)}") from None
        if isinstance(exc, KeyError):
            raise ReplayInputError(f"{where}: the record has no field {exc}") from None
        if isinstance(exc, TypeError | ValueError | ArithmeticError):
            raise ReplayInputError(
                f"{where}: the window function cannot use a record: {exc}"
            ) from None
        raise


def _encoded(bodies: list[dict[str, Any]], where: str) -> list[bytes]:
    """The emissions of one line as JSON, every one checked before any is written.

    JSON has no infinity or NaN; orjson would write ``null``, passing an overflowed
    aggregate off as a missing value. The worker's serde refuses them too.
    """
    lines = []
    for body in bodies:
        try:
            lines.append(encode_json(body))
        except EncodeError as exc:
            bad = _non_finite(body)
            if bad is None:
                raise ReplayInputError(f"{where}: {exc}") from None
            raise ReplayInputError(
                f"{where}: the emission for key {body.get('key')!r} holds {bad!r}, "
                "which is not finite JSON (an overflow?)"
            ) from None
    return lines


def _non_finite(value: Any) -> float | None:
    """The first infinity or NaN in ``value``, if any."""
    if isinstance(value, float):
        return None if math.isfinite(value) else value
    if isinstance(value, BaseModel):
        value = value.model_dump()
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list | tuple | set | frozenset):
        for item in value:
            found = _non_finite(item)
            if found is not None:
                return found
    return None


def _parse(item: Any, number: int) -> dict[str, Any]:
    ok = isinstance(item, dict) and (
        len(item) == 1 or (len(item) == 2 and "record" in item and "input" in item)
    )
    if not ok:
        raise ReplayInputError(
            f'line {number}: expected one of {{"record": ...[, "input": name]}}, '
            '{"watermark": ms}, {"processing_time": ms}, {"broadcast": ...}'
        )
    return dict(item)


def _feed(harness: WindowHarness | ProcessHarness, item: dict[str, Any], number: int) -> None:
    source = item.pop("input", None)
    if source is not None and source not in harness.inputs:
        raise ReplayInputError(
            f"line {number}: unknown input {source!r}; the spec has {', '.join(harness.inputs)}"
        )
    ((kind, value),) = item.items()
    if kind == "broadcast":
        if not isinstance(harness, ProcessHarness):
            raise ReplayInputError(f"line {number}: broadcast lines need a process spec")
        harness.broadcast(value)
        return
    if kind == "record" and not isinstance(value, dict):
        raise ReplayInputError(f"line {number}: a record must be a JSON object, got {value!r}")
    if kind in ("watermark", "processing_time"):
        if type(value) is not int:
            raise ReplayInputError(f"line {number}: {kind!r} must be integer milliseconds")
        if not is_event_time(value):
            raise ReplayInputError(f"line {number}: {kind!r} {value} is outside {EVENT_TIME_RANGE}")
    if kind == "record":
        harness.record(value, source)
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
    if (args.spec is None) == (args.agent is None):
        raise ConfigError("replay: give --spec FILE, or --agent NAME (with --app)")
    max_line_bytes = args.max_line_bytes or DEFAULT_MAX_LINE_BYTES
    _check_paths(args.input, args.output, args.spec)
    with contextlib.ExitStack() as stack:
        emissions = _emissions(args, stack)
        try:
            source = stack.enter_context(Path(args.input).open("rb"))
        except OSError as exc:
            raise ConfigError(f"cannot read or write {exc.filename}: {exc.strerror}") from None
        out: IO[bytes] = sys.stdout.buffer
        if args.output:
            out = stack.enter_context(output_file(args.output))
        count = 0
        for emission in emissions(read_records(source, max_line_bytes=max_line_bytes)):
            out.write(emission + b"\n")
            count += 1
    print(f"replay: {count} emissions", file=sys.stderr)
    return 0


def _check_paths(source: str, output: str | None, spec: str | None) -> None:
    """The output replaces its target when the replay ends: before anything is
    opened, refuse an output that is the input or the spec under any name (the same
    path, a symlink or a hard link)."""
    if output is None:
        return
    for role, path in (("input", source), ("spec", spec)):
        if path is not None and _same_file(output, path):
            raise ConfigError(f"replay: --output {output} is the {role} file; write elsewhere")


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet): not one file
        return False


def _emissions(
    args: argparse.Namespace, stack: contextlib.ExitStack
) -> Callable[[Iterable[InputLine]], Iterator[bytes]]:
    if args.spec is not None:
        spec = load_spec(Path(args.spec))
        return lambda lines: replay(spec, lines, keep_open=args.keep_open)
    from eddy.app.loader import load_app
    from eddy.replay_app import replay_app
    from eddy.settings import reject_unknown_variables
    from eddy.testing import TestDriver

    app = load_app(args.app)
    agents = [a.strip() for a in args.agent.split(",") if a.strip()]
    if not agents:  # the driver would run the app's default agents instead
        raise ConfigError(
            f"replay: --agent {args.agent!r} names no agent of app {app.name} "
            f"(its agents: {', '.join(app.agent_names)})"
        )
    reject_unknown_variables(app.settings_classes())  # a misspelt one, as a worker does
    driver = stack.enter_context(TestDriver(app, agents=agents))  # unknown agents fail here
    keep_open = args.keep_open
    return lambda lines: (
        orjson.dumps(body) for body in replay_app(driver, lines, keep_open=keep_open)
    )
