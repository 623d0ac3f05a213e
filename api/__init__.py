"""Eddy's REST API: read-only queries on live state, health and metrics."""
