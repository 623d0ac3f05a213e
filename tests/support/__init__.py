"""Helpers for tests that talk to the real broker."""
