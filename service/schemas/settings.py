"""Where the schema registry is, and whether Eddy may register schemas in it."""

from __future__ import annotations

from pydantic import Field, SecretStr, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from service.errors import ConfigError


class RegistrySettings(BaseSettings):
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
        10_000, ge=100, le=300_000, description="Timeout of each schema registry request."
    )


def load_registry_settings() -> RegistrySettings:
    """From the environment, each bad variable named (as ``service.settings.build``
    does; this package sits below that module, so it does not call it)."""
    try:
        return RegistrySettings()
    except ValidationError as exc:
        problems = [
            f"EDDY_SCHEMA_REGISTRY_{'.'.join(map(str, e['loc'])).upper()}: {e['msg']}"
            for e in exc.errors()
        ]
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(problems)) from None
