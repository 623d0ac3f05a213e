"""The reference app: Eddy's example applications (sensor windows and alerts, a
game, hashtags, a vehicle speed check) as agents, one module each, written only
with the public API (``from eddy import ...``).

``eddy worker`` runs it by default (``--app eddy.examples:app``). ``sensor_rooms``,
``postgres_sink`` and ``eos_checker`` need a service of their own, or are for
the chaos harness: they run only when ``EDDY_AGENTS`` names them.
"""

from eddy.examples import (
    eos_checker,
    hashtags,
    postgres_sink,
    routes,
    sensor_alerts,
    sensor_averages,
    sensor_counts,
    sensor_minmax,
    sensor_rooms,
    team_powerups,
    vehicle_speed,
)
from eddy.examples.app import app

__all__ = [
    "app",
    "eos_checker",
    "hashtags",
    "postgres_sink",
    "routes",
    "sensor_alerts",
    "sensor_averages",
    "sensor_counts",
    "sensor_minmax",
    "sensor_rooms",
    "team_powerups",
    "vehicle_speed",
]
