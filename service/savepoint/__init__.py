"""Savepoints: taking them, and resuming from them (docs/savepoints.md)."""
