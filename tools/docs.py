"""``python -m tools docs [--check]``: write the generated parts of the docs.

A generated block sits between ``<!-- generated: NAME -->`` and
``<!-- end: NAME -->``; this writes each from the code (the settings classes,
the topics the reference app creates), so the docs cannot drift from it.
``--check`` changes nothing and fails if a block is out of date (the unit
tests run it).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# A placeholder for the one agent setting without a default (its value is not shown).
_PLACEHOLDERS = {"SinkSettings": {"postgres_dsn": "postgresql://eddy@127.0.0.1:5433/eddy"}}


def settings_block() -> str:
    from eddy import examples
    from eddy.schemas.settings import RegistrySettings
    from eddy.settings import Settings, settings_table

    return settings_table([Settings, RegistrySettings, *examples.app.settings_classes()])


def topics_block() -> str:
    """Every topic of the reference app with all its agents on, default settings."""
    from eddy import examples
    from eddy.settings import Settings, build
    from eddy.topics import topic_roles, topics_table

    settings = build(Settings, {"topic_prefix": ""})
    built = examples.app.build(settings, list(examples.app.agent_names), _PLACEHOLDERS)
    return topics_table(topic_roles(built))


BLOCKS: dict[str, tuple[Path, Callable[[], str]]] = {
    "settings": (ROOT / "docs" / "configuration.md", settings_block),
    "topics": (ROOT / "docs" / "configuration.md", topics_block),
}


def _pattern(name: str) -> re.Pattern[str]:
    return re.compile(
        rf"(<!-- generated: {name} -->\n)(.*?)(<!-- end: {name} -->)", flags=re.DOTALL
    )


def stale() -> list[str]:
    """Names of the blocks whose text differs from what the code gives."""
    found = []
    for name, (path, render) in BLOCKS.items():
        match = _pattern(name).search(path.read_text())
        if match is None or match.group(2) != render() + "\n":
            found.append(f"{name} ({path.relative_to(ROOT)})")
    return found


def write() -> None:
    for name, (path, render) in BLOCKS.items():
        body = render().replace("\\", "\\\\") + "\n"  # literal text in a re replacement
        new, count = _pattern(name).subn(rf"\g<1>{body}\g<3>", path.read_text())
        if count != 1:
            raise SystemExit(f"tools: {path.relative_to(ROOT)} has no generated block {name!r}")
        path.write_text(new)


def main(check: bool) -> int:
    if check:
        out_of_date = stale()
        if out_of_date:
            print(f"tools: out of date: {', '.join(out_of_date)}; run python -m tools docs")
            return 1
        return 0
    write()
    return 0
