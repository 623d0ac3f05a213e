"""Where Eddy keeps its files: one folder, ``EDDY_HOME``.

The rule: ``EDDY_HOME`` (default ``.eddy``) is made absolute against the current
directory once, when settings are loaded or a tool starts. A relative path of a
folder Eddy owns (``EDDY_STATE_DIR``, ``EDDY_SNAPSHOT_ROOT``, ``EDDY_SAVEPOINT_ROOT``;
the local broker, PostgreSQL, logs and reports of the tools) is taken from
``EDDY_HOME``; an absolute one, or a URI such as ``s3://bucket/prefix``, stays as
given. Files the user names (``EDDY_SSL_CAFILE``, ``--input``) are read from the
current directory, as any command line reads them.

No pydantic here: the tools, the Spark jobs and the settings all resolve paths
through these functions, so they cannot disagree.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

HOME_VARIABLE = "EDDY_HOME"
DEFAULT_HOME = ".eddy"


def absolute(path: str | os.PathLike[str]) -> Path:
    """``path`` with ``~`` expanded, joined to the current directory if relative.

    Not ``Path.resolve``: a symlinked home keeps the name the user gave it.
    """
    return Path(os.path.abspath(Path(path).expanduser()))


def home_from(value: str | os.PathLike[str] | None) -> Path:
    """The home a value of ``EDDY_HOME`` names; unset or empty is ``.eddy``."""
    text = os.fspath(value) if value is not None else ""
    return absolute(text or DEFAULT_HOME)


def eddy_home(environ: Mapping[str, str] | None = None) -> Path:
    """``$EDDY_HOME`` as the settings would resolve it, for code that has no Settings
    (the tools, the Spark jobs)."""
    env = os.environ if environ is None else environ
    return home_from(env.get(HOME_VARIABLE))


def in_home(path: str | os.PathLike[str], home: Path) -> Path:
    """An Eddy-owned folder: relative paths are taken from ``home``."""
    expanded = Path(path).expanduser()
    return expanded if expanded.is_absolute() else Path(os.path.normpath(home / expanded))


def is_uri(location: str) -> bool:
    """``s3://...``, ``file:///...``: left to the filesystem that opens it
    (the test ``SnapshotRoot.open`` applies)."""
    return "://" in location


def root_in_home(location: str, home: Path) -> str:
    """A snapshot or savepoint root: a URI as given, a path as :func:`in_home`."""
    return location if is_uri(location) else str(in_home(location, home))
