"""A user's own app, written outside the repository with the public API only:
clicks per user per minute, late clicks to a topic of their own, once as a
fluent stream and once as an ``@app.agent`` with a timer. Tests write it into
a temporary package and run it the ways a user would."""

from __future__ import annotations

import textwrap
from pathlib import Path

PACKAGE = "clickstream"

# The 25-line agent of the docs' promise: everything from `eddy`, nothing internal.
FLUENT = """\
from pydantic import BaseModel

from eddy import App, BoundedOutOfOrderness, Count, Topic, Tumbling


class Click(BaseModel):
    user: str
    page: str
    ts_ms: int


app = App("clickstream")
clicks = Topic("clicks", Click, key="user", timestamp="ts_ms")
per_minute = Topic("clicks-per-minute")
late_clicks = Topic("clicks-late", Click, key="user")

(
    app.stream(clicks, name="clicks_per_minute", watermark=BoundedOutOfOrderness(bound_ms=1_000))
    .window(Tumbling(size_ms=60_000))
    .late_to(late_clicks)
    .aggregate(Count())
    .to(per_minute)
    .queryable()
)
"""

# The same agent, record at a time: keyed state, an event-time timer per minute.
TIMERS = """\
from eddy import App, BoundedOutOfOrderness, Context, MapState, Topic

from clickstream.app import Click, clicks

MINUTE_MS = 60_000
app = App("clickstream-timers")
per_minute = Topic("clicks-per-minute-timers")
late_clicks = Topic("clicks-late-timers", Click, key="user")
OPEN = MapState("open_minutes", int, queryable=True)


@app.agent(
    clicks,
    outputs=[per_minute, late_clicks],
    states=[OPEN],
    watermark=BoundedOutOfOrderness(bound_ms=1_000),
)
async def clicks_per_minute(click: Click, ctx: Context) -> None:
    start = click.ts_ms - click.ts_ms % MINUTE_MS
    if start + MINUTE_MS - 1 <= ctx.watermark_ms:  # its minute closed already
        ctx.send(late_clicks, click)
        return
    minutes = ctx.state(OPEN)
    minutes.put(str(start), (minutes.get(str(start)) or 0) + 1)
    ctx.timer_service.register_event_time_timer(start + MINUTE_MS - 1)


@clicks_per_minute.on_timer
async def minute_closed(timestamp_ms: int, ctx: Context) -> None:
    start = timestamp_ms + 1 - MINUTE_MS
    minutes = ctx.state(OPEN)
    count = minutes.get(str(start))
    minutes.remove(str(start))
    window = {"window_start_ms": start, "window_end_ms": start + MINUTE_MS}
    ctx.send(per_minute, {"user": ctx.key, **window, "value": count, "timing": "first"})
"""


def write_package(root: Path) -> Path:
    """``root/clickstream/{app,timers}.py``; returns ``root`` (the folder to run in)."""
    package = root / PACKAGE
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text("")
    (package / "app.py").write_text(textwrap.dedent(FLUENT))
    (package / "timers.py").write_text(textwrap.dedent(TIMERS))
    return root


def lines_of_code(source: str) -> int:
    return sum(1 for line in source.splitlines() if line.strip())
