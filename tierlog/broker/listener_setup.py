"""Each listener's security from the broker's keys: its TLS context (``tls.py``, with
``listener.name.<l>.ssl.*`` over ``ssl.*``) and its authenticator (``authenticator.py``,
SASL mechanisms with SCRAM against the stored credentials). Built once at start-up;
a mistake is a ConfigError naming the key, before anything is bound."""

from __future__ import annotations

from collections.abc import Mapping

from tierlog.broker.connection_security import ListenerSecurity
from tierlog.broker.listeners import ListenerEndpoint
from tierlog.broker.scram_store import ScramCredentialCache
from tierlog.security.api import SecurityProtocol
from tierlog.security.authenticator import ListenerAuthenticator
from tierlog.security.tls import TlsSettings, server_context
from tierlog.util.clock import Clock

__all__ = ["listener_security"]


def listener_security(
    settings: Mapping[str, str],
    endpoint: ListenerEndpoint,
    clock: Clock,
    scram: ScramCredentialCache,
) -> ListenerSecurity:
    """``endpoint``'s TLS context and authenticator.

    Args:
        settings: the TLS and SASL keys as written (``BrokerConfig.security``).

    Raises:
        SecurityConfigError (a ConfigError): naming the key that is missing or wrong.
    """
    protocol = endpoint.protocol
    if protocol is SecurityProtocol.PLAINTEXT:
        return ListenerSecurity(endpoint.name, protocol)
    context = None
    if protocol.uses_tls:
        prefix = f"listener.name.{endpoint.name.lower()}."
        context = server_context(TlsSettings.from_config(settings, prefix))
    authenticator = ListenerAuthenticator.from_config(
        settings, endpoint.name, protocol, clock, scram_credentials=scram
    )
    uses_scram = any(m.startswith("SCRAM-") for m in authenticator.mechanisms)
    return ListenerSecurity(
        endpoint.name,
        protocol,
        context,
        authenticator,
        scram.refresh if uses_scram else None,
    )
