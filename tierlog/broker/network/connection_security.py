"""How a connection gets its principal before any request reaches a handler (DESIGN.md,
Security): the listener's ``Authenticator`` at once (PLAINTEXT: ``User:ANONYMOUS``; SSL:
the client certificate's DN through ``ssl.principal.mapping.rules``), or the
per-connection ``SaslSession`` (SASL_PLAINTEXT, SASL_SSL) this module drives for the
network server, frame by frame, carrying out its actions: ``Send``, ``Forward`` (to the
request path), ``Authenticated`` (the principal is set, re-authentication included,
KIP-368), ``Fail`` (one log line, ``connection.failed.authentication.delay.ms``, the
answer if any, close) and ``Close``.

Every failure is logged once, at INFO as Kafka's ``SaslServerAuthenticator`` does, naming
the client and the reason, never a password or token.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from tierlog.broker.network.connection_context import CONNECTION_PRINCIPAL
from tierlog.security.api import Authenticator, ConnectionInfo, SecurityProtocol
from tierlog.security.errors import AuthenticationError
from tierlog.security.principal import ANONYMOUS
from tierlog.security.sasl_codec import SASL_HANDSHAKE, peek_api_key
from tierlog.security.sasl_session import (
    Authenticated,
    Close,
    Fail,
    Forward,
    SaslSession,
    Send,
)
from tierlog.security.tls_rotation import ListenerTls

__all__ = ["AuthenticationClosed", "ListenerSecurity", "SaslDriver", "authenticate_connection"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ListenerSecurity:
    """One listener's security, as its ``KafkaServer`` needs it.

    Attributes:
        name: the listener's name (``listeners``), for Metadata's endpoints (KIP-103).
        protocol: its ``listener.security.protocol.map`` protocol.
        tls: the listener's TLS (SSL, SASL_SSL), else None; its context may be replaced
            while the broker runs (``tls_rotation``): read ``ssl_context`` per connection.
        authenticator: turns a connection into a principal or a SASL exchange; None:
            every connection is ``User:ANONYMOUS`` (PLAINTEXT).
        refresh_credentials: awaited before a SaslHandshake is answered, so SCRAM sees
            credentials stored since (``tierlog users``, AlterUserScramCredentials,
            ``kafka-configs``); it reads the store at most once a second.
    """

    name: str = "PLAINTEXT"
    protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT
    tls: ListenerTls | None = None
    authenticator: Authenticator | None = None
    refresh_credentials: Callable[[], Awaitable[None]] | None = None

    @property
    def ssl_context(self) -> ssl.SSLContext | None:
        """The context for the next connection (None: no TLS)."""
        return None if self.tls is None else self.tls.context


class AuthenticationClosed(Exception):
    """The connection must close now (already logged, any answer already sent)."""


def authenticate_connection(
    listener: ListenerSecurity, transport: Any, peer: str
) -> SaslSession | None:
    """Set the connection's principal (``CONNECTION_PRINCIPAL``), or return the SASL
    exchange that will.

    Raises:
        AuthenticationClosed: e.g. no ``ssl.principal.mapping.rules`` rule matches the
            client certificate (logged).
    """
    authenticator = listener.authenticator
    if authenticator is None:
        CONNECTION_PRINCIPAL.set(ANONYMOUS)
        return None
    certificate = None
    ssl_object = transport.get_extra_info("ssl_object")
    if ssl_object is not None:
        certificate = ssl_object.getpeercert(binary_form=True)
    host = peer.split(":")[0]
    try:
        started = authenticator.start(
            ConnectionInfo(listener.name, listener.protocol, host, certificate)
        )
    except AuthenticationError as exc:
        log.info("Failed authentication with %s on %s (%s)", peer, listener.name, exc)
        raise AuthenticationClosed(str(exc)) from None
    if isinstance(started, SaslSession):
        CONNECTION_PRINCIPAL.set(ANONYMOUS)
        return started
    CONNECTION_PRINCIPAL.set(started)
    return None


class SaslDriver:
    """Carries out one connection's ``SaslSession`` actions on its stream;
    ``on_authenticated(reauthenticated)`` is called at each success, ``on_expired`` when
    the connection is closed because its session ended without a re-authentication."""

    def __init__(
        self,
        session: SaslSession,
        listener: ListenerSecurity,
        peer: str,
        on_authenticated: Callable[[bool], None],
        on_expired: Callable[[], None] | None = None,
    ) -> None:
        self.session = session
        self._listener = listener
        self._peer = peer
        self._on_authenticated = on_authenticated
        self._on_expired = on_expired

    async def receive(self, frame: Any, stream: Any) -> bytes | None:
        """The frame to give the request path, or None when the session consumed it.

        Raises:
            AuthenticationClosed: the session failed or closed the connection.
        """
        data = bytes(frame)
        refresh = self._listener.refresh_credentials
        if refresh is not None and peek_api_key(data) == SASL_HANDSHAKE:
            await refresh()
        forwarded: bytes | None = None
        for action in self.session.receive(data):
            if isinstance(action, Send):
                stream.write(action.data)
            elif isinstance(action, Forward):
                forwarded = action.frame
            elif isinstance(action, Authenticated):
                CONNECTION_PRINCIPAL.set(action.principal)
                self._on_authenticated(action.reauthenticated)
                log.debug(
                    "%s %s as %s with %s on %s",
                    self._peer,
                    "re-authenticated" if action.reauthenticated else "authenticated",
                    action.principal,
                    action.mechanism,
                    self._listener.name,
                )
            elif isinstance(action, Fail):
                log.info(
                    "Failed authentication with %s on %s (%s)",
                    self._peer,
                    self._listener.name,
                    action.reason,
                )
                # Kafka's brake on password guessing: the answer (and the close) waits.
                if action.delay_ms > 0:
                    await asyncio.sleep(action.delay_ms / 1000)
                if action.response is not None:
                    stream.write(action.response)
                    await stream.drain()
                raise AuthenticationClosed(action.reason)
            elif isinstance(action, Close):
                log.info("closing connection from %s: %s", self._peer, action.reason)
                if action.session_expired and self._on_expired is not None:
                    self._on_expired()
                raise AuthenticationClosed(action.reason)
        return forwarded
