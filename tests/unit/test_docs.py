"""The README's promises that can drift from the code."""

from __future__ import annotations

from pathlib import Path

from service.settings import settings_table

ROOT = Path(__file__).resolve().parents[2]


def test_readme_settings_table_is_the_generated_one() -> None:
    readme = (ROOT / "README.md").read_text()
    import agents
    from service.settings import Settings

    table = settings_table([Settings, *agents.app.settings_classes()])
    assert table in readme, "regenerate with: python -m service config --markdown"


def test_ci_runs_what_the_readme_tells_developers_to_run() -> None:
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in readme
    commands = [
        line for line in ci.splitlines() if line and not line.startswith(("#", "set ", "cd "))
    ]
    assert commands == ["make test"]
