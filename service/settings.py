"""Eddy's settings: one pydantic-settings class, built by a factory.

Every setting comes from an environment variable with the ``EDDY_`` prefix
(``EDDY_BOOTSTRAP_SERVERS``, ``EDDY_PROCESSING_GUARANTEE``...). Nothing is
built at import time: tests and tools call :func:`load_settings` with
overrides, so two workers in one test never share hidden configuration.
"""

from __future__ import annotations

import difflib
import os
import socket
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from service.errors import ConfigError

ENV_PREFIX = "EDDY_"
# Variables with the prefix that are not Settings fields (read by tools, not workers).
OTHER_VARIABLES = {"EDDY_LOCAL_KAFKA_DIR"}
LOCAL_BOOTSTRAP = "127.0.0.1:9092"


class Guarantee(StrEnum):
    EXACTLY_ONCE = "exactly_once"
    AT_LEAST_ONCE = "at_least_once"


class SecurityProtocol(StrEnum):
    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"


class SaslMechanism(StrEnum):
    SCRAM_SHA_512 = "SCRAM-SHA-512"
    SCRAM_SHA_256 = "SCRAM-SHA-256"
    PLAIN = "PLAIN"


class RestartStrategy(StrEnum):
    """What a worker does when pipeline code raises (service/runtime/restarts.py)."""

    FIXED_DELAY = "fixed_delay"
    FAILURE_RATE = "failure_rate"
    NONE = "none"


