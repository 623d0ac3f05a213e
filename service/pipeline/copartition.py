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

from eddy.eventtime.watermarks import BoundedOutOfOrderness, PerInput
from eddy.pipeline.base import Pipeline, Target
from eddy.pipeline.repartition import Repartition
from eddy.pipeline.source import Source

log = logging.getLogger(__name__)


def repartition_topic(app_id: str, pipeline: str, topic: str) -> str:
    return f"{app_id}-{pipeline}-{topic}-repartition"


def co_partition(
    pipelines: Iterable[Pipeline], counts: Mapping[str, int], app_id: str
) -> tuple[list[Pipeline], dict[str, int]]:
    """Rewrite stages whose inputs are not co-partitioned.

    Args:
        counts: partition count of every input topic.

    Returns:
        The stages to run (re-keying stages first) and the repartition topics to
        create, with their partition counts.
    """
    result: list[Pipeline] = []
    topics: dict[str, int] = {}
    for pipeline in pipelines:
        inputs: tuple[Source, ...] = getattr(pipeline, "inputs", ())
        if len(inputs) < 2:
            result.append(pipeline)
            continue
        target = counts[inputs[0].topic]
        rewritten = []
        for source in inputs:
            if counts[source.topic] == target:
                rewritten.append(source)
                continue
            topic = repartition_topic(app_id, pipeline.name, source.topic)
            log.warning(
                "inputs of %s are not co-partitioned (%s: %d partitions, %s: %d): "
                "re-keying %s through %s",
                pipeline.name,
                inputs[0].topic,
                target,
                source.topic,
                counts[source.topic],
                source.topic,
                topic,
            )
            result.append(_rekey(pipeline, source, topic))
            topics[topic] = target
            rewritten.append(source.after_repartition(topic))
        changes: dict[str, Any] = {"inputs": tuple(rewritten)}
        watermark = getattr(pipeline, "watermark", None)
        if isinstance(watermark, PerInput):
            names = {old.topic: new.topic for old, new in zip(inputs, rewritten, strict=True)}
            strategies = {names.get(k, k): v for k, v in watermark.strategies.items()}
            changes["watermark"] = dataclasses.replace(watermark, strategies=strategies)
        result.append(dataclasses.replace(pipeline, **changes))  # type: ignore[type-var]
    return result, topics


def _rekey(pipeline: Pipeline, source: Source, topic: str) -> Repartition:
    watermark = getattr(pipeline, "watermark", None) or BoundedOutOfOrderness(0)
    return Repartition(
        name=f"{pipeline.name}.rekey.{source.topic}",
        source=source,
        target=Target(topic, source.element.encode),
        watermark=watermark,
    )
