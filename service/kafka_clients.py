"""The connection part of every Kafka client Eddy creates: servers, TLS and SASL.

Workers, the simulator and the topic admin all build their aiokafka clients with
``**connection_kwargs(settings)``, so a cluster that needs SASL/SCRAM over TLS is
configured once (``EDDY_SECURITY_PROTOCOL``, ``EDDY_SASL_*``, ``EDDY_SSL_CAFILE``)
and no client is left talking plaintext by accident.
"""

from __future__ import annotations

import ssl
from typing import Any

from aiokafka.helpers import create_ssl_context

from eddy.errors import ConfigError
from eddy.settings import SecurityProtocol, Settings

# A broker that stops answering without closing its connections (hung, or behind a
# cut link) is noticed by nothing in aiokafka: its requests time out and are sent to
# it again. Its partitions get new leaders after the broker's session timeout, and a
# client learns of them only at its next metadata refresh: 5 minutes by default.
METADATA_MAX_AGE_MS = 5_000
_TLS = {SecurityProtocol.SSL, SecurityProtocol.SASL_SSL}
_SASL = {SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL}


def connection_kwargs(settings: Settings) -> dict[str, Any]:
    """Keyword arguments for ``AIOKafkaConsumer``/``AIOKafkaProducer``/``AIOKafkaAdminClient``.

    Raises:
        ConfigError: ``EDDY_SSL_CAFILE`` cannot be read as a PEM CA bundle.
    """
    protocol = settings.security_protocol
    kwargs: dict[str, Any] = {
        "bootstrap_servers": settings.bootstrap_servers,
        "security_protocol": protocol.value,
        "metadata_max_age_ms": METADATA_MAX_AGE_MS,
    }
    if protocol in _TLS:
        kwargs["ssl_context"] = tls_context(settings)
    if protocol in _SASL:
        # The model validator guarantees both are set for SASL_* protocols.
        assert settings.sasl_username is not None
        assert settings.sasl_password is not None
        kwargs["sasl_mechanism"] = settings.sasl_mechanism.value
        # aiokafka takes SCRAM credentials through its sasl_plain_* arguments too.
        kwargs["sasl_plain_username"] = settings.sasl_username
        kwargs["sasl_plain_password"] = settings.sasl_password.get_secret_value()
    return kwargs


def tls_context(settings: Settings) -> ssl.SSLContext:
    """Verifies the brokers' certificates and host names against ``EDDY_SSL_CAFILE``
    (or the system's CAs when it is unset)."""
    cafile = settings.ssl_cafile
    try:
        context: ssl.SSLContext = create_ssl_context(cafile=str(cafile) if cafile else None)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            f"EDDY_SSL_CAFILE={cafile}: cannot load it as a PEM CA certificate ({exc}); "
            "point it at the CA that signed the brokers' certificates"
        ) from None
    return context