class Settings(BaseSettings):
    """All of Eddy's configuration. Field docs become the README's settings table."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, extra="forbid", frozen=True, validate_default=True
    )

    app_id: str = Field(
        "eddy",
        pattern=r"^[A-Za-z0-9._-]{1,100}$",
        description="Application id: prefix of consumer groups, transactional ids and "
        "changelog topics. Workers with the same id share the work.",
    )
    bootstrap_servers: str = Field(
        LOCAL_BOOTSTRAP,
        min_length=1,
        description="Kafka bootstrap servers, comma-separated. The local broker is only "
        f"started when this is {LOCAL_BOOTSTRAP} or localhost:9092.",
    )
    processing_guarantee: Guarantee = Field(
        Guarantee.EXACTLY_ONCE,
        description="exactly_once (Kafka transactions) or at_least_once.",
    )
    commit_interval_ms: int = Field(
        100, ge=10, le=60_000, description="How often offsets, outputs and state commit."
    )
    latency_marker_interval_ms: int = Field(
        1_000,
        ge=0,
        le=3_600_000,
        description="How often each input partition's fetched batch is marked and timed "
        "until the commit that makes its outputs visible (eddy_latency_marker_seconds); "
        "0 = off.",
    )
    restart_strategy: RestartStrategy = Field(
        RestartStrategy.FIXED_DELAY,
        description="When pipeline code raises on a record: fixed_delay (reopen the partition "
        "from its last commit after restart_delay_ms), failure_rate (the same, but stop after "
        "restart_max_failures within restart_interval_ms) or none (stop the worker).",
    )
    restart_delay_ms: int = Field(
        1_000, ge=0, le=600_000, description="Wait before reopening a failed partition."
    )
    restart_max_failures: int = Field(
        10, ge=1, description="failure_rate: most failures within restart_interval_ms."
    )
    restart_interval_ms: int = Field(
        60_000, ge=1_000, description="failure_rate: the window failures are counted in."
    )
    max_record_attempts: int = Field(
        3,
        ge=1,
        le=100,
        description="A record whose processing raises this many times goes to the dead-letter "
        "topic with the error, so one poison record cannot stop a partition.",
    )
    transaction_timeout_ms: int = Field(
        30_000,
        ge=1_000,
        le=900_000,
        description="Broker aborts a worker's open transaction after this long.",
    )
    session_timeout_ms: int = Field(10_000, ge=1_000, description="Consumer group session timeout.")
    state_dir: Path = Field(
        Path(".eddy/state"), description="Local RocksDB directory (rebuilt from changelogs)."
    )
    worker_id: str = Field(
        default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}",
        min_length=1,
        description="This worker's name in logs, client ids and API responses.",
    )
    num_standby_replicas: int = Field(
        1,
        ge=0,
        le=5,
        description="Warm copies of each partition's state kept on other workers, "
        "so a failover restores almost nothing.",
    )
    partitions: int = Field(
        6, ge=1, le=1024, description="Partitions of the topics Eddy creates (parallelism)."
    )
    replication_factor: int = Field(
        1, ge=1, le=7, description="Replication factor of the topics Eddy creates."
    )
    readings_topic: str = Field("sensor-readings", description="Input: sensor readings.")
    averages_topic: str = Field(
        "sensor-averages", description="Output: one result per sensor and window."
    )
    late_topic: str = Field(
        "late-readings", description="Readings too late for every window they belong to."
    )
    dead_letter_topic: str = Field(
        "dead-letters", description="Records that could not be decoded, with the reason."
    )
    window_size_ms: int = Field(
        5_000, ge=1, description="Size of sensor_averages' tumbling event-time windows."
    )
    watermark_bound_ms: int = Field(
        1_000, ge=0, description="Bounded out-of-orderness of the sensor watermark."
    )
    allowed_lateness_ms: int = Field(
        0, ge=0, description="Keep a fired window this long (event time) for late updates."
    )
    results_retention_ms: int = Field(
        86_400_000,
        ge=1,
        description="How long (event time) window results stay queryable in state.",
    )
    pipelines: Annotated[tuple[str, ...], NoDecode] = Field(
        (
            "sensor_averages",
            "sensor_minmax",
            "sensor_alerts",
            "sensor_counts",
            "vehicle_speed",
            "hashtags",
            "hashtag_counts",
            "team_powerups",
        ),
        description="Pipelines this worker runs, comma-separated (see agents/).",
    )
    topic_prefix: str = Field(
        "",
        pattern=r"^[A-Za-z0-9._-]{0,100}$",
        description="Prefix of the reference pipelines' topics (sensor-alerts, tweets, "
        "vehicle-obd-speed...): to run several Eddy apps on one cluster.",
    )
    upstream_idle_timeout_ms: int = Field(
        10_000,
        ge=0,
        description="hashtag_counts: an upstream task silent this long (processing time) "
        "stops holding the clock back after the repartition; 0 waits for it forever "
        "(deterministic results, as the chaos harness needs).",
    )
    speed_tolerance_kmh: float = Field(
        5.0, ge=0, description="vehicle_speed: the app's speed agrees if within this of OBD."
    )
    checker_topic_prefix: str = Field(
        "eos-checker-",
        description="Topic prefix of the eos_checker pipeline (input, echo, agg, alerts).",
    )
    room_service_url: str = Field(
        "http://127.0.0.1:8090",
        pattern=r"^https?://[^/\s]+$",
        description="sensor_rooms: base URL of the sensor-to-room lookup service "
        "(GET /rooms/<sensor_id>; make run starts one).",
    )
    lookup_capacity: int = Field(
        100, ge=1, le=10_000, description="sensor_rooms: most lookups in flight per partition."
    )
    lookup_timeout_ms: int = Field(
        5_000,
        ge=1,
        description="sensor_rooms: a lookup not answered in this time (retries included) "
        "gives the fallback, UNKNOWN ROOM (the seeds' E18: 5 s).",
    )
    lookup_retries: int = Field(
        2, ge=0, le=10, description="sensor_rooms: retries of a failed lookup (with backoff)."
    )
    lookup_ordered: bool = Field(
        True,
        description="sensor_rooms: emit enriched readings in input order (true) or as "
        "lookups finish (false; never across a watermark).",
    )
    postgres_dsn: SecretStr | None = Field(
        None,
        description="postgres_sink: the PostgreSQL server, e.g. "
        "postgresql://eddy@127.0.0.1:5433/eddy (make run starts a local one).",
    )
    postgres_schema: str = Field(
        "eddy",
        pattern=r"^[a-z_][a-z0-9_]{0,62}$",
        description="postgres_sink: the schema its tables live in (created if missing).",
    )
    sink_max_batch_rows: int = Field(
        5_000,
        ge=1,
        description="postgres_sink: upsert as soon as this many rows are buffered "
        "(otherwise at each commit).",
    )
    api_host: str = Field("127.0.0.1", description="Address the REST API binds to.")
    api_token: SecretStr | None = Field(
        None,
        description="When set, every endpoint but /healthz and /readyz needs the header "
        "'Authorization: Bearer <token>' (the dashboard asks for it once).",
    )
    api_advertised_url: str | None = Field(
        None,
        pattern=r"^https?://[^/\s]+$",
        description="How other workers reach this one's API, e.g. http://10.0.0.7:8000, to "
        "forward queries for keys it owns (default: http://<api_host or hostname>:<port>).",
    )
    api_port: int = Field(8000, ge=0, le=65_535, description="Port of the REST API (0 = any).")
    api_max_results: int = Field(
        1_000, ge=1, description="Most window results one REST response may return."
    )
    snapshot_root: str = Field(
        ".eddy/snapshots",
        min_length=1,
        description="Where state snapshots are published (Parquet + manifest): a local "
        "path or an S3-compatible URI such as s3://bucket/prefix (docs/snapshots.md).",
    )
    savepoint_root: str = Field(
        ".eddy/savepoints",
        min_length=1,
        description="Where savepoints are written (never deleted automatically): a local "
        "path or an S3-compatible URI such as s3://bucket/prefix (docs/savepoints.md).",
    )
    snapshot_interval_ms: int = Field(
        0,
        ge=0,
        description="Take a snapshot at every multiple of this (wall clock, all workers "
        "alike); 0 = only on demand (python -m service snapshot) and at make run's exit.",
    )
    snapshot_retain: int = Field(
        5, ge=1, le=1_000, description="Complete snapshots kept; older ones are deleted."
    )
    snapshot_timeout_ms: int = Field(
        600_000,
        ge=1_000,
        description="Longest wait for another worker's part of an on-demand snapshot.",
    )
    security_protocol: SecurityProtocol = Field(
        SecurityProtocol.PLAINTEXT,
        description="How every Kafka client (worker, simulator, topic admin) talks to the "
        "brokers: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.",
    )
    sasl_mechanism: SaslMechanism = Field(
        SaslMechanism.SCRAM_SHA_512,
        description="SASL mechanism when EDDY_SECURITY_PROTOCOL is SASL_*: SCRAM-SHA-512, "
        "SCRAM-SHA-256 or PLAIN.",
    )
    sasl_username: str | None = Field(
        None, min_length=1, description="SASL user name (needed with SASL_* protocols)."
    )
    sasl_password: SecretStr | None = Field(
        None,
        description="SASL password (needed with SASL_* protocols); set it from a Secret, "
        "never in a ConfigMap.",
    )
    ssl_cafile: Path | None = Field(
        None,
        description="PEM file of the CA that signed the brokers' certificates (SSL and "
        "SASL_SSL); unset = the system's trusted CAs.",
    )
    log_level: str = Field(
        "INFO", pattern=r"^(DEBUG|INFO|WARNING|ERROR)$", description="Log level."
    )

    @field_validator("pipelines", mode="before")
    @classmethod
    def _split_pipelines(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(name.strip() for name in value.split(",") if name.strip())
        return value

    @field_validator("pipelines")
    @classmethod
    def _known_pipelines(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        from agents import PIPELINES

        unknown = [name for name in value if name not in PIPELINES]
        if unknown or not value:
            raise ValueError(f"unknown pipeline {unknown}; choose from {sorted(PIPELINES)}")
        return value

    @model_validator(mode="after")
    def _sink_has_a_database(self) -> Settings:
        if "postgres_sink" in self.pipelines and self.postgres_dsn is None:
            raise ValueError(
                "EDDY_PIPELINES includes postgres_sink: set EDDY_POSTGRES_DSN "
                "(make run starts a local PostgreSQL and sets it)"
            )
        return self

    @field_validator("bootstrap_servers")
    @classmethod
    def _servers_have_ports(cls, value: str) -> str:
        for server in value.split(","):
            host, sep, port = server.strip().rpartition(":")
            if not sep or not host or not port.isdigit():
                raise ValueError(f"{server!r} is not host:port")
        return value

    @model_validator(mode="after")
    def _distinct_topics(self) -> Settings:
        names = [self.readings_topic, self.averages_topic, self.late_topic]
        names.append(self.dead_letter_topic)
        if len(set(names)) != len(names):
            raise ValueError("the readings, averages, late and dead-letter topics must differ")
        return self

    @model_validator(mode="after")
    def _sasl_has_credentials(self) -> Settings:
        # Without this a worker would start, retry the handshake for a minute and then
        # blame the network; naming the variables now says what is missing.
        if self.security_protocol.value.startswith("SASL_"):
            missing = [
                f"{ENV_PREFIX}{name.upper()}"
                for name in ("sasl_username", "sasl_password")
                if getattr(self, name) is None
            ]
            if missing:
                raise ValueError(
                    f"EDDY_SECURITY_PROTOCOL={self.security_protocol.value} needs "
                    + " and ".join(missing)
                )
        return self

    def topic(self, name: str) -> str:
        """A reference pipeline's topic, with ``EDDY_TOPIC_PREFIX``."""
        return f"{self.topic_prefix}{name}"

    def to_env(self) -> dict[str, str]:
        """These settings as the environment variables that reproduce them."""
        env = {}
        for name, value in self.model_dump(mode="json").items():
            if value is None:
                continue  # unset optional settings stay unset
            secret = getattr(self, name)
            if isinstance(secret, SecretStr):
                value = secret.get_secret_value()  # dumped as '**********'
            text = ",".join(value) if isinstance(value, list) else str(value)
            env[f"{ENV_PREFIX}{name.upper()}"] = text
        return env

    @property
    def exactly_once(self) -> bool:
        return self.processing_guarantee is Guarantee.EXACTLY_ONCE

    @property
    def uses_local_broker(self) -> bool:
        return self.bootstrap_servers.strip() in {LOCAL_BOOTSTRAP, "localhost:9092"}


