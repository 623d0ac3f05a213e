"""Binding an app's schema-registry serdes when it builds: one registry client
for the app, each topic's subject, and the outputs whose schemas a worker
registers (or looks up) before it starts."""

from __future__ import annotations

from typing import Any

from eddy.errors import ConfigError
from eddy.redact import remember
from eddy.schemas.base import Binding, BoundSerde, Limits, SchemaSerde
from eddy.schemas.registry import Registry, SchemaRegistry
from eddy.schemas.settings import RegistrySettings, load_registry_settings


class SchemaBinder:
    """Binds declared serdes to the registry ``EDDY_SCHEMA_REGISTRY_*`` names.

    The settings are read at the first serde to bind, so an app of JSON topics
    never needs them.
    """

    def __init__(
        self, settings: RegistrySettings | None = None, registry: Registry | None = None
    ) -> None:
        """Args:
        registry: a registry to bind to instead of the settings' (the test
            driver's :class:`eddy.schemas.memory.MemoryRegistry`).
        """
        self._settings = settings
        self._registry: Registry | None = registry
        self.outputs: list[BoundSerde] = []

    def bind(self, serde: SchemaSerde, subject: str, model: type[Any] | None) -> BoundSerde:
        """Raises:
        ConfigError: no registry URL, or the declared schema is refused.
        """
        if self._registry is not None and self._settings is None:  # given, not configured
            return serde.bind(Binding(self._registry, subject, model))
        settings = self._settings_or_fail(subject, serde)
        limits = Limits(
            settings.max_depth,
            settings.max_record_bytes,
            settings.cache_size,
            settings.not_found_ttl_ms,
        )
        binding = Binding(self._client(settings), subject, model, settings.auto_register, limits)
        return serde.bind(binding)

    def bind_output(self, serde: SchemaSerde, subject: str, model: type[Any] | None) -> BoundSerde:
        bound = self.bind(serde, subject, model)
        self.outputs.append(bound)
        return bound

    def prepare_outputs(self) -> list[int]:
        """Each output's schema id, registered or looked up now, so a refused or
        missing schema stops the worker at start rather than at its first result.

        Raises:
            ConfigError: a subject lacks the schema and auto-registration is off.
            SchemaRejected: the registry's compatibility check refused a schema.
            RegistryUnavailable: the registry did not answer.
        """
        return [bound.prepare() for bound in self.outputs]

    def _settings_or_fail(self, subject: str, serde: SchemaSerde) -> RegistrySettings:
        if self._settings is None:
            self._settings = load_registry_settings()
        if not self._settings.url:
            raise ConfigError(
                f"subject {subject} is declared {type(serde).__name__}: set "
                "EDDY_SCHEMA_REGISTRY_URL to the schema registry's URL"
            )
        return self._settings

    def _client(self, settings: RegistrySettings) -> Registry:
        if self._registry is None:
            assert settings.url is not None  # checked by _settings_or_fail
            auth = None
            if settings.username is not None:
                password = settings.password.get_secret_value() if settings.password else ""
                remember([password])  # a library's message that quotes it is redacted
                auth = (settings.username, password)
            self._registry = SchemaRegistry(
                settings.url,
                auth,
                settings.timeout_ms,
                cache_size=settings.cache_size,
                not_found_ttl_ms=settings.not_found_ttl_ms,
            )
        return self._registry
