"""Errors of the chaos harness; the CLI prints each as one line."""

from __future__ import annotations

from eddy.errors import EddyError


class ChaosError(EddyError):
    """The harness cannot run as asked (bad option, unreadable replay file, a broker
    that is not eddy's own when broker faults are requested). The message says what
    to change."""


class ReplayError(ChaosError):
    """A ``--replay`` file is missing or not a schedule written by this harness.
    Point ``--replay`` at the ``schedule.json`` of a run folder under ``$EDDY_HOME/chaos``."""
