"""SASL/OAUTHBEARER server (RFC 7628) with Kafka's client message (KIP-255) and extensions.

The client's one message::

    n,[a=<authzid>],\\x01auth=Bearer <token>\\x01[<key>=<value>\\x01]*\\x01

The token goes to a ``TokenValidator`` (``oauth_unsecured`` for Kafka's development
tokens, ``oauth_jwt`` for KIP-768 JWTs signed by keys in a JWKS). On success the server
answers an empty challenge and the principal is ``User:<the token's subject>``; the token's
``exp`` bounds the session (KIP-368). On failure RFC 7628 section 3.2.2 applies: the server
sends a JSON error (``{"status":"invalid_token"}``) as a challenge, the client answers with
a single ``\\x01``, and only then does the exchange fail, with the reason as the message the
client sees (Kafka's ``OAuthBearerSaslServer`` does exactly this).

Extensions (KIP-342) must have names of letters and values of printable characters;
``auth`` is reserved. The validators here accept every well-formed extension, as Kafka's
own callback handlers do, and pass them on in ``SaslOutcome.extensions``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Protocol

from tierlog.security.errors import AuthenticationError, IllegalSaslStateError
from tierlog.security.principal import KafkaPrincipal
from tierlog.security.sasl_server import SaslOutcome

__all__ = [
    "OAUTHBEARER",
    "ClientInitialResponse",
    "OAuthBearerSaslServer",
    "OAuthToken",
    "TokenRejected",
    "TokenValidator",
    "parse_client_initial_response",
]

OAUTHBEARER: Final = "OAUTHBEARER"

# Kafka's OAUTHBEARER server callback handlers, the only values of a listener's
# ``sasl.server.callback.handler.class`` tierlog takes (it loads no Java plugins). A Kafka
# operator's OIDC set-up names the JWT validator; its Kafka 3.1-3.x name is accepted too.
_KAFKA_OAUTH: Final = "org.apache.kafka.common.security.oauthbearer."
JWT_VALIDATOR_CLASSES: Final = frozenset(
    {
        _KAFKA_OAUTH + "OAuthBearerValidatorCallbackHandler",
        _KAFKA_OAUTH + "secured.OAuthBearerValidatorCallbackHandler",
    }
)
UNSECURED_VALIDATOR_CLASS: Final = (
    _KAFKA_OAUTH + "internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler"
)
_SEPARATOR: Final = "\x01"
_SASLNAME: Final = r"(?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+"
_KEY: Final = r"[A-Za-z]+"
_VALUE: Final = r"[\x21-\x7E \t\r\n]+"
_KVPAIRS: Final = rf"(?:{_KEY}={_VALUE}{_SEPARATOR})*"
_MESSAGE: Final = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,{_SEPARATOR}(?P<kvpairs>{_KVPAIRS}){_SEPARATOR}"
)
_AUTH: Final = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)", re.ASCII)
_EXTENSION_KEY: Final = re.compile(_KEY)
_EXTENSION_VALUE: Final = re.compile(_VALUE)


@dataclass(frozen=True)
class ClientInitialResponse:
    """A parsed client message. ``repr`` hides the token."""

    token: str
    authorization_id: str = ""
    extensions: Mapping[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:
        return (
            f"ClientInitialResponse(token=[hidden], authorization_id={self.authorization_id!r}, "
            f"extensions={dict(self.extensions)!r})"
        )


def parse_client_initial_response(message: bytes) -> ClientInitialResponse:
    """Raises ``AuthenticationError`` unless ``message`` is a KIP-255 client message."""
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError:
        raise AuthenticationError("Invalid OAUTHBEARER client first message") from None
    match = _MESSAGE.fullmatch(text)
    if match is None:
        raise AuthenticationError("Invalid OAUTHBEARER client first message")
    pairs: dict[str, str] = {}
    for pair in filter(None, match.group("kvpairs").split(_SEPARATOR)):
        key, _, value = pair.partition("=")
        pairs[key] = value
    auth = pairs.pop("auth", None)
    if auth is None:
        raise AuthenticationError("Invalid OAUTHBEARER client first message: 'auth' not specified")
    for key, value in pairs.items():
        if not _EXTENSION_KEY.fullmatch(key) or not _EXTENSION_VALUE.fullmatch(value):
            raise AuthenticationError(f"Invalid OAUTHBEARER extension {key!r}")
    auth_match = _AUTH.fullmatch(auth)
    if auth_match is None:
        raise AuthenticationError("Invalid OAUTHBEARER client first message: invalid 'auth' format")
    if auth_match.group("scheme").lower() != "bearer":
        raise AuthenticationError(
            f"Invalid scheme in OAUTHBEARER client first message: {auth_match.group('scheme')}"
        )
    return ClientInitialResponse(auth_match.group("token"), match.group("authzid") or "", pairs)


@dataclass(frozen=True)
class OAuthToken:
    """A validated token: its principal name, scope, lifetime (epoch ms) and start."""

    principal_name: str
    lifetime_ms: int
    scope: frozenset[str] = frozenset()
    start_time_ms: int | None = None


class TokenRejected(Exception):
    """A token failed validation; ``reason`` says why, ``status``/``scope`` go into the
    RFC 7628 error JSON (``invalid_token``, or ``insufficient_scope`` with the scope)."""

    def __init__(
        self, reason: str, status: str = "invalid_token", scope: str | None = None
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status
        self.scope = scope


class TokenValidator(Protocol):
    """Checks one bearer token; raises ``TokenRejected``."""

    def validate(self, token: str) -> OAuthToken: ...


class OAuthBearerSaslServer:
    """One OAUTHBEARER authentication (``SaslServer``); see the module docstring."""

    mechanism = OAUTHBEARER

    def __init__(self, validator: TokenValidator) -> None:
        self._validator = validator
        self._outcome: SaslOutcome | None = None
        self._error: str | None = None

    @property
    def outcome(self) -> SaslOutcome | None:
        return self._outcome

    def evaluate(self, token: bytes) -> bytes:
        if self._outcome is not None:
            raise IllegalSaslStateError("OAUTHBEARER exchange already finished")
        if self._error is not None:
            # RFC 7628: after our error challenge the client must send a lone %x01.
            reason, self._error = self._error, None
            if token == _SEPARATOR.encode():
                raise AuthenticationError(reason, reason)
            raise AuthenticationError(f"{reason} (and no %x01 after the error challenge)", reason)
        response = parse_client_initial_response(token)
        try:
            validated = self._validator.validate(response.token)
        except TokenRejected as rejected:
            self._error = f"Authentication failed: {rejected.reason}"
            body: dict[str, str] = {"status": rejected.status}
            if rejected.scope is not None:
                body["scope"] = rejected.scope
            return json.dumps(body, separators=(",", ":")).encode()
        if response.authorization_id and response.authorization_id != validated.principal_name:
            message = (
                f"Authentication failed: Client requested an authorization id "
                f"({response.authorization_id}) that is different from the token's principal "
                f"name ({validated.principal_name})"
            )
            raise AuthenticationError(message, message)
        self._outcome = SaslOutcome(
            KafkaPrincipal.user(validated.principal_name),
            validated.lifetime_ms,
            dict(response.extensions),
        )
        return b""
