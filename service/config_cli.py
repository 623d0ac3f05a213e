"""``eddy config``: the effective settings, as ``EDDY_*=value`` lines, JSON or the
markdown table of docs/configuration.md.

The lines are the environment that reproduces this configuration, credentials
masked: the framework's settings first, then each agent settings class's
variables not already listed. A class with a required setting unset is named
with what is missing, and the listing goes on, so one forgotten variable does
not hide the others. A ``SecretStr`` setting shows as ``**********`` (set, not
shown), and a URL or DSN with its user info and credential parameters as
``***`` (service/redact.py): the output can be pasted into a ticket.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from pydantic import SecretStr
from pydantic_settings import BaseSettings

from eddy.app.app import App
from eddy.cli_parser import print_json
from eddy.errors import ConfigError
from eddy.redact import redact
from eddy.settings import ENV_PREFIX, Settings, build, settings_table

FRAMEWORK = "eddy"  # declared_by of the framework's own settings
SECRET = "**********"  # what pydantic shows for a SecretStr: set, not shown


@dataclass
class Variable:
    name: str
    value: str | None
    declared_by: str


@dataclass
class Group:
    """The variables one settings class adds, or why it cannot be built."""

    declared_by: str
    variables: list[Variable] = field(default_factory=list)
    error: str | None = None


def effective(app: App, settings: Settings) -> list[Group]:
    """The framework's group, then one per agent settings class."""
    shown = {n: redact(v) for n, v in settings.to_env().items()}
    for name in Settings.model_fields:  # to_env reveals secrets (a child worker needs them)
        if isinstance(getattr(settings, name), SecretStr):
            shown[f"{ENV_PREFIX}{name.upper()}"] = SECRET
    groups = [Group(FRAMEWORK, [Variable(n, v, FRAMEWORK) for n, v in shown.items()])]
    for cls in app.settings_classes():
        group = Group(cls.__name__)
        groups.append(group)
        try:
            values = build(cls, {}).model_dump(mode="json")
        except ConfigError as exc:  # a required setting unset: say which, keep listing
            group.error = redact(str(exc))
            continue
        for name, value in values.items():
            variable = f"{ENV_PREFIX}{name.upper()}"
            if variable not in shown:
                text = None if value is None else _env_text(value)
                shown[variable] = text or ""
                group.variables.append(Variable(variable, text, cls.__name__))
    return groups


def _env_text(value: object) -> str:
    """A value as the environment variable that sets it (lists comma-separated,
    as ``Settings.to_env`` writes them), credentials masked."""
    return redact(",".join(str(v) for v in value) if isinstance(value, list) else str(value))


def run_cli(args: argparse.Namespace) -> int:
    from eddy.app.loader import load_app, load_app_and_settings

    if args.markdown:
        from eddy.schemas.settings import RegistrySettings

        classes: list[type[BaseSettings]] = [Settings, RegistrySettings]
        classes += load_app(args.app).settings_classes()
        print(settings_table(classes))
        return 0
    app, settings = load_app_and_settings(args.app)
    groups = effective(app, settings)
    if args.json:
        print_json(
            {
                "settings": [
                    {"variable": v.name, "value": v.value, "declared_by": v.declared_by}
                    for g in groups
                    for v in g.variables
                ],
                "errors": [
                    {"declared_by": g.declared_by, "error": g.error} for g in groups if g.error
                ],
            }
        )
        return 0
    for group in groups:
        if group.declared_by != FRAMEWORK:
            print(f"# {group.declared_by} (agent settings)")
        if group.error is not None:
            print("#   " + group.error.replace("\n", "\n#   "))
        for variable in group.variables:
            print(f"{variable.name}={variable.value or ''}")
    return 0
