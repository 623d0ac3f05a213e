"""The reference agents' own settings (``EDDY_<FIELD>``; ``eddy config`` lists them)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr

from eddy import AgentSettings


class SensorSettings(AgentSettings):
    """Shared by the sensor agents: one clock and one window size for all of them."""

    window_size_ms: int = Field(
        5_000, ge=1, description="sensor_averages, sensor_minmax: tumbling window size."
    )
    watermark_bound_ms: int = Field(
        1_000, ge=0, description="Sensor agents: bounded out-of-orderness of readings."
    )
    allowed_lateness_ms: int = Field(
        0, ge=0, description="sensor_averages: keep a fired window this long for late updates."
    )
    readings_format: Literal["json", "avro"] = Field(
        "json",
        description="Sensor agents and the simulator: sensor-readings as JSON, or as Avro in "
        "the schema registry's wire format (needs EDDY_SCHEMA_REGISTRY_URL).",
    )


class VehicleSettings(AgentSettings):
    speed_tolerance_kmh: float = Field(
        5.0, ge=0, description="vehicle_speed: the app's speed agrees if within this of OBD."
    )


class RoomSettings(SensorSettings):
    """sensor_rooms' settings (and the sensor watermark it shares)."""

    room_service_url: str = Field(
        "http://127.0.0.1:8090",
        pattern=r"^https?://[^/\s]+$",
        description="sensor_rooms: base URL of the sensor-to-room lookup service "
        "(GET /rooms/<sensor_id>; make run starts one). A user:password@ in it is sent "
        "as basic auth and masked wherever Eddy shows the URL.",
    )
    lookup_capacity: int = Field(
        100, ge=1, le=10_000, description="sensor_rooms: most lookups in flight per partition."
    )
    lookup_timeout_ms: int = Field(
        5_000,
        ge=1,
        description="sensor_rooms: a lookup not answered in this time (retries included) "
        "gives the fallback, UNKNOWN ROOM.",
    )
    lookup_retries: int = Field(
        2, ge=0, le=10, description="sensor_rooms: retries of a failed lookup (with backoff)."
    )
    lookup_ordered: bool = Field(
        True,
        description="sensor_rooms: emit enriched readings in input order (true) or as "
        "lookups finish (false; never across a watermark).",
    )


class SinkSettings(AgentSettings):
    postgres_dsn: SecretStr = Field(
        description="postgres_sink: the PostgreSQL server, e.g. "
        "postgresql://eddy@127.0.0.1:5433/eddy (make run starts a local one)."
    )
    postgres_schema: str = Field(
        "eddy",
        pattern=r"^[a-z_][a-z0-9_]{0,62}$",
        description="postgres_sink: the schema its tables live in (created if missing).",
    )
    sink_max_batch_rows: int = Field(
        5_000,
        ge=1,
        description="postgres_sink: upsert as soon as this many rows are buffered "
        "(otherwise at each commit).",
    )


class CheckerSettings(AgentSettings):
    checker_topic_prefix: str = Field(
        "eos-checker-",
        pattern=r"^[A-Za-z0-9._-]{0,100}$",
        description="eos_checker: prefix of its topics (input, echo, agg, alerts).",
    )
