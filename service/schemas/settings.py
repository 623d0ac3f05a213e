"""Where the schema registry is, and whether Eddy may register schemas in it."""

from __future__ import annotations

from pydantic import Field, SecretStr, ValidationError
from pydantic_settings import SettingsConfigDict

from eddy.errors import ConfigError
from eddy.redact import redact
from eddy.redacted_settings import RedactedSettings, remember_secrets


class RegistrySettings(RedactedSettings):
    """The schema registry's settings: built only by an app that declares a
    schema-registry serde, so an app of JSON topics needs none of them."""

    model_config = SettingsConfigDict(
        env_prefix="EDDY_SCHEMA_REGISTRY_", extra="ignore", frozen=True, validate_default=True
    )

    url: str | None = Field(
        None,
        description="Schema registry's Confluent-compatible API, e.g. "
        "http://127.0.0.1:8081/apis/ccompat/v7 (Apicurio) or http://host:8081 (Confluent). "
        "Required by any topic declared Avro, Protobuf or JsonSchema.",
    )
    username: str | None = Field(None, description="Schema registry basic-auth user (optional).")
    password: SecretStr | None = Field(
        None, description="Schema registry basic-auth password (with the user)."
    )
    auto_register: bool = Field(
        True,
        description="Register an output topic's schema on first use; false: a worker refuses "
        "to start when the subject lacks it (schemas registered by a deployment pipeline).",
    )
    timeout_ms: int = Field(
        10_000,
        ge=100,
        le=300_000,
        description="Timeout of each schema registry request, and the longest a batch of "
        "records waits for the schemas its records name (then they are retried).",
    )
    cache_size: int = Field(
        1_000,
        ge=1,
        le=1_000_000,
        description="Schemas kept in memory by id, per worker (the least recently used is "
        "dropped first, and asked for again if a record names it).",
    )
    not_found_ttl_ms: int = Field(
        30_000,
        ge=1_000,
        le=86_400_000,
        description="How long a schema id the registry does not have stays unknown before it "
        "is asked about again; records naming it meanwhile are dead-lettered without a request.",
    )
    max_depth: int = Field(
        64,
        ge=1,
        le=500,
        description="Deepest nesting of types (records, arrays, maps, unions; JSON Schema "
        "subschemas) a schema may have. A deeper or recursive writer schema is refused: its "
        "records are dead-lettered; a deeper declared schema stops the app from building.",
    )
    max_record_bytes: int = Field(
        8_388_608,
        ge=1_024,
        le=1_073_741_824,
        description="Largest record a schema-registry serde decodes; a larger one is "
        "dead-lettered.",
    )


def load_registry_settings() -> RegistrySettings:
    """From the environment, each bad variable named (as ``eddy.settings.build``
    does; this package sits below that module, so it does not call it)."""
    try:
        settings = RegistrySettings()
    except ValidationError as exc:
        problems = [
            f"EDDY_SCHEMA_REGISTRY_{'.'.join(map(str, e['loc'])).upper()}: {redact(e['msg'])}"
            for e in exc.errors()
        ]
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(problems)) from None
    remember_secrets(settings)
    return settings
