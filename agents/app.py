"""The reference app's :class:`~eddy.App`: every agent module adds itself."""

from __future__ import annotations

from eddy import App

app = App("eddy")
