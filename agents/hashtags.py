"""Hashtag counts: tweets -> hashtags -> key by hashtag -> count per hashtag per
1 min tumbling window, with a running total.

Tweets are keyed by user, so counting by hashtag repartitions: ``key_by`` sends
each hashtag through ``<app>-hashtag_counts-repartition`` with the watermark of
the task that read its tweet, and the counting stage's clock is the minimum
over those tasks. The top hashtags of a window are one REST query.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic import BaseModel

from eddy import BoundedOutOfOrderness, Count, Tumbling, WindowContext
from eddy.examples.app import app
from eddy.examples.records import Tweet
from eddy.examples.settings import SensorSettings
from eddy.examples.topics import HASHTAG_COUNTS, TWEETS

WINDOW_MS = 60_000
HASHTAG = re.compile(r"#(\w+)")


class Mention(BaseModel):
    """One hashtag of one tweet."""

    hashtag: str
    tweet_id: str
    timestamp_ms: int


class HashtagCount(BaseModel):
    count: int
    total: int


def hashtags_of(text: str) -> list[str]:
    """Lower-cased, each once per tweet, in order of first appearance."""
    return list(dict.fromkeys(tag.lower() for tag in HASHTAG.findall(text)))


def mentions(tweet: Tweet) -> list[Mention]:
    return [
        Mention(hashtag=tag, tweet_id=tweet.tweet_id, timestamp_ms=tweet.timestamp_ms)
        for tag in hashtags_of(tweet.text)
    ]


class RunningTotal:
    """The window's count, plus the hashtag's total over all its windows so far."""

    def process(self, elements: Sequence[int], ctx: WindowContext) -> list[HashtagCount]:
        (count,) = elements
        total = ctx.global_state.get("total", 0) + count
        ctx.global_state["total"] = total
        return [HashtagCount(count=count, total=total)]


@app.define(settings=SensorSettings)
def hashtag_counts(s: SensorSettings) -> None:
    (
        app.stream(TWEETS, watermark=BoundedOutOfOrderness(bound_ms=s.watermark_bound_ms))
        .flat_map(mentions)
        .key_by("hashtag")
        .window(Tumbling(size_ms=WINDOW_MS))
        .aggregate(Count(), process=RunningTotal())
        .to(HASHTAG_COUNTS)
        .queryable()
    )


app.alias("/hashtags/{key}/counts", "/agents/hashtag_counts/windows/{key}")
app.alias("/hashtags/top", "/agents/hashtag_counts/windows")
