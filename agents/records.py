"""The reference app's record types: what its topics carry.

Models are strict: a record either validates completely or goes to the
dead-letter topic with a one-line reason and its original bytes.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StrictInt


class SensorReading(BaseModel):
    """A sensor's temperature (Fahrenheit) at an instant."""

    model_config = ConfigDict(frozen=True, extra="ignore", allow_inf_nan=False)

    sensor_id: Annotated[str, Field(min_length=1, max_length=200)]
    timestamp_ms: Annotated[StrictInt, Field(ge=0, le=2**53)]
    temperature: Annotated[float, Field(allow_inf_nan=False)]

    def to_json(self) -> bytes:
        return self.model_dump_json().encode()


class ThresholdUpdate(BaseModel):
    """A sensor's alert threshold, on the control topic: 0.0 removes it."""

    model_config = ConfigDict(frozen=True, extra="ignore", allow_inf_nan=False)

    sensor_id: Annotated[str, Field(min_length=1, max_length=200)]
    threshold: Annotated[float, Field(ge=0)]


class VehicleSpeed(BaseModel):
    """A vehicle's speed at an instant, from its OBD device or from the driver's phone app."""

    model_config = ConfigDict(frozen=True, extra="ignore", allow_inf_nan=False)

    vehicle_id: Annotated[str, Field(min_length=1, max_length=200)]
    timestamp_ms: Annotated[StrictInt, Field(ge=0, le=2**53)]
    speed_kmh: Annotated[float, Field(ge=0, le=1_000)]


class Tweet(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    tweet_id: Annotated[str, Field(min_length=1, max_length=200)]
    user: Annotated[str, Field(min_length=1, max_length=200)]
    text: Annotated[str, Field(max_length=10_000)]
    timestamp_ms: Annotated[StrictInt, Field(ge=0, le=2**53)]


class GameEvent(BaseModel):
    """Bubbles a player popped; phones in a tunnel deliver these late."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    player: Annotated[str, Field(min_length=1, max_length=200)]
    team: Annotated[str, Field(min_length=1, max_length=200)]
    ts: Annotated[StrictInt, Field(ge=0, le=2**53)]
    bubbles: Annotated[StrictInt, Field(ge=0, le=1_000_000)]
