"""A stage with no keyed step: each record's elements go to the output topics.

What an agent of only ``filter``/``map``/``flat_map`` (and perhaps ``key_by``,
which here just sets the output records' key) compiles to. It keeps no state,
so its checkpoint is the input offsets and its outputs, in one transaction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from eddy.eventtime.watermarks import MIN_WATERMARK
from eddy.pipeline.base import InputRecord, Output, Target
from eddy.pipeline.markers import marker_of
from eddy.pipeline.source import Source
from eddy.tables.schema import StateSchema
from eddy.tables.store import PartitionStore, PartitionTransaction


@dataclass(frozen=True)
class Forward:
    name: str
    source: Source
    outputs: tuple[Target, ...]

    @property
    def state_schemas(self) -> Mapping[str, StateSchema]:
        return {}

    @property
    def sources(self) -> Sequence[str]:
        return (self.source.topic,)

    @property
    def output_topics(self) -> Sequence[str]:
        return tuple(dict.fromkeys(t.topic for t in self.outputs))

    def create_logic(
        self, partition: int, store: PartitionStore, txn: PartitionTransaction
    ) -> ForwardLogic:
        return ForwardLogic(self)


class ForwardLogic:
    def __init__(self, definition: Forward) -> None:
        self._d = definition

    @property
    def watermark_ms(self) -> int:
        return MIN_WATERMARK

    def process(self, record: InputRecord, out: Output) -> None:
        if marker_of(record) is not None:
            return
        read = self._d.source.read(record, out)
        if read is None:
            return
        for key, value in read.elements:
            for target in self._d.outputs:
                target.send(key, value, read.timestamp_ms, out)

    def on_tick(self, now_ms: int, out: Output) -> None:
        pass

    def advance_watermark(self, watermark_ms: int, out: Output) -> None:
        pass

    def prepare_commit(self) -> None:
        pass

    def reload(self) -> None:
        pass
