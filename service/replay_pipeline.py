"""Replaying a whole pipeline of ``agents/`` over a file, with no broker.

A ``{"kind": "pipeline"}`` spec names one or more of the worker's pipelines
(``EDDY_PIPELINES`` names). They are built exactly as a worker builds them and
run as one input partition would run them: the same decoding, dead-lettering,
event-time logic and state (real RocksDB, in a temporary directory), committed
after every input line. Records a stage sends to a topic a later stage reads
(a repartition topic) are fed to that stage, markers included, so a chain like
``hashtags`` -> ``hashtag_counts`` replays end to end. What reaches any other
topic is the output. Nothing is flushed at the end: the output is what the
running pipeline would have emitted for this input, so an input closes its last
windows itself (a record far ahead), as a live stream would.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field

from service.pipeline.base import Headers, PartitionLogic, Pipeline
from tables.store import PartitionStore, PartitionTransaction


class PipelineReplaySpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["pipeline"]
    pipelines: Annotated[list[str], Field(min_length=1)]
    # Settings overrides (field names of `python -m service config`), e.g. the
    # window size of sensor_averages; the topic prefix defaults to none.
    settings: dict[str, Any] = Field(default_factory=dict)

    def build(self) -> list[Pipeline]:
        """The pipelines, as a worker would build them.

        Raises:
            ValueError: an unknown pipeline name.
        """
        from agents import PIPELINES, builder
        from service.settings import load_settings

        unknown = [name for name in self.pipelines if name not in PIPELINES]
        if unknown:
            raise ValueError(
                f"pipelines: unknown {', '.join(unknown)}; known: {', '.join(PIPELINES)}"
            )
        settings = load_settings(**{"topic_prefix": "", **self.settings})
        return [builder(name)(settings) for name in self.pipelines]


@dataclass(frozen=True, slots=True)
class ReplayRecord:
    """A consumed record, as the runtime hands it to a pipeline."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes]] = ()


@dataclass(slots=True)
class Sent:
    topic: str
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp_ms: int | None

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"topic": self.topic, "key": _text(self.key)}
        body["value"] = _json_or_text(self.value)
        if self.timestamp_ms is not None:
            body["timestamp_ms"] = self.timestamp_ms
        reason = dict(self.headers).get("eddy.reason")
        if reason is not None:
            body["reason"] = reason.decode()
        return body


@dataclass(slots=True)
class _Collector:
    """The :class:`~service.pipeline.base.Output` of a replay: one partition per topic."""

    dead_letter_topic: str
    sent: list[Sent] = field(default_factory=list)

    def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        headers: Headers = (),
        timestamp_ms: int | None = None,
        partition: int | None = None,
    ) -> None:
        self.sent.append(Sent(topic, key, value, tuple(headers), timestamp_ms))

    def partitions_of(self, topic: str) -> int:
        return 1

    def dead_letter(self, record: Any, reason: str) -> None:
        headers = (("eddy.reason", reason.encode()),)
        self.sent.append(Sent(self.dead_letter_topic, record.key, record.value, headers, None))

    def count(self, event: str, n: int = 1) -> None:
        pass  # metrics are the worker's business

    def observe(self, event: str, seconds: float) -> None:
        pass


class _Stage:
    def __init__(self, pipeline: Pipeline, directory: Path) -> None:
        self.pipeline = pipeline
        self.store = PartitionStore(directory / pipeline.name)
        self.txn: PartitionTransaction = self.store.begin()
        self.logic: PartitionLogic = pipeline.create_logic(0, self.store, self.txn)
        self.offsets: dict[str, int] = {}

    def record(self, topic: str, item: Sent | dict[str, Any], out: _Collector) -> None:
        offset = self.offsets.get(topic, 0)
        self.offsets[topic] = offset + 1
        if isinstance(item, Sent):
            record = ReplayRecord(
                topic, 0, offset, item.timestamp_ms or 0, item.key, item.value, item.headers
            )
        else:
            key = item.get("key")
            record = ReplayRecord(
                topic,
                0,
                offset,
                int(item.get("timestamp_ms", 0)),
                None if key is None else str(key).encode(),
                orjson.dumps(item["record"]) if "record" in item else item["raw"].encode(),
            )
        if topic == _broadcast_topic(self.pipeline):
            self.logic.process_broadcast(record, out)  # type: ignore[attr-defined]
        else:
            self.logic.process(record, out)

    def checkpoint(self) -> None:
        self.logic.prepare_commit()
        self.txn.commit(self.txn.changelog_records(), None)

    def close(self) -> None:
        self.store.close()


