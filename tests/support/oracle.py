"""An offline recomputation of windowed averages, written independently of Eddy's
operator: per input partition, in arrival order, with Flink's watermark rule
(``max timestamp so far - bound - 1``, applied before each record).

The implementation lives in ``tools.chaos.recompute`` (the chaos harness uses it
too); this module keeps the tests' import path."""

from __future__ import annotations

from tools.chaos.recompute import Expected, expected_windows, windows_by_partition

__all__ = ["Expected", "expected_windows", "windows_by_partition"]
