"""The one exception the harness raises: its message is the one line a user sees."""

from __future__ import annotations


class BenchError(Exception):
    """A benchmark step failed; the message says which and why, in one line."""
