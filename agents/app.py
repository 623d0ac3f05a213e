"""The reference app's :class:`~service.App`: every agent module adds itself."""

from __future__ import annotations

from service import App

app = App("eddy")
