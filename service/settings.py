"""Eddy's settings: one pydantic-settings class, built by a factory.

Every setting comes from an environment variable with the ``EDDY_`` prefix
(``EDDY_BOOTSTRAP_SERVERS``, ``EDDY_PROCESSING_GUARANTEE``...). Nothing is
built at import time: tests and tools call :func:`load_settings` with
overrides, so two workers in one test never share hidden configuration.
Paths are resolved here, once: relative folders Eddy owns go under ``EDDY_HOME``
(service/paths.py), so no consumer of these settings looks at the current directory.
"""

from __future__ import annotations

import difflib
import os
import socket
import typing
from collections.abc import Iterable, Mapping
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, TypeVar

from pydantic import (
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from eddy import paths
from eddy.errors import ConfigError
from eddy.redact import redact, remember, remember_in
from eddy.redacted_settings import RedactedSettings, remember_secrets

ENV_PREFIX = "EDDY_"
# Variables with the prefix that are not Settings fields (read by tools, not workers).
OTHER_VARIABLES = {"EDDY_LOCAL_KAFKA_DIR"}
LOCAL_BOOTSTRAP = "127.0.0.1:9092"
DEFAULT_APP = "eddy.examples:app"
S = TypeVar("S", bound=BaseSettings)


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


class Settings(RedactedSettings):
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
    stop_timeout_ms: int = Field(
        25_000,
        ge=1_000,
        le=600_000,
        description="A stop (SIGTERM, Ctrl-C) commits what was processed and leaves the "
        "group; past this it exits anyway, and Kafka aborts what it did not commit (a "
        "broker or the network lost). Keep it below the pod's "
        "terminationGracePeriodSeconds (30 s unless set).",
    )
    home: Path = Field(
        Path(paths.DEFAULT_HOME),
        description="Eddy's folder: a relative EDDY_STATE_DIR, EDDY_SNAPSHOT_ROOT or "
        "EDDY_SAVEPOINT_ROOT is taken from here, and the tools keep theirs here too "
        "(kafka/, postgres/, logs/, chaos/, reports/); absolute paths and URIs stay as "
        "given. A relative EDDY_HOME is taken from the current directory at start; make "
        "sets it to the checkout's .eddy.",
    )
    state_dir: Path = Field(
        Path("state"),
        description="Local RocksDB directory (rebuilt from changelogs); relative: under EDDY_HOME.",
    )
    worker_id: str = Field(
        default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}",
        min_length=1,
        description="This worker's name in logs, client ids and API responses.",
    )
    worker_processes: int = Field(
        0,
        ge=0,
        le=256,
        description="Ingest processes `eddy worker` starts (--processes overrides): they "
        "share the partitions through the consumer groups like separate workers, behind "
        "one query process that serves the REST API on one port; 0 = one per CPU core "
        "this process may use. On Kubernetes, match it to the pod's CPU limit.",
    )
    ingest_niceness: int = Field(
        0,
        ge=0,
        le=19,
        description="How much lower than the query process's the CPU priority of "
        "`eddy worker`'s ingest processes is (the `nice` increment, 0-19). When ingest "
        "keeps every core busy, a REST query waits for the scheduler to give its "
        "process a slice; a few steps of niceness let it take one at once (queries "
        "take little CPU), at no cost to ingest on an otherwise idle machine.",
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
    dead_letter_topic: str = Field(
        "dead-letters",
        pattern=r"^[A-Za-z0-9._-]{1,200}$",
        description="Records that could not be read or processed, with the reason "
        "(EDDY_TOPIC_PREFIX goes in front).",
    )
    results_retention_ms: int = Field(
        86_400_000,
        ge=1,
        le=3_153_600_000_000,
        description="How long a queryable window result stays in state after it was last "
        "written, by the worker's clock (processing time: a record stamped days ahead "
        "deletes nothing), unless an agent says otherwise (.queryable(retention_ms=...)).",
    )
    results_per_key: int | None = Field(
        None,
        ge=1,
        description="Keep at most this many queryable window results per key, the newest "
        "windows; unset = no cap. A result goes at its retention or when newer windows "
        "push it past the cap, whichever comes first (.queryable(per_key=...)).",
    )
    window_firings_per_checkpoint: int = Field(
        10_000,
        ge=1,
        le=10_000_000,
        description="The most windows one checkpoint fires. Aligned windows of every key "
        "close at one watermark; past this many, the worker checkpoints and fires the "
        "rest before the next record, so a million keys' results, state writes and "
        "changelog records are never in memory at once. Results do not change.",
    )
    app: str = Field(
        DEFAULT_APP,
        pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$",
        description="The app to run, module:attribute (like uvicorn's); --app overrides it.",
    )
    agents: Annotated[tuple[str, ...] | None, NoDecode] = Field(
        None,
        description="Agents this worker runs, comma-separated; default: every agent the "
        "app runs by default (eddy config lists them).",
    )
    topic_prefix: str = Field(
        "",
        pattern=r"^[A-Za-z0-9._-]{0,100}$",
        description="Put in front of the name of every topic an app reads and writes "
        "(not the changelog and repartition topics, which carry EDDY_APP_ID): to run "
        "several apps, or copies of one, on one cluster.",
    )
    upstream_idle_timeout_ms: int = Field(
        10_000,
        ge=0,
        description="After a repartition (key_by), an upstream task silent this long "
        "(processing time) stops holding the clock back; 0 waits for it forever "
        "(deterministic results, as the chaos harness needs).",
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
    api_catch_up_interval_ms: int = Field(
        200,
        ge=0,
        le=60_000,
        description="`eddy worker` answers REST queries from its ingest processes' "
        "committed state through RocksDB secondary instances; each follows its store at "
        "most this often (0: at every checkpoint). A catch-up costs milliseconds of CPU, "
        "so under heavy query load this bounds that cost; an answer may then be up to "
        "this much older than the newest checkpoint, and its freshness says which one "
        "it read.",
    )
    api_scan_max_keys: int = Field(
        50_000,
        ge=1,
        description="Most state entries one REST scan examines on a worker (GET "
        "/agents/<agent>/keys, GET /agents/<agent>/windows) before it answers with what "
        "it found and next_after, where to go on from.",
    )
    api_scan_max_ms: int = Field(
        200,
        ge=1,
        le=60_000,
        description="Most milliseconds one REST scan takes on a worker, from the request "
        "to the answer: it stops examining entries in time to answer with what it found "
        "and next_after (see EDDY_API_SCAN_MAX_KEYS).",
    )
    snapshot_root: str = Field(
        "snapshots",
        min_length=1,
        description="Where state snapshots are published (Parquet + manifest): a local "
        "path (relative: under EDDY_HOME) or an S3-compatible URI such as "
        "s3://bucket/prefix (docs/snapshots.md). Keys in it (s3://KEY:SECRET@bucket/...) "
        "are masked wherever Eddy shows it.",
    )
    savepoint_root: str = Field(
        "savepoints",
        min_length=1,
        description="Where savepoints are written (never deleted automatically): a local "
        "path (relative: under EDDY_HOME) or an S3-compatible URI such as "
        "s3://bucket/prefix (docs/savepoints.md). Keys in it are masked wherever shown.",
    )
    snapshot_interval_ms: int = Field(
        0,
        ge=0,
        description="Take a snapshot at every multiple of this (wall clock, all workers "
        "alike); 0 = only on demand (python -m eddy snapshot) and at make run's exit.",
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
        "SASL_SSL); unset = the system's trusted CAs. A relative path is read from the "
        "current directory, not EDDY_HOME.",
    )
    log_level: str = Field(
        "INFO", pattern=r"^(DEBUG|INFO|WARNING|ERROR)$", description="Log level."
    )

    @field_validator("agents", mode="before")
    @classmethod
    def _split_agents(cls, value: object) -> object:
        if isinstance(value, str):
            names = tuple(name.strip() for name in value.split(",") if name.strip())
            return names or None
        return value

    @field_validator("app_id")
    @classmethod
    def _app_id_names_one_folder(cls, value: str) -> str:
        # The id names the app's folder under the snapshot and savepoint roots.
        if value in (".", ".."):
            raise ValueError(f"{value!r} names no folder of its own: choose another id")
        return value

    @field_validator("home", mode="before")
    @classmethod
    def _empty_home_is_the_default(cls, value: object) -> object:
        # EDDY_HOME= (set but empty) means what the tools take it to mean: unset.
        return paths.DEFAULT_HOME if value in ("", None) else value

    @field_validator("home")
    @classmethod
    def _home_is_absolute(cls, value: Path) -> Path:
        # Once, at load: a worker that changed directory later, and every process it
        # hands these settings to (to_env), still means the same folder.
        return paths.absolute(value)

    @field_validator("state_dir")
    @classmethod
    def _state_dir_in_home(cls, value: Path, info: ValidationInfo) -> Path:
        home = info.data.get("home")
        return value if home is None else paths.in_home(value, home)  # None: home is invalid

    @field_validator("snapshot_root", "savepoint_root")
    @classmethod
    def _root_in_home(cls, value: str, info: ValidationInfo) -> str:
        home = info.data.get("home")
        return value if home is None else paths.root_in_home(value, home)

    @field_validator("bootstrap_servers")
    @classmethod
    def _servers_have_ports(cls, value: str) -> str:
        for server in value.split(","):
            host, sep, port = server.strip().rpartition(":")
            if not sep or not host or not port.isdigit():
                raise ValueError(f"{server!r} is not host:port")
        return value

    @model_validator(mode="after")
    def _peers_use_the_token(self) -> Settings:
        # A URL's user info is sent as basic auth, in the Authorization header that
        # carries the token: peers would answer each other 401 (never shown, then).
        if self.api_token is not None and "@" in (self.api_advertised_url or ""):
            raise ValueError(
                "EDDY_API_ADVERTISED_URL has a user:password@, which would replace the "
                "EDDY_API_TOKEN workers send each other: remove it"
            )
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
        """A topic's name on the broker: ``EDDY_TOPIC_PREFIX`` + ``name``."""
        return f"{self.topic_prefix}{name}"

    @property
    def dead_letters(self) -> str:
        """The dead-letter topic's name on the broker."""
        return self.topic(self.dead_letter_topic)

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


def load_settings(extra: Iterable[type[BaseSettings]] = (), **overrides: Any) -> Settings:
    """Build the framework's settings from the environment, overrides winning.

    Args:
        extra: the app's agent settings classes: their variables are known too,
            so a misspelt one of theirs is caught like a framework one.

    Raises:
        ConfigError: naming each bad variable, so a misconfigured worker stops at
            start with a message that says what to set.
    """
    reject_unknown_variables(extra)
    remember_environment(extra)
    return build(Settings, overrides)


def build(cls: type[S], overrides: Mapping[str, Any]) -> S:
    """``cls(**overrides)`` from the environment, errors as one ConfigError; its
    secrets remembered, so that no message shows them (service/redact.py)."""
    prefix = env_prefix(cls)
    try:
        built = cls(**overrides)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            field = ".".join(str(part) for part in error["loc"]) or "settings"
            variable = f"{prefix}{field.upper()}" if error["loc"] else field
            if error["type"] == "missing":
                problems.append(f"{variable} is required: set it")
            else:  # a validator's message may quote the value: a URL with its password
                problems.append(f"{variable}: {redact(error['msg'])}")
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(problems)) from None
    remember_secrets(built)
    return built


def remember_environment(extra: Iterable[type[BaseSettings]] = ()) -> None:
    """Remember the secrets the environment holds for settings classes a process
    may build without :func:`build` (the schema registry's), or build later: each
    variable of a ``SecretStr`` field, and each password inside any ``EDDY_*`` URL."""
    from eddy.schemas.settings import RegistrySettings

    classes: list[type[BaseSettings]] = [Settings, RegistrySettings, *extra]
    secret_variables = {
        variable
        for cls in classes
        for variable, name in variables(cls).items()
        if _holds_secret(cls.model_fields[name].annotation)
    }
    for variable, value in os.environ.items():
        if variable.startswith(ENV_PREFIX):
            if variable in secret_variables:
                remember([value])
            remember_in(value)


def _holds_secret(annotation: Any) -> bool:
    return annotation is SecretStr or SecretStr in typing.get_args(annotation)


def env_prefix(cls: type[BaseSettings]) -> str:
    return str(cls.model_config.get("env_prefix") or "")


def variables(cls: type[BaseSettings]) -> dict[str, str]:
    """Each environment variable of ``cls`` -> its field name."""
    prefix = env_prefix(cls)
    return {f"{prefix}{name.upper()}": name for name in cls.model_fields}


def reject_unknown_variables(extra: Iterable[type[BaseSettings]] = ()) -> None:
    """A misspelt variable would otherwise be ignored silently and the default used."""
    from eddy.schemas.settings import RegistrySettings

    known = set(OTHER_VARIABLES) | set(variables(Settings)) | set(variables(RegistrySettings))
    for cls in extra:
        known |= set(variables(cls))
    unknown = sorted(k for k in os.environ if k.startswith(ENV_PREFIX) and k not in known)
    if unknown:
        hints = []
        for name in unknown:
            close = difflib.get_close_matches(name, sorted(known), n=1)
            hints.append(f"{name} (did you mean {close[0]}?)" if close else name)
        raise ConfigError(
            "unknown setting: " + ", ".join(hints) + "; `eddy config` lists every setting"
        )


def settings_table(classes: Iterable[type[BaseSettings]] = (Settings,)) -> str:
    """A markdown table of settings, generated from the fields so the two agree."""
    rows = ["| variable | default | what it does |", "|---|---|---|"]
    seen: set[str] = set()
    for cls in classes:
        prefix = env_prefix(cls)
        for name, info in cls.model_fields.items():
            variable = f"{prefix}{name.upper()}"
            if variable in seen:
                continue  # inherited by another class: one variable, one row
            seen.add(variable)
            rows.append(f"| `{variable}` | {_shown_default(info)} | {info.description} |")
    return "\n".join(rows)


def _shown_default(info: Any) -> str:
    if info.is_required():
        return "required"
    default: object = "hostname-pid" if info.default_factory else info.default
    if isinstance(default, StrEnum):
        default = default.value
    elif isinstance(default, tuple):
        default = ",".join(default)
    elif isinstance(default, SecretStr):
        default = "(secret)"
    return f"`{default}`"
