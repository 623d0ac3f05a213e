"""``python -m bench.closing`` closes every key's window at each 5 s of event time
and times exactly those closings (its figures are for docs/performance.md; speed
is not asserted in tests)."""

from __future__ import annotations

import json
from pathlib import Path

from bench import closing


def test_the_closing_benchmark_counts_every_keys_closed_windows(tmp_path: Path) -> None:
    output = tmp_path / "closing.json"
    closing.main(["--keys", "20", "--seconds", "16", "--repeat", "1", "--output", str(output)])
    row = json.loads(output.read_text())
    # Readings up to 15.9 s, a 1 s bound: the watermark passes the ends of the
    # windows [0, 5 s) and [5 s, 10 s), not of [10 s, 15 s).
    assert row["windows_closed"] == 20 * 2
    assert row["firing_us_per_window"] > 0 < row["checkpoint_us_per_window"]
