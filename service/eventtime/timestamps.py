"""The event times Eddy accepts: integer milliseconds within +-2^53.

JSON readers (JavaScript's among them) hold numbers as doubles, which are exact
only up to 2^53: a larger time would come back as another one, and windows and
timers near 2^63 overflow the 64-bit integers Kafka and the state store use. The
worker dead-letters a record whose time is outside the range
(``eddy.pipeline.source``); the replay CLI refuses such an input line. One
bound, so the two cannot disagree.
"""

from __future__ import annotations

MAX_EVENT_TIME_MS = 2**53
# How messages name the range.
EVENT_TIME_RANGE = "-2^53..2^53 ms"


def is_event_time(timestamp_ms: int) -> bool:
    """Whether ``timestamp_ms`` is within the range Eddy accepts (bounds included)."""
    return -MAX_EVENT_TIME_MS <= timestamp_ms <= MAX_EVENT_TIME_MS
