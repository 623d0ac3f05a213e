"""Tweets for the hashtag count (agents/hashtags.py).

Hashtag popularity is Zipf-like, as on the real thing: a few tags dominate, so
a top-N query has a stable answer and the repartition by hashtag is skewed
(one partition gets far more than its share). The text is written to make
extraction earn its keep: a tag may appear twice in one tweet, in mixed case
(``#Kafka``, ``#KAFKA``) and followed by punctuation (``#flink!``), so a
pipeline must normalise case and count a tag once per tweet to get the
vocabulary's counts.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass

from eddy.examples.records import Tweet
from tools.simulator.schedule import (
    InFlight,
    Scheduled,
    Stream,
    common_problems,
    raise_problems,
)

# Most popular first: the Zipf weights follow this order.
HASHTAGS = (
    "flink",
    "kafka",
    "python",
    "streaming",
    "eddy",
    "rust",
    "spark",
    "ai",
    "sql",
    "watermarks",
    "beam",
    "dataeng",
)
WORDS = (
    "just", "shipped", "a", "new", "pipeline", "why", "is", "my", "watermark", "late",
    "again", "loving", "the", "state", "store", "today", "windows", "exactly", "once",
    "great", "talk", "on", "joins", "benchmark", "consumer", "lag", "is", "zero", "finally",
    "rebalance", "took", "forever", "who", "needs", "batch", "anyway", "thoughts", "hot", "take",
)  # fmt: skip
# How many tags a tweet has: 0..MAX_HASHTAGS, weighted.
HASHTAG_COUNT_WEIGHTS = (2, 4, 3, 1)
MAX_HASHTAGS = len(HASHTAG_COUNT_WEIGHTS) - 1
REPEAT_PROBABILITY = 0.15
PUNCTUATION = ("", "", "", "", "!", ",", ".", "?")
MAX_USERS = 10_000_000
MIN_RATE_PER_S = 0.001
MAX_RATE_PER_S = 1_000_000.0


@dataclass(frozen=True, slots=True, kw_only=True)
class TweetConfig:
    """What to simulate. Equal configs (seed included) give equal deliveries.

    Attributes:
        seed: Seeds the only random generator used, and prefixes tweet ids.
        start_ms: Event time of the first tweet.
        users: Number of users, ``user_1`` .. ``user_N``.
        rate_per_s: Tweets per second of event time, over all users.
        count: Tweets to send; ``None``: no limit.
        disorder_ms: Largest delivery delay of a tweet.
        skew: Zipf exponent of hashtag popularity (0: all equally popular).
    """

    seed: int
    start_ms: int
    users: int = 50
    rate_per_s: float = 20.0
    count: int | None = None
    disorder_ms: int = 1_000
    skew: float = 1.0

    def __post_init__(self) -> None:
        """Raises ConfigError naming every bad value."""
        raise_problems("tweets", _problems(self))

    def event_time_ms(self, index: int) -> int:
        """Event time of tweet ``index``: the rate, evenly spaced."""
        return self.start_ms + math.floor(index * 1000.0 / self.rate_per_s)


def _problems(config: TweetConfig) -> Iterator[str]:
    yield from common_problems(start_ms=config.start_ms, count=config.count)
    if not 1 <= config.users <= MAX_USERS:
        yield f"users must be between 1 and {MAX_USERS}, got {config.users}"
    rate = config.rate_per_s
    if not (math.isfinite(rate) and MIN_RATE_PER_S <= rate <= MAX_RATE_PER_S):
        yield (
            f"tweet rate must be between {MIN_RATE_PER_S:g} and {MAX_RATE_PER_S:g} per second, "
            f"got {rate}"
        )
    if config.disorder_ms < 0:
        yield f"disorder_ms must not be negative, got {config.disorder_ms}"
    if not (math.isfinite(config.skew) and 0 <= config.skew <= 10):
        yield f"skew must be between 0 and 10, got {config.skew}"


def zipf_weights(skew: float) -> list[float]:
    """Cumulative weights of :data:`HASHTAGS`: rank ``r`` has weight ``1 / r**skew``."""
    return list(itertools.accumulate(1.0 / rank**skew for rank in range(1, len(HASHTAGS) + 1)))


class _Writer:
    """Composes tweet texts: filler words with hashtags in random places."""

    def __init__(self, rng: random.Random, skew: float) -> None:
        self._rng = rng
        self._cum_weights = zipf_weights(skew)

    def text(self) -> str:
        rng = self._rng
        (wanted,) = rng.choices(range(MAX_HASHTAGS + 1), weights=HASHTAG_COUNT_WEIGHTS)
        tags = rng.choices(HASHTAGS, cum_weights=self._cum_weights, k=wanted)
        if len(tags) >= 2 and rng.random() < REPEAT_PROBABILITY:
            tags[1] = tags[0]
        words = rng.choices(WORDS, k=rng.randint(3, 10))
        for tag in tags:
            words.insert(rng.randint(0, len(words)), self._styled(tag))
        return " ".join(words)

    def _styled(self, tag: str) -> str:
        roll = self._rng.random()
        if roll < 0.7:
            cased = tag
        elif roll < 0.9:
            cased = tag.capitalize()
        else:
            cased = tag.upper()
        return f"#{cased}{self._rng.choice(PUNCTUATION)}"


def generate_tweets(config: TweetConfig) -> Iterator[Scheduled[Tweet]]:
    """Yield the tweets in non-decreasing delivery order, lazily.

    Each tweet happens at the rate's next instant (``timestamp_ms``), by a
    uniformly chosen user, and is delivered up to ``disorder_ms`` later. Tweet
    ids are ``<seed>-<index>``: unique within a run and the same on a rerun.

    Yields:
        Tweets keyed by user, each at or after its own event time.
    """
    rng = random.Random(config.seed)
    writer = _Writer(rng, config.skew)
    in_flight: InFlight[Tweet] = InFlight()
    indices = itertools.count() if config.count is None else range(config.count)
    for index in indices:
        at_ms = config.event_time_ms(index)
        yield from in_flight.due(at_ms)
        user = f"user_{rng.randint(1, config.users)}"
        tweet = Tweet(
            tweet_id=f"{config.seed}-{index}", user=user, text=writer.text(), timestamp_ms=at_ms
        )
        deliver_at = at_ms + rng.randint(0, config.disorder_ms)
        in_flight.push(Scheduled(deliver_at, at_ms, Stream.TWEETS, user, tweet))
    yield from in_flight.drain()
