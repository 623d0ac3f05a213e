"""Watermark control records in repartition topics (see repartition.py)."""

from __future__ import annotations

from eddy.pipeline.base import InputRecord

WATERMARK = "eddy.watermark"
UPSTREAM = "eddy.upstream"
UPSTREAMS = "eddy.upstreams"


def marker_of(record: InputRecord) -> tuple[int, int, int] | None:
    """``(upstream task, upstream tasks, watermark)`` if ``record`` is a marker."""
    headers = record.headers
    if not headers or record.value:
        return None
    found = dict(headers)
    if WATERMARK not in found:
        return None
    return int(found[UPSTREAM]), int(found[UPSTREAMS]), int(found[WATERMARK])
