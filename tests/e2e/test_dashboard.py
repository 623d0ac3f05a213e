"""The live dashboard in headless Chromium against a worker fed by the simulator.

Debian's Chromium (``make browser`` installs it) driven by Playwright, no browser
download. The screenshot lands in ``tests/artifacts/dashboard.png``.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest
from playwright.async_api import async_playwright

from tests.support.kafka import unique_settings
from tests.support.processes import WorkerProcess, settings_env

pytestmark = pytest.mark.e2e

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
# Without these, Chromium keeps calling Google's hosts, refused on a closed network.
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
CHROMIUM_FOUND = CHROMIUM.exists()
AGENTS = ("sensor_averages", "sensor_alerts", "hashtag_counts")


@pytest.mark.timeout(300)
async def test_the_dashboard_shows_every_agents_windows_and_states_live(
    tmp_path: Path,
) -> None:
    assert CHROMIUM_FOUND, "run `make browser` (Debian's chromium package)"
    settings = unique_settings(tmp_path, agents=AGENTS)
    worker = WorkerProcess(settings, tmp_path / "worker.log")
    simulator: asyncio.subprocess.Process | None = None
    try:
        worker.wait_ready()
        # Event time starts 20 minutes ago and runs fast, so minutes of windows close.
        start_ms = (time.time_ns() // 1_000_000) - 20 * 60_000
        simulator = await asyncio.create_subprocess_exec(
            *[sys.executable, "-m", "tools", "simulate", "--scenario", "sensors,tweets"],
            *["--sensors", "4", "--fast", "--count", "20000", "--seed", "5"],
            *["--start-ms", str(start_ms)],
            env=settings_env(settings),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
            page = await browser.new_page(viewport={"width": 1280, "height": 1400})
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            await page.goto(f"{worker.base}/dashboard")
            # Every agent has its section, made from what it serves: charts of the
            # sensors' windows, the alerts state, the newest minute of hashtags.
            averages = '[data-agent="sensor_averages"]'
            alerts = '[data-agent="sensor_alerts"]'
            hashtags = '[data-agent="hashtag_counts"]'
            await page.wait_for_selector(f"{averages} .card svg polyline", timeout=120_000)
            await page.wait_for_selector(f"{alerts} table tr td", timeout=60_000)
            await page.wait_for_selector(f"{hashtags} table tr td", timeout=150_000)
            sensors = await page.locator(f"{averages} .card").count()
            watermark_rows = await page.locator("#watermarks table tr").count()
            first_hashtag = await page.locator(f"{hashtags} table tr td").first.inner_text()
            sections = await page.locator("#agents section").count()
            ARTIFACTS.mkdir(exist_ok=True)
            await page.screenshot(path=str(ARTIFACTS / "dashboard.png"), full_page=True)
            error_text = await page.locator("#error").inner_text()
            await browser.close()
        assert sensors == 4
        assert sections == len(AGENTS)
        assert watermark_rows > 1  # header + one row per partition
        assert first_hashtag  # the key (a hashtag, lower case, no #)
        assert not first_hashtag.startswith("#")
        assert error_text == ""
        assert errors == []
    finally:
        if simulator is not None and simulator.returncode is None:
            simulator.terminate()
            await simulator.wait()
        worker.stop()
