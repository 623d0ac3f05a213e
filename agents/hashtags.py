"""Hashtag counts (seed 000, figure 2-1): tweets -> extract hashtags -> key by
hashtag -> count per hashtag per 1 min tumbling window, with a running total.

Tweets are keyed by user, so counting by hashtag needs a repartition: the first
stage (``hashtags``) extracts hashtags and writes them keyed by hashtag to a
repartition topic, with its watermark as control records; the second
(``hashtag_counts``) counts, its clock the minimum over the upstream tasks. The
top hashtags of a window are queryable over REST.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from service.eventtime import BoundedOutOfOrderness, Count, Tumbling, WindowContext, WindowSpec
from service.eventtime.watermarks import FromUpstream
from service.pipeline.keyed import Input
from service.pipeline.repartition import Repartition
from service.pipeline.windowed import EventTime, WindowedAggregation
from service.records import Tweet
from service.settings import Settings

EXTRACT, COUNT = "hashtags", "hashtag_counts"
WINDOW_MS = 60_000
HASHTAG = re.compile(r"#(\w+)")


class Mention(BaseModel):
    """One hashtag of one tweet, on the repartition topic."""

    hashtag: str
    tweet_id: str
    timestamp_ms: int


def hashtags_of(text: str) -> list[str]:
    """Lower-cased, each once per tweet, in order of first appearance."""
    return list(dict.fromkeys(tag.lower() for tag in HASHTAG.findall(text)))


def mentions(tweet: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (
            tag,
            {"hashtag": tag, "tweet_id": tweet["tweet_id"], "timestamp_ms": tweet["timestamp_ms"]},
        )
        for tag in hashtags_of(tweet["text"])
    ]


class RunningTotal:
    """The window's count, plus the hashtag's total over all its windows so far."""

    def process(self, elements: Sequence[Any], ctx: WindowContext) -> list[Any]:
        (count,) = elements
        total = ctx.global_state.get("total", 0) + count
        ctx.global_state["total"] = total
        return [{"count": count, "total": total}]


def repartition_topic(settings: Settings) -> str:
    return settings.topic("hashtags-by-tag")


def build_extract(settings: Settings) -> Repartition:
    return Repartition(
        name=EXTRACT,
        source=Input(
            settings.topic("tweets"),
            Tweet,
            key=lambda t: t.user,
            timestamp_ms=lambda t: t.timestamp_ms,
        ),
        rekey=mentions,
        target=repartition_topic(settings),
        watermark=BoundedOutOfOrderness(bound_ms=settings.watermark_bound_ms),
    )


def build_counts(settings: Settings) -> WindowedAggregation:
    return WindowedAggregation(
        name=COUNT,
        source=repartition_topic(settings),
        value_type=Mention,
        event_time=EventTime(
            key=lambda m: m.hashtag,
            timestamp_ms=lambda m: m.timestamp_ms,
            # A silent upstream task stops holding the clock back after the timeout
            # (0: never, so results do not depend on how long a task was down).
            watermark=FromUpstream(idle_timeout_ms=settings.upstream_idle_timeout_ms or None),
        ),
        window=WindowSpec(Tumbling(WINDOW_MS), aggregate=Count(), process=RunningTotal()),
        sink=settings.topic("hashtag-counts"),
        key_field="hashtag",
        results_retention_ms=settings.results_retention_ms,
    )