class PipelineReplay:
    """The spec's pipelines replayed as one input partition, state kept in ``directory``
    (what ``replay_pipelines`` runs; tests use it to build state from records)."""

    def __init__(self, spec: PipelineReplaySpec, directory: Path) -> None:
        from service.settings import load_settings

        self._out = _Collector(load_settings(**spec.settings).dead_letter_topic)
        self._stages = [_Stage(p, directory) for p in spec.build()]

    @property
    def topics(self) -> set[str]:
        """Every topic some stage reads."""
        return {topic for stage in self._stages for topic in _inputs(stage)}

    def feed(self, lines: Iterator[dict[str, Any]]) -> Iterator[Sent]:
        yield from _run(self._stages, lines, self._out)

    def stores(self) -> dict[str, PartitionStore]:
        """Each pipeline's committed state after what was fed."""
        return {stage.pipeline.name: stage.store for stage in self._stages}

    def close(self) -> None:
        for stage in self._stages:
            stage.close()


def replay_pipelines(spec: PipelineReplaySpec, lines: Iterator[dict[str, Any]]) -> Iterator[Sent]:
    """Run the spec's pipelines over parsed input lines; yield what they output.

    Each line is ``{"topic": t, "record": {...}}`` (or ``"raw": "..."`` for bytes
    that are not JSON, to see dead-lettering), optionally with ``"key"`` and
    ``"timestamp_ms"`` (the Kafka record's), or ``{"processing_time": ms}``.
    """
    spec.build()  # an unknown pipeline fails before any directory is made
    with tempfile.TemporaryDirectory(prefix="eddy-replay-") as directory:
        replay = PipelineReplay(spec, Path(directory))
        try:
            yield from replay.feed(lines)
        finally:
            replay.close()


def _run(stages: list[_Stage], lines: Iterator[dict[str, Any]], out: _Collector) -> Iterator[Sent]:
    readers = {topic: n for n, s in reversed(list(enumerate(stages))) for topic in _inputs(s)}
    for line in lines:
        if "processing_time" in line:
            for n, stage in enumerate(stages):
                stage.logic.on_tick(int(line["processing_time"]), out)
                yield from _forward(stages, n, readers, out)
            continue
        topic = line["topic"]
        if topic not in readers:
            raise ValueError(f"no pipeline of the spec reads topic {topic!r}")
        n = readers[topic]
        stages[n].record(topic, line, out)
        yield from _forward(stages, n, readers, out)


def _forward(
    stages: list[_Stage], first: int, readers: dict[str, int], out: _Collector
) -> Iterator[Sent]:
    """Deliver stage ``first``'s sends to later stages that read them; yield the rest."""
    stages[first].checkpoint()
    while out.sent:
        sent, out.sent = out.sent, []
        touched = set()
        for item in sent:
            n = readers.get(item.topic)
            if n is None or n <= first:
                yield item
                continue
            stages[n].record(item.topic, item, out)
            touched.add(n)
        for n in sorted(touched):
            stages[n].checkpoint()


def _inputs(stage: _Stage) -> list[str]:
    broadcast = _broadcast_topic(stage.pipeline)
    return [*stage.pipeline.sources, *([broadcast] if broadcast else [])]


def _broadcast_topic(pipeline: Pipeline) -> str | None:
    topic: str | None = getattr(pipeline, "broadcast_topic", None)
    return topic


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", "replace")


def _json_or_text(data: bytes | None) -> Any:
    if data is None:
        return None
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return data.decode("utf-8", "replace")
