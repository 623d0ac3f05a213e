"""``python -m bench.querycost`` runs and records both variants (its figures are
for docs/performance.md; speed is not asserted in tests)."""

from __future__ import annotations

import json
from pathlib import Path

from bench import querycost


def test_the_query_cost_benchmark_records_both_variants(tmp_path: Path) -> None:
    querycost.main(["--requests", "100", "--repeat", "1", "--catch-up-every", "10",
                    "--results-dir", str(tmp_path)])  # fmt: skip
    row = json.loads((tmp_path / "querycost.json").read_text())
    assert set(row["cpu_us_per_query"]) == {"fastapi", "fast-path"}
    assert all(us > 0 for us in row["cpu_us_per_query"].values())
