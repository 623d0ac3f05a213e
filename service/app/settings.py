"""An agent's own settings, declared by the agent, not by Eddy.

.. code-block:: python

    class ClickSettings(AgentSettings):
        click_window_ms: int = Field(60_000, ge=1_000, description="Window size.")

An agent names its class (``@app.agent(..., settings=ClickSettings)`` or
``@app.define(settings=ClickSettings)``); the worker builds it from
``EDDY_<FIELD>`` variables when the agent runs, and stops at start with a
message naming each bad or missing variable. ``eddy config`` lists these
settings next to the framework's, and a variable that belongs to neither is
rejected with the closest name.
"""

from __future__ import annotations

from pydantic_settings import SettingsConfigDict

from eddy.redacted_settings import RedactedSettings
from eddy.settings import ENV_PREFIX


class AgentSettings(RedactedSettings):
    """Base of an agent's settings class: ``EDDY_``-prefixed, frozen, validated; its
    repr masks credentials (service/settings.py)."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, extra="ignore", frozen=True, validate_default=True
    )
