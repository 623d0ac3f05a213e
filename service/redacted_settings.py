"""Settings classes that never show a credential (see service/redact.py): kept
apart from it, so that a process that only redacts text (the CLI's error path)
does not load pydantic-settings."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pydantic import SecretStr
from pydantic_settings import BaseSettings

from eddy.redact import redact, remember, remember_in


class RedactedSettings(BaseSettings):
    """Settings whose repr and str never show a credential: a ``SecretStr`` shows as
    pydantic masks it, and a text setting (a URL, a DSN) with its user info and
    credential parameters masked, so a settings object can be logged or printed.
    ``model_dump`` and ``to_env`` still give the values (a child process needs them)."""

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        for name, value in super().__repr_args__():
            yield name, shown(value)


def shown(value: Any) -> Any:
    """A setting's value as it may be shown: credentials in text masked."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, tuple | list):
        return type(value)(shown(v) for v in value)
    return value


def remember_secrets(settings: BaseSettings) -> None:
    """Remember each ``SecretStr`` of ``settings`` and each password inside a URL
    or DSN of theirs, so a library that prints one alone (decoded, or encoded) is
    redacted too."""
    for name in type(settings).model_fields:
        value = getattr(settings, name)
        if isinstance(value, SecretStr):
            value = value.get_secret_value()
            remember([value])
        if isinstance(value, str):
            remember_in(value)
