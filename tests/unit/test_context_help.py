"""``help(Context)`` shows what a process function's context holds: its plain
attributes (set per record, so not properties) are listed in the docstring, and
each one listed is one a running agent's context has."""

from __future__ import annotations

import pydoc
import re

from pydantic import BaseModel

from eddy import App, Context, TestDriver, Topic

ATTRIBUTES = ("state", "timer_service", "timestamp_ms", "time_domain", "settings")


class Click(BaseModel):
    user: str
    ts_ms: int


def documented() -> list[str]:
    """The names under ``Attributes:`` in what ``help(Context)`` prints."""
    text = pydoc.plain(pydoc.render_doc(Context))
    section = text.split("Attributes:", 1)[1].split("Methods defined here", 1)[0]
    return re.findall(r"^ \|      (\w+): ", section, re.M)


def test_help_lists_the_contexts_attributes() -> None:
    assert documented() == list(ATTRIBUTES)


def test_every_listed_attribute_is_on_a_running_agents_context() -> None:
    app = App("help")
    clicks = Topic("clicks", Click, key="user", timestamp="ts_ms")
    seen: list[dict[str, bool]] = []

    @app.agent(clicks)
    def look(click: Click, ctx: Context) -> None:
        seen.append({name: hasattr(ctx, name) for name in documented()})

    with TestDriver(app) as driver:
        driver.send(clicks, Click(user="ann", ts_ms=1_000))
    assert seen == [dict.fromkeys(ATTRIBUTES, True)]


def test_the_read_only_properties_say_what_they_are() -> None:
    for name in ("key", "source", "watermark_ms", "processing_time_ms"):
        assert getattr(Context, name).__doc__, name
