"""``--app module:attribute``: finding the user's app, as uvicorn and Faust do.

The current directory comes first on the import path, so ``eddy worker --app
clicks:app`` finds ``./clicks.py`` without installing it. Every way this can
fail is a one-line message that says what to fix; an exception raised while
importing the user's module names the user's line.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

from eddy.app.app import App
from eddy.errors import ConfigError
from eddy.pipeline.source import failure
from eddy.settings import DEFAULT_APP, Settings, load_settings

APP_VARIABLE = "EDDY_APP"


def app_spec(given: str | None = None) -> str:
    """The app to load: ``--app``, else ``EDDY_APP``, else the reference app."""
    return given or os.environ.get(APP_VARIABLE) or DEFAULT_APP


def load_app(spec: str | None = None) -> App:
    """Import ``module:attribute`` and return the :class:`App` it names.

    Raises:
        ConfigError: the spec is malformed, the module or attribute is missing,
            importing raised, or the attribute is not an App.
    """
    spec = app_spec(spec)
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise ConfigError(f"--app {spec!r}: expected module:attribute, e.g. clicks:app")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    module = _import(spec, module_name)
    target: Any = module
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise ConfigError(f"--app {spec}: module {module_name} has no attribute {attribute!r}")
        target = getattr(target, part)
    if not isinstance(target, App):
        raise ConfigError(f"--app {spec}: {attribute} is a {type(target).__name__}, not an App")
    return target


def _import(spec: str, module_name: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name or module_name.startswith(f"{exc.name}."):
            raise ConfigError(
                f"--app {spec}: no module named {module_name!r} (run from the folder that "
                "holds it, or install it)"
            ) from None
        raise ConfigError(f"--app {spec}: importing it failed: {failure('import', exc)}") from None
    except ConfigError:
        raise
    except Exception as exc:  # the user's module raised: say where, without a traceback
        raise ConfigError(f"--app {spec}: importing it failed: {failure('import', exc)}") from None


def load_app_and_settings(spec: str | None = None, **overrides: Any) -> tuple[App, Settings]:
    """The app (``--app``, else EDDY_APP) and the framework settings it runs with.

    The environment may hold the app's agent settings too (they are known, not
    rejected as misspelt). The app's name is the default ``EDDY_APP_ID``.
    """
    app = load_app(spec)
    if spec:
        overrides["app"] = spec
    settings = load_settings(app.settings_classes(), **overrides)
    if "app_id" not in settings.model_fields_set:
        settings = settings.model_copy(update={"app_id": app.name})
    return app, settings
