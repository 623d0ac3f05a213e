"""What a side benchmark (snapshot, sink, enrichment) records about where it ran."""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any


def machine() -> dict[str, Any]:
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        # Shared machines: a busy one makes every figure here slower.
        "load_average_1m_at_end": round(os.getloadavg()[0], 2),
    }


def write_result(path: Path | str, result: dict[str, Any]) -> None:
    """``result`` with the machine and the time, as indented JSON at ``path``."""
    stamped = {
        **result,
        "machine": machine(),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(stamped, indent=2) + "\n")
