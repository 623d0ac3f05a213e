"""Errors an operator can act on. Each docstring says what to do about it."""

from __future__ import annotations


class EddyError(Exception):
    """Base of Eddy's errors; the CLI prints these as one line, never a traceback."""


class ConfigError(EddyError):
    """A setting is missing or invalid. Fix the named ``EDDY_*`` variable and restart."""


class TopicMismatchError(ConfigError):
    """A topic exists with a layout Eddy cannot use (for example a changelog with a
    different partition count than its input). Recreate the topic or change the
    ``EDDY_*`` topic names so they point at topics with the expected layout."""


class BrokerUnavailableError(EddyError):
    """Kafka did not answer at the configured bootstrap servers. Start it (``make
    kafka-start``) or set ``EDDY_BOOTSTRAP_SERVERS`` to a reachable cluster."""


class LocalKafkaError(EddyError):
    """The local broker could not be fetched, formatted or started. The message
    names the log file under ``$EDDY_HOME/kafka`` that says why."""
