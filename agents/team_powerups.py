"""Team power-ups (seed 000's mobile game): a team earns a power-up when its
players pop 500 bubbles within one event-time minute.

Phones go offline in tunnels and deliver their events late, so the window keeps
its state for a further 2 minutes of event time (allowed lateness): a late burst
that takes a team over 500 still earns it, marked ``update``. A window awards at
most one power-up, remembered in its per-window state.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from service.eventtime import BoundedOutOfOrderness, Sum, Tumbling, WindowContext, WindowSpec
from service.pipeline.windowed import EventTime, WindowedAggregation
from service.records import GameEvent
from service.settings import Settings

NAME = "team_powerups"
WINDOW_MS = 60_000
BUBBLES = 500
ALLOWED_LATENESS_MS = 120_000


class PowerUp:
    def process(self, elements: Sequence[Any], ctx: WindowContext) -> list[Any]:
        (bubbles,) = elements
        if bubbles < BUBBLES or ctx.window_state.get("awarded"):
            return []
        ctx.window_state["awarded"] = True
        return [{"bubbles": bubbles}]


def build(settings: Settings) -> WindowedAggregation:
    return WindowedAggregation(
        name=NAME,
        source=settings.topic("game-events"),
        value_type=GameEvent,
        event_time=EventTime(
            key=lambda e: e.team,
            timestamp_ms=lambda e: e.ts,
            watermark=BoundedOutOfOrderness(bound_ms=2_000),
        ),
        window=WindowSpec(
            Tumbling(WINDOW_MS),
            aggregate=Sum(lambda e: e.bubbles),
            process=PowerUp(),
            allowed_lateness_ms=ALLOWED_LATENESS_MS,
        ),
        sink=settings.topic("team-powerups"),
        key_field="team",
        results_retention_ms=settings.results_retention_ms,
    )
