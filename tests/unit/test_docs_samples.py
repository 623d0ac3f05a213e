"""Every code sample the docs mark runnable runs, every other Python block is a
checked excerpt of a file, and every relative link in the docs resolves: a
README or tutorial that drifts from the code fails here.

A runnable sample is a fenced block whose info string is ``python run``. The
samples of one file run in order, in one namespace (a later sample may use an
earlier one's names), in a temporary directory. A block that cannot run (it
needs a broker, or is a part of a larger file) is ``python excerpt PATH``: its
lines are in the repository's file ``PATH`` as they are shown. A Python block
marked neither fails (docs/development.md, "Generated docs").
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
FENCE = re.compile(r"^```python run\n(.*?)^```", re.M | re.S)
LINK = re.compile(r"\[[^\]]*\]\(([^)#\s]+)(#[^)\s]*)?\)")
# Any fenced block: its indentation, fence, info string and body.
BLOCK = re.compile(r"^([ \t]*)(```+|~~~+)[ \t]*([^\n]*)\n(.*?)^\1\2[ \t]*$", re.M | re.S)
PYTHON = frozenset({"python", "py", "python3"})


class Block(NamedTuple):
    line: int
    info: str
    body: str


def _python_blocks(text: str) -> list[Block]:
    """The fenced blocks whose language is Python, with their first line's number."""
    found = []
    for match in BLOCK.finditer(text):
        indent, _, info, body = match.groups()
        if info.split()[:1] and info.split()[0].lower() in PYTHON:
            body = "".join(line.removeprefix(indent) for line in body.splitlines(keepends=True))
            found.append(Block(text.count("\n", 0, match.start()) + 1, info.strip(), body))
    return found


def unchecked_blocks(text: str, root: Path = ROOT) -> list[str]:
    """``line N: why`` for every Python block that neither runs nor is an excerpt
    found as it is in the file it names."""
    problems = []
    for block in _python_blocks(text):
        words = block.info.split()
        if words[1:] == ["run"]:
            continue
        if len(words) != 3 or words[1] != "excerpt":
            problems.append(
                f"line {block.line}: ```{block.info} is neither `python run` nor "
                "`python excerpt PATH`"
            )
            continue
        source = root / words[2]
        if not source.is_file():
            problems.append(f"line {block.line}: the excerpt's file {words[2]} does not exist")
        elif block.body.strip("\n") not in source.read_text():
            problems.append(f"line {block.line}: the excerpt is not in {words[2]} as shown")
    return problems


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


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_every_python_block_runs_or_is_a_checked_excerpt(path: Path) -> None:
    assert unchecked_blocks(path.read_text()) == []


def test_an_unmarked_or_drifted_block_is_found(tmp_path: Path) -> None:
    (tmp_path / "mod.py").write_text("def f() -> int:\n    return 1\n\n\nX = f()\n")
    doc = (
        "```python excerpt mod.py\ndef f() -> int:\n    return 1\n```\n\n"
        "```python excerpt mod.py\ndef f() -> int:\n    return 2\n```\n\n"
        "```python excerpt gone.py\nX = 1\n```\n\n"
        "```python\nX = f()\n```\n\n"
        "* a list item:\n\n  ```py\n  X = f()\n  ```\n\n"
        "```python run\nprint(1)\n```\n\n"
        "```bash\nmake test\n```\n"
    )
    assert unchecked_blocks(doc, tmp_path) == [
        "line 6: the excerpt is not in mod.py as shown",
        "line 11: the excerpt's file gone.py does not exist",
        "line 15: ```python is neither `python run` nor `python excerpt PATH`",
        "line 21: ```py is neither `python run` nor `python excerpt PATH`",
    ]


def test_the_agents_doc_shows_sensor_averages_as_the_reference_app_has_it() -> None:
    """Its runnable copy runs on an app of its own; the agent itself is the one in
    agents/, word for word, so the page cannot show an older agent."""
    (sample, *_) = _samples(ROOT / "docs" / "agents.md")
    agent = sample[sample.index("@app.define(") :]
    assert agent.startswith("@app.define(settings=SensorSettings)\ndef sensor_averages(")
    assert agent in (ROOT / "agents" / "sensor_averages.py").read_text()
