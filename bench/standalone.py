"""What a measurement run on its own (``python -m bench.memory``, ``bench.soak``)
does around its measure: a bench session, its failures as exit codes, and the
result saved where ``make bench``'s reports look for it."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from bench.errors import BenchError
from bench.run import Options, Run, machine, session


@dataclass(frozen=True)
class Saved:
    result: dict[str, Any]  # the measure's, stamped with the suite, start time and machine
    path: Path  # <results_dir>/<suite>.json


def measure_and_save(
    prog: str, options: Options, console: Console, measure: Callable[[Run], dict[str, Any]]
) -> Saved | int:
    """``measure`` in a session (its topics deleted, contenders stopped, however it
    ends), then its result written; or the exit code of a run that failed (1) or
    was interrupted (130), already reported as ``prog``'s."""
    started_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    try:
        with session(options, console) as run:
            result = measure(run)
    except BenchError as exc:
        console.print(f"[red]{prog}: {exc}[/red]")
        return 1
    except KeyboardInterrupt:
        console.print(f"[yellow]{prog}: interrupted[/yellow]")
        return 130
    result = {"suite": options.suite, "started_at": started_at, "machine": machine(), **result}
    options.results_dir.mkdir(parents=True, exist_ok=True)
    path = options.results_dir / f"{options.suite}.json"
    path.write_text(json.dumps(result, indent=1) + "\n")
    return Saved(result, path)
