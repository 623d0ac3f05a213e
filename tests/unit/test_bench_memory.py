"""The pure parts of the memory run and the soak: RSS parsing, flatness, pacing.

What a reader of ``bench/results/{memory,soak}.json`` relies on: that an RSS is
read in the kernel's unit, that a process is named the same in every sample,
that the warm-up is left out of the figures, and that the load's pace follows
the clock.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.latency import LiveLoad, due
from bench.memory import metric_values
from bench.rss import (
    QUERY,
    Sample,
    flatness,
    label_of,
    max_deviation,
    rss_by_label,
    summary,
    vm_rss_bytes,
)
from bench.soak import closed_windows

STATUS = """Name:\tpython
VmPeak:\t  812344 kB
VmHWM:\t  301000 kB
VmRSS:\t  295120 kB
RssAnon:\t  250000 kB
"""
MB = 2**20


def test_vm_rss_is_read_in_bytes_not_the_high_water_mark() -> None:
    assert vm_rss_bytes(STATUS) == 295_120 * 1_024


def test_a_zombie_has_no_rss() -> None:
    assert vm_rss_bytes("Name:\tpython\nState:\tZ (zombie)\n") is None


def test_an_unexpected_unit_is_an_error_not_a_wrong_figure() -> None:
    with pytest.raises(ValueError, match="unit"):
        vm_rss_bytes("VmRSS:\t 1 MB\n")


def test_processes_are_labelled_by_role() -> None:
    ingest = ["/v/python", "-m", "eddy.plane.ingest", "--index", "1", "--parent-pid", "7"]
    assert label_of(ingest, is_root=False) == "ingest-1"
    assert label_of(["/v/python", "-m", "eddy", "worker"], is_root=True) == QUERY
    assert label_of(["/usr/bin/java", "-cp", "x"], is_root=False) == "java"


def test_a_process_and_its_child_are_sampled_under_their_labels() -> None:
    # A process of its own: this one may have children (a broker started by the
    # suite) that would be sampled too.
    code = "import subprocess, sys, time; subprocess.Popen(['sleep', '30']); time.sleep(30)"
    root = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 10
        rss = rss_by_label(root.pid)
        while len(rss) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
            rss = rss_by_label(root.pid)
        assert set(rss) == {QUERY, "sleep"}
        assert rss[QUERY] > 1 * MB
    finally:
        for pid in _children(root.pid):
            os.kill(pid, signal.SIGKILL)
        root.kill()
        root.wait()


def _children(pid: int) -> list[int]:
    tasks = Path(f"/proc/{pid}/task")
    return [int(c) for t in tasks.iterdir() for c in (t / "children").read_text().split()]


def test_flatness_is_the_spread_over_the_mean() -> None:
    assert flatness([90, 100, 110]) == pytest.approx(0.2)
    assert max_deviation([90, 100, 110]) == pytest.approx(0.1)
    assert flatness([100, 100]) == 0.0


def test_flatness_of_nothing_is_an_error() -> None:
    with pytest.raises(ValueError, match="no samples"):
        flatness([])


def test_the_warm_up_is_left_out_of_the_figures_but_not_of_the_peak() -> None:
    samples = [
        Sample(0, {QUERY: 50 * MB, "ingest-0": 400 * MB}),
        Sample(60_000, {QUERY: 100 * MB, "ingest-0": 200 * MB}),
        Sample(120_000, {QUERY: 110 * MB, "ingest-0": 220 * MB}),
    ]
    figures = summary(samples, after_ms=60_000)
    ingest = figures["ingest-0"]
    assert (ingest["min_mb"], ingest["max_mb"], ingest["mean_mb"]) == (200, 220, 210)
    assert ingest["final_mb"] == 220
    assert ingest["peak_mb"] == 400
    assert ingest["flatness"] == pytest.approx(20 / 210, abs=1e-4)
    assert figures[QUERY]["samples"] == 2


def test_a_process_sampled_only_in_the_warm_up_has_no_figures() -> None:
    samples = [Sample(0, {"ingest-1": MB}), Sample(60_000, {QUERY: MB})]
    assert set(summary(samples, after_ms=30_000)) == {QUERY}


def test_pacing_follows_the_clock() -> None:
    assert due(0.0, 48_000) == 0
    assert due(0.5, 48_000) == 24_000
    # A tick that came 2 s late owes the whole 2 s at once: the rate does not drop.
    assert due(2.0, 48_000) - due(0.01, 48_000) == 95_520


def test_only_windows_every_partition_has_closed_are_checked() -> None:
    load = LiveLoad("unused:9092", "t", 6, 1_000, keep_times=False)
    load.per_window.update({0: 10, 5_000: 10, 10_000: 10, 15_000: 3})
    # Closed once a reading at or past end + the 1 s bound was produced, a second to spare.
    load.stopped_ms = 16_999
    assert closed_windows(load) == [0, 5_000]
    load.stopped_ms = 17_000
    assert closed_windows(load) == [0, 5_000, 10_000]


def test_state_keys_are_summed_over_every_labelled_series() -> None:
    text = (
        "# HELP eddy_state_keys RocksDB's estimate\n"
        'eddy_state_keys{stage="sensor_averages",partition="0"} 333334.0\n'
        'eddy_state_keys{stage="sensor_averages",partition="1"} 1.5e+05\n'
        'eddy_state_keys_other{partition="1"} 9.0\n'
    )
    assert sum(metric_values(text, "eddy_state_keys")) == 483_334
