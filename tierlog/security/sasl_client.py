"""The client side of SASL: each mechanism's messages, and the exchange as kio requests.

Sans-I/O: ``sasl_exchange`` is a generator that yields the request to send next and is
sent the broker's answer, so the blocking and the asyncio connection drive one code path::

    SaslHandshake v1 (mechanism) -> the broker's enabled mechanisms, or an error
    SaslAuthenticate v2 (token)  -> the broker's challenge ... until the mechanism is done

SaslHandshake v1 wraps every token in SaslAuthenticate (KIP-152), whose answers carry an
error code and message; v2 adds nothing the client needs beyond v1 (flexible versions).
Mechanisms (``SaslMechanismClient``): PLAIN (``\\0user\\0password``), SCRAM-SHA-256/512
(``scram_client``) and OAUTHBEARER (KIP-255's ``n,,\\x01auth=Bearer <token>\\x01\\x01``; on
an RFC 7628 error challenge the client answers ``\\x01`` and the broker then fails the
exchange with its reason, as Kafka's ``OAuthBearerSaslClient`` does).

A failed login is one ``SaslAuthenticationFailedError`` naming the mechanism, the broker
and the broker's message; it is a ``ConnectionError`` too, so callers that retry broken
connections retry it (with their backoff) without knowing SASL.
"""

from __future__ import annotations

import datetime
import random
from collections.abc import Generator
from typing import Any, Final, Protocol

from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from tierlog.security.errors import AuthenticationError, SaslAuthenticationFailedError
from tierlog.security.password import Password
from tierlog.security.scram_client import ScramSaslClient

__all__ = [
    "OAuthBearerSaslClient",
    "PlainSaslClient",
    "SaslMechanismClient",
    "ScramMechanismClient",
    "reauthentication_delay_s",
    "sasl_exchange",
]

_SEPARATOR: Final = "\x01"


class SaslMechanismClient(Protocol):
    """One login: the first token, then an answer to each challenge until done."""

    mechanism: str

    def initial(self) -> bytes: ...

    def evaluate(self, challenge: bytes) -> bytes | None:
        """The next token, or None once the login is complete.

        Raises:
            AuthenticationError: the challenge is wrong (e.g. a bad SCRAM signature).
        """
        ...


class PlainSaslClient:
    """PLAIN (RFC 4616): one message, no challenge."""

    mechanism = "PLAIN"

    def __init__(self, user: str, password: Password) -> None:
        self._user = user
        self._password = password

    def initial(self) -> bytes:
        return f"\0{self._user}\0{self._password.value}".encode()

    def evaluate(self, challenge: bytes) -> bytes | None:
        return None


class ScramMechanismClient:
    """SCRAM as a ``SaslMechanismClient``: client-first, client-final, then verify."""

    def __init__(self, scram: ScramSaslClient) -> None:
        self.mechanism = scram.mechanism.mechanism_name
        self._scram = scram
        self._sent_final = False

    def initial(self) -> bytes:
        return self._scram.first_message()

    def evaluate(self, challenge: bytes) -> bytes | None:
        if not self._sent_final:
            self._sent_final = True
            return self._scram.final_message(challenge)
        self._scram.verify(challenge)
        return None


class OAuthBearerSaslClient:
    """OAUTHBEARER (RFC 7628, KIP-255) with a token and its SASL extensions (KIP-342)."""

    mechanism = "OAUTHBEARER"

    def __init__(self, token: Password, extensions: dict[str, str] | None = None) -> None:
        self._token = token
        self._extensions = dict(extensions or {})

    def initial(self) -> bytes:
        extensions = "".join(f"{k}={v}{_SEPARATOR}" for k, v in sorted(self._extensions.items()))
        return (
            f"n,,{_SEPARATOR}auth=Bearer {self._token.value}{_SEPARATOR}{extensions}{_SEPARATOR}"
        ).encode()

    def evaluate(self, challenge: bytes) -> bytes | None:
        # A non-empty challenge is the server's JSON error: acknowledge it, and the server
        # answers SASL_AUTHENTICATION_FAILED with its reason (RFC 7628 section 3.2.3).
        return _SEPARATOR.encode() if challenge else None


def sasl_exchange(client: SaslMechanismClient, broker: str) -> Generator[Any, Any, int]:
    """Yields SaslHandshake v1 then SaslAuthenticate v2 requests; send it each answer.

    The same exchange re-authenticates an authenticated connection (KIP-368: the broker
    takes a new SaslHandshake, with the same mechanism, between requests).

    Args:
        client: the mechanism, with its credentials.
        broker: ``host:port``, for messages.

    Returns:
        (as ``StopIteration.value``) the session's lifetime in ms that the broker gave in
        its last answer (KIP-368); 0: the session does not expire.

    Raises:
        SaslAuthenticationFailedError: the broker does not enable the mechanism, refused
            the credentials, or (SCRAM) could not prove it knows them.
    """
    mechanism = client.mechanism
    handshake = yield SaslHandshakeRequest(mechanism=mechanism)
    if handshake.error_code != ErrorCode.none:
        enabled = ", ".join(handshake.mechanisms) or "none"
        raise SaslAuthenticationFailedError(
            mechanism,
            broker,
            f"{handshake.error_code.name.upper()}: the listener enables {enabled}",
        )
    token: bytes | None = client.initial()
    lifetime_ms = 0
    while token is not None:
        answer = yield SaslAuthenticateRequest(auth_bytes=token)
        if answer.error_code != ErrorCode.none:
            raise SaslAuthenticationFailedError(
                mechanism,
                broker,
                answer.error_message or answer.error_code.name.upper(),
            )
        lifetime_ms = _milliseconds(answer.session_lifetime)
        try:
            token = client.evaluate(bytes(answer.auth_bytes))
        except AuthenticationError as exc:
            raise SaslAuthenticationFailedError(mechanism, broker, str(exc)) from None
    return lifetime_ms


def _milliseconds(lifetime: datetime.timedelta | int) -> int:
    if isinstance(lifetime, datetime.timedelta):
        return max(0, round(lifetime.total_seconds() * 1000))
    return max(0, int(lifetime))


def reauthentication_delay_s(lifetime_ms: int, draw: float | None = None) -> float | None:
    """Seconds from a login until the client logs in again on the same connection, for a
    session the broker said lasts ``lifetime_ms`` (KIP-368); None when it does not expire.

    Kafka's clients pick a random point between 85% and 95% of the lifetime, so a fleet of
    connections made together does not re-authenticate together; ``draw`` in [0, 1)
    picks it (default: random)."""
    if lifetime_ms <= 0:
        return None
    fraction = 0.85 + 0.10 * (random.random() if draw is None else draw)
    return lifetime_ms * fraction / 1000
