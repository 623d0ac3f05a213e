"""Errors of the fleet harness; the CLI prints each as one line."""

from __future__ import annotations

from tools.chaos.errors import ChaosError


class FleetError(ChaosError):
    """The fleet's network could not be built or changed: not root, no ``ip``, or a
    command failed. The message says which and what is needed; run
    ``python -m tools fleet clean`` to remove what a crashed run left behind."""
