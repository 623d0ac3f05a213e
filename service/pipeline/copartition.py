"""Making a two-input pipeline's inputs co-partitioned before it runs.

A co-process function or a join reads partition p of both inputs in one task,
which is only right if a key lands in the same partition number in both topics.
When the inputs have different partition counts that cannot hold, so instead of
joining wrongly Eddy re-keys the mismatched input into a repartition topic with
the first input's partition count (Kafka's default partitioner, the same one
producers use) and says so in its log.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from service.eventtime.watermarks import BoundedOutOfOrderness
from service.pipeline.base import Pipeline
from service.pipeline.keyed import Input, KeyedProcess
from service.pipeline.repartition import Repartition

log = logging.getLogger(__name__)


def repartition_topic(app_id: str, pipeline: str, topic: str) -> str:
    return f"{app_id}-{pipeline}-{topic}-repartition"


def co_partition(
    pipelines: Iterable[Pipeline], counts: Mapping[str, int], app_id: str
) -> tuple[list[Pipeline], dict[str, int]]:
    """Rewrite pipelines whose inputs are not co-partitioned.

    Args:
        counts: partition count of every input topic.

    Returns:
        The pipelines to run (re-keying stages first) and the repartition topics
        to create, with their partition counts.
    """
    result: list[Pipeline] = []
    topics: dict[str, int] = {}
    for pipeline in pipelines:
        if not isinstance(pipeline, KeyedProcess) or len(pipeline.inputs) < 2:
            result.append(pipeline)
            continue
        target = counts[pipeline.inputs[0].topic]
        inputs = []
        for source in pipeline.inputs:
            if counts[source.topic] == target:
                inputs.append(source)
                continue
            topic = repartition_topic(app_id, pipeline.name, source.topic)
            log.warning(
                "inputs of %s are not co-partitioned (%s: %d partitions, %s: %d): "
                "re-keying %s through %s",
                pipeline.name,
                pipeline.inputs[0].topic,
                target,
                source.topic,
                counts[source.topic],
                source.topic,
                topic,
            )
            result.append(_rekey(pipeline, source, topic))
            topics[topic] = target
            inputs.append(dataclasses.replace(source, topic=topic))
        result.append(dataclasses.replace(pipeline, inputs=inputs))
    return result, topics


def _rekey(pipeline: KeyedProcess, source: Input, topic: str) -> Repartition:
    def rekey(record: dict[str, Any]) -> list[tuple[str, Any]]:
        return [(source.key(source.value_type.model_validate(record)), record)]

    return Repartition(
        name=f"{pipeline.name}.rekey.{source.topic}",
        source=source,
        rekey=rekey,
        target=topic,
        watermark=pipeline.watermark or BoundedOutOfOrderness(0),
    )
