"""Every code sample the docs mark runnable runs, and every relative link in the
docs resolves: a README or tutorial that drifts from the code fails here.

A runnable sample is a fenced block whose info string is ``python run``. The
samples of one file run in order, in one namespace (a later sample may use an
earlier one's names), in a temporary directory.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
FENCE = re.compile(r"^```python run\n(.*?)^```", re.M | re.S)
LINK = re.compile(r"\[[^\]]*\]\(([^)#\s]+)(#[^)\s]*)?\)")


def _samples(path: Path) -> list[str]:
    return FENCE.findall(path.read_text())


WITH_SAMPLES = [p for p in DOCS if _samples(p)]


def test_the_tutorial_has_runnable_samples() -> None:
    assert len(_samples(ROOT / "docs" / "tutorial.md")) >= 8


@pytest.mark.parametrize("path", WITH_SAMPLES, ids=lambda p: p.name)
def test_the_runnable_samples_run(path: Path, tmp_path: Path) -> None:
    namespace: dict[str, object] = {"__name__": path.stem}
    cwd = Path.cwd()
    os.chdir(tmp_path)
    try:
        for number, sample in enumerate(_samples(path), start=1):
            code = compile(sample, f"{path.name} (sample {number})", "exec")
            exec(code, namespace)  # the docs' own samples, nothing else
    finally:
        os.chdir(cwd)


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_relative_links_resolve(path: Path) -> None:
    broken = [
        target
        for target, _ in LINK.findall(path.read_text())
        if not target.startswith(("http://", "https://", "mailto:"))
        and not (path.parent / target).exists()
    ]
    assert broken == []
