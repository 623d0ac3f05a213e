"""Team power-ups in a mobile game: a team earns a power-up when its
players pop 500 bubbles within one event-time minute.

Phones go offline in tunnels and deliver their events late, so the window keeps
its state for a further 2 minutes of event time (allowed lateness): a late burst
that takes a team over 500 still earns it, marked ``update``. A window awards at
most one power-up, remembered in its per-window state.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from eddy import BoundedOutOfOrderness, Sum, Tumbling, WindowContext
from eddy.examples.app import app
from eddy.examples.topics import GAME_EVENTS, POWERUPS

WINDOW_MS = 60_000
BUBBLES = 500
ALLOWED_LATENESS_MS = 120_000


class PowerUp(BaseModel):
    bubbles: int


class AwardOnce:
    def process(self, elements: Sequence[float], ctx: WindowContext) -> list[PowerUp]:
        (bubbles,) = elements
        if bubbles < BUBBLES or ctx.window_state.get("awarded"):
            return []
        ctx.window_state["awarded"] = True
        return [PowerUp(bubbles=int(bubbles))]


(
    app.stream(GAME_EVENTS, name="team_powerups", watermark=BoundedOutOfOrderness(bound_ms=2_000))
    .window(Tumbling(size_ms=WINDOW_MS), allowed_lateness_ms=ALLOWED_LATENESS_MS)
    .aggregate(Sum("bubbles"), process=AwardOnce())
    .to(POWERUPS)
    .queryable()
)

app.alias("/teams/{key}/powerups", "/agents/team_powerups/windows/{key}")
