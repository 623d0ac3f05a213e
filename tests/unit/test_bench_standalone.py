"""What ``python -m bench.memory`` and ``bench.soak`` share around their measure:
the result file a report reads, the exit codes a script tests, and a background
load that stops however often it is told to. The session is faked: no broker."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from bench import standalone
from bench.background import Background
from bench.errors import BenchError
from bench.run import Options, Run


def options(tmp_path: Path) -> Options:
    return Options(
        readings=0, partitions=[1], contenders=[], one_partition=[], cap_s=0,
        quick=False, results_dir=tmp_path / "results", suite="trial",
    )  # fmt: skip


@pytest.fixture(autouse=True)
def no_broker(monkeypatch: pytest.MonkeyPatch) -> None:
    @contextlib.contextmanager
    def session(_options: Options, _console: Console) -> Iterator[Run]:
        yield None  # type: ignore[misc]  # the measures below never touch the run

    monkeypatch.setattr(standalone, "session", session)
    monkeypatch.setattr(standalone, "machine", lambda: {"cpus": 2})


def test_the_result_is_saved_stamped_with_the_suite_and_machine(tmp_path: Path) -> None:
    saved = standalone.measure_and_save(
        "bench.trial", options(tmp_path), Console(), lambda _run: {"met": True}
    )
    assert isinstance(saved, standalone.Saved)
    assert saved.path == tmp_path / "results" / "trial.json"
    on_disk = json.loads(saved.path.read_text())
    assert on_disk == saved.result
    assert on_disk["suite"] == "trial"
    assert on_disk["machine"] == {"cpus": 2}
    assert on_disk["met"] is True
    assert on_disk["started_at"].endswith("Z")


@pytest.mark.parametrize(
    ("error", "code"), [(BenchError("no broker"), 1), (KeyboardInterrupt(), 130)]
)
def test_a_failed_or_interrupted_run_saves_nothing_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], error: BaseException, code: int
) -> None:
    def measure(_run: Run) -> dict[str, Any]:
        raise error

    assert standalone.measure_and_save("bench.trial", options(tmp_path), Console(), measure) == code
    assert not (tmp_path / "results").exists()
    assert capsys.readouterr().out.startswith("bench.trial: ")


@dataclass
class Ticker(Background):
    thread_name = "bench-ticker"
    ticks: list[int] = field(default_factory=list)

    def _run(self) -> None:
        while not self._stop.wait(0.001):
            self.ticks.append(1)


def test_a_background_load_runs_on_its_own_thread_until_stopped_twice() -> None:
    ticker = Ticker()
    ticker.start()
    assert ticker._thread is not None
    assert ticker._thread.name == "bench-ticker"
    assert ticker._thread in threading.enumerate()
    ticker.stop()
    ticker.stop()  # a `finally` stops what the happy path already stopped
    assert not ticker._thread.is_alive()