def load_settings(**overrides: Any) -> Settings:
    """Build settings from the environment, with explicit overrides winning.

    Raises:
        ConfigError: naming each bad variable, so a misconfigured worker stops at
            start with a message that says what to set.
    """
    _reject_unknown_variables()
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            field = ".".join(str(part) for part in error["loc"]) or "settings"
            variable = f"{ENV_PREFIX}{field.upper()}" if error["loc"] else field
            problems.append(f"{variable}: {error['msg']}")
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(problems)) from None


def _reject_unknown_variables() -> None:
    # A misspelt variable would otherwise be ignored silently and the default used.
    known = {f"{ENV_PREFIX}{name.upper()}" for name in Settings.model_fields} | OTHER_VARIABLES
    unknown = sorted(k for k in os.environ if k.startswith(ENV_PREFIX) and k not in known)
    if unknown:
        hints = []
        for name in unknown:
            close = difflib.get_close_matches(name, sorted(known), n=1)
            hints.append(f"{name} (did you mean {close[0]}?)" if close else name)
        raise ConfigError("unknown setting: " + ", ".join(hints) + "; see the README's table")


def settings_table() -> str:
    """The README's settings table, generated from the fields so the two agree."""
    rows = ["| variable | default | what it does |", "|---|---|---|"]
    for name, info in Settings.model_fields.items():
        default: object = "hostname-pid" if info.default_factory else info.default
        if isinstance(default, StrEnum):
            default = default.value
        elif isinstance(default, tuple):
            default = ",".join(default)
        rows.append(f"| `{ENV_PREFIX}{name.upper()}` | `{default}` | {info.description} |")
    return "\n".join(rows)
