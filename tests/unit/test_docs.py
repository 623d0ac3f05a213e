"""The docs' promises that can drift from the code."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_generated_tables_of_the_docs_are_up_to_date() -> None:
    # The settings and topics of docs/configuration.md, written from the code.
    from tools import docs

    assert docs.stale() == [], "regenerate with: python -m tools docs"


def test_the_readme_is_a_map_of_at_most_12_kb() -> None:
    readme = (ROOT / "README.md").read_bytes()
    assert len(readme) <= 12 * 1024, len(readme)


def test_ci_runs_what_the_readme_tells_developers_to_run() -> None:
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in readme
    commands = [
        line for line in ci.splitlines() if line and not line.startswith(("#", "set ", "cd "))
    ]
    assert commands == ["make test"]


def test_the_readme_names_every_prerequisite_and_what_make_installs() -> None:
    # What `make run` and `make test` need or install must be in the README: the
    # Debian packages the Makefile installs with apt-get, the tools it calls.
    readme = (ROOT / "README.md").read_text()
    makefile = (ROOT / "Makefile").read_text()
    packages = set(re.findall(r"apt-get install -y -qq ([a-z0-9.+-]+)", makefile))
    assert packages >= {"postgresql", "chromium"}
    for needed in [*packages, "Python 3.11", "Java 17", "Maven", "sudo", "kubectl"]:
        assert needed in readme, needed


def test_the_readmes_contents_link_every_page_of_the_docs() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "\n## Contents\n" in readme
    contents = readme.split("\n## Contents\n", 1)[1].split("\n## ", 1)[0]
    linked = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", contents)
    assert linked, "README.md: no links under ## Contents"
    missing = [p for p in linked if not (ROOT / p).is_file()]
    assert missing == [], f"README.md's contents link pages that do not exist: {missing}"
    pages = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))
    assert len(pages) >= 10
    assert [p for p in pages if p not in linked] == [], "add each to README.md's ## Contents"
