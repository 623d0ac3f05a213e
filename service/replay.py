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
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

import orjson
from pydantic import ValidationError

from service.errors import ConfigError, EddyError
from service.eventtime.harness import ProcessHarness, WindowHarness
from service.eventtime.process_spec import ProcessReplaySpec
from service.eventtime.spec import ReplaySpec, field_getter


class ReplayInputError(EddyError):
    """A line of the input is not a record, a watermark or a processing time, or a
    record the spec cannot read. The message names the line; fix it or remove it."""


class _BadTimestamp(TypeError):
    """A record's timestamp field is not integer milliseconds."""


AnySpec = ReplaySpec | ProcessReplaySpec


def load_spec(path: Path) -> AnySpec:
    try:
        raw = orjson.loads(path.read_bytes())
    except OSError as exc:
        raise ConfigError(f"cannot read spec {path}: {exc.strerror}") from None
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
        inputs=spec.inputs or ("input",),
    )


def process_harness_for(spec: ProcessReplaySpec) -> ProcessHarness:
    keys = [field_getter(i.key) for i in spec.inputs]
    stamps = [None if i.timestamp is None else field_getter(i.timestamp) for i in spec.inputs]

    def key_of(n: int) -> Callable[[Any], str]:
        return lambda record: str(keys[n](record))

    def timestamp_of(n: int) -> Callable[[Any], int | None]:
        def timestamp_ms(record: Any) -> int | None:
            getter = stamps[n]
            if getter is None:
                return None  # this input has no event time
            value = getter(record)
            if type(value) is not int:
                name = spec.inputs[n].timestamp
                raise _BadTimestamp(f"field {name!r} is {value!r}, not integer milliseconds")
            return int(value)

        return timestamp_ms

    return ProcessHarness(
        spec.build_function(),
        key=[key_of(n) for n in range(len(spec.inputs))],
        timestamp_ms=[timestamp_of(n) for n in range(len(spec.inputs))],
        watermark=spec.watermark_strategy(),
        inputs=[i.name for i in spec.inputs],
    )


class _ProcessOutputs:
    """Adapts the process harness's emissions to the replay's JSON lines."""

    def __init__(self, harness: ProcessHarness) -> None:
        self._harness = harness

    def __len__(self) -> int:
        return len(self._harness.outputs)

    def __getitem__(self, index: slice) -> list[Any]:
        return [
            _Line({"output": e.output, "key": e.key, "value": e.value})
            for e in self._harness.outputs[index]
        ]


class _Line:
    def __init__(self, body: dict[str, Any]) -> None:
        self._body = body

    def to_json(self) -> dict[str, Any]:
        return self._body


def replay(spec: AnySpec, lines: Iterable[bytes]) -> Iterator[Any]:
    """Feed ``lines`` to a harness; yield emissions (with ``to_json``) as they happen."""
    harness: WindowHarness | ProcessHarness
    if isinstance(spec, ProcessReplaySpec):
        harness = process_harness_for(spec)
        outputs: Any = _ProcessOutputs(harness)
    else:
        harness = harness_for(spec)
        outputs = harness.outputs
    emitted = 0
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        item = _parse(line, number)
        with _reported(f"line {number}"):
            _feed(harness, item, number)
        yield from outputs[emitted:]
        emitted = len(outputs)
    with _reported("at the end of input"):
        harness.end_of_input()
    yield from outputs[emitted:]


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
    if kind in ("watermark", "processing_time") and type(value) is not int:
        raise ReplayInputError(f"line {number}: {kind!r} must be integer milliseconds")
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
    _check_paths(args.input, args.output)
    with contextlib.ExitStack() as stack:
        emissions = _emissions(args, stack)
        try:
            source = stack.enter_context(Path(args.input).open("rb"))
            out: IO[bytes] = sys.stdout.buffer
            if args.output:
                out = stack.enter_context(Path(args.output).open("wb"))
        except OSError as exc:
            raise ConfigError(f"cannot read or write {exc.filename}: {exc.strerror}") from None
        count = 0
        for emission in emissions(source):
            out.write(orjson.dumps(emission) + b"\n")
            count += 1
    print(f"replay: {count} emissions", file=sys.stderr)
    return 0


def _check_paths(source: str, output: str | None) -> None:
    """Writing the output over the input would empty it before it is read."""
    if output is None:
        return
    out, inp = Path(output), Path(source)
    if out.exists() and inp.exists() and out.resolve() == inp.resolve():
        raise ConfigError(f"replay: --output {output} is the input file; write elsewhere")


def _emissions(
    args: argparse.Namespace, stack: contextlib.ExitStack
) -> Callable[[Iterable[bytes]], Iterator[Any]]:
    if args.spec is not None:
        spec = load_spec(Path(args.spec))
        return lambda lines: (e.to_json() for e in replay(spec, lines))
    from service.app.loader import load_app
    from service.replay_app import replay_app
    from service.testing import TestDriver

    app = load_app(args.app)
    agents = [a.strip() for a in args.agent.split(",") if a.strip()]
    driver = stack.enter_context(TestDriver(app, agents=agents))  # unknown agents fail here
    return lambda lines: replay_app(driver, lines)
