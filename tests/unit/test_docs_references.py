"""The repository stands alone: its code, comments and docs cite nothing a reader
of the repository cannot look up.

No paths outside it (``../shared``, ``shared/docs/...``), no "the seeds" (source
documents that are not in the repository), and no letter codes for the sections of
docs/semantics.md ("semantics.md D.7"): that page's sections have titles, so a
reference names the title (``docs/semantics.md, "Allowed lateness and late data"``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("service", "agents", "api", "tables", "spark_jobs", "tools", "bench", "tests", "docs")
SUFFIXES = frozenset({".py", ".md"})
THIS_FILE = Path(__file__).resolve()

UNRESOLVABLE = re.compile(
    r"shared/docs"
    # The sibling folder itself, or a document in it; a relative path that merely
    # starts there (a test of path resolution: "../shared/snapshots") is not a citation.
    r"|\.\./shared(?:/[\w.-]+\.md\b|(?![\w/]))"
    r"|(?i:the seeds\b|seeds')"
    # Letter codes of docs/semantics.md's sections: "semantics.md G", "semantics.md
    # D.2-D.6", "semantics C.4", "(semantics F)", "semantics D and G".
    r"|semantics\.md,? [A-O]\b"
    r"|\bsemantics [A-O](?:\.\d|\)|,| and [A-O]\b)"
)


def files_under(folders: Iterable[str]) -> list[Path]:
    found = []
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix in SUFFIXES and path.is_file() and path.resolve() != THIS_FILE:
                found.append(path)
    return found


def unresolvable(paths: Iterable[Path]) -> list[str]:
    """``path:line: text`` for every line that cites something outside the repository."""
    hits = []
    for path in paths:
        text = path.read_text(encoding="utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), start=1):
            if UNRESOLVABLE.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    return hits


@pytest.mark.parametrize(
    "line",
    [
        "See `shared/docs/eos-verification.md`.",
        "the method of ../shared/docs/eos-verification.md",
        "as ../shared/house-style.md says",
        "(see ../shared)",
        "from the seeds' E2-E4",
        "The seeds' custom assigner",
        "as in the seeds",
        "Triggers (docs/semantics.md D.8)",
        "Late data (docs/semantics.md G; ...)",
        "Watermarks (docs/semantics.md C): strategies",
        "the consistent cut of docs/semantics.md I.3",
        "Joins (semantics F) and state time-to-live (H.5)",
        "against an oracle (semantics D and G)",
        "C.6: semantics C.6 says",
    ],
)
def test_the_check_catches_each_kind_of_reference(line: str) -> None:
    assert UNRESOLVABLE.search(line), line


@pytest.mark.parametrize(
    "line",
    [
        "python -m tools chaos --seeds 20",
        "seed=st.integers(0, 2**32)",
        "Every run prints its seed; each seed's checks passed; 20 seeds x 8 faults",
        'docs/semantics.md, "Allowed lateness and late data"',
        "the semantics.md page; exactly-once semantics",
        "the docs/shared folder",
        'monkeypatch.setenv("EDDY_SNAPSHOT_ROOT", "../shared/snapshots")',
    ],
)
def test_the_check_leaves_ordinary_text_alone(line: str) -> None:
    assert not UNRESOLVABLE.search(line), line


def test_the_repository_cites_nothing_outside_itself() -> None:
    paths = files_under(FOLDERS)
    assert len(paths) > 100, "the scan found too few files: is ROOT right?"
    hits = unresolvable(paths)
    assert not hits, "references a reader cannot look up:\n" + "\n".join(hits)


def test_the_readme_cites_nothing_outside_the_repository() -> None:
    hits = unresolvable([ROOT / "README.md"])
    assert not hits, "references a reader cannot look up:\n" + "\n".join(hits)
