"""``eddy agents``: the app's agents, whether a worker runs each by default, the
settings class it reads, and, for those this configuration runs, their stages,
topics and REST paths."""

from __future__ import annotations

import argparse
from typing import Any

import orjson

from eddy.app.app import App, BuiltApp
from eddy.app.plan import View


def _path(view: View) -> str:
    if view.kind == "windows":
        return f"/agents/{view.agent}/windows/{{key}}"
    assert view.descriptor is not None
    return f"/agents/{view.agent}/state/{view.descriptor.name}/{{key}}"


def describe(app: App, built: BuiltApp) -> list[dict[str, Any]]:
    """One entry per agent of ``app``; ``runs`` says whether ``built`` has it."""
    defaults = set(app.default_agents)
    classes = app.settings_class_of
    rows = []
    for name in app.agent_names:
        compiled = built.agents.get(name)
        settings = classes(name)
        rows.append(
            {
                "agent": name,
                "default": name in defaults,
                "runs": compiled is not None,
                "settings": None if settings is None else settings.__name__,
                "stages": [] if compiled is None else [s.name for s in compiled.stages],
                "topics": [] if compiled is None else sorted({t.name for t in compiled.topics}),
                "paths": [] if compiled is None else [_path(v) for v in compiled.views],
            }
        )
    return rows


def run_cli(args: argparse.Namespace) -> int:
    from eddy.app.loader import load_app_and_settings

    app, settings = load_app_and_settings(getattr(args, "app", None))
    rows = describe(app, app.build(settings))
    if args.json:
        print(orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode())
        return 0
    for row in rows:
        state = "runs" if row["runs"] else ("off" if not row["default"] else "not selected")
        print(f"{row['agent']}  ({state}; settings: {row['settings'] or 'none'})")
        for label in ("stages", "topics", "paths"):
            if row[label]:
                print(f"  {label}: {', '.join(row[label])}")
    return 0
