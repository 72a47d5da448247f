"""The SASL exchange of one connection, as a sans-I/O state machine the network layer drives.

Bytes in, actions out: the network layer feeds each complete frame (size prefix removed)
to ``receive`` and carries out what comes back, in order: ``Send`` bytes, ``Forward`` the
frame to the usual request path, ``Authenticated`` (the connection now has a principal),
``Fail`` (wait ``delay_ms`` -- ``connection.failed.authentication.delay.ms``, Kafka's brake
on password guessing -- then send ``response`` if any, then close), ``Close`` at once.
The state machine never sleeps, reads clocks only through the injected ``Clock``, and
never touches a socket. Kafka's ``SaslServerAuthenticator`` is the model::

    HANDSHAKE_OR_VERSIONS --ApiVersions--> HANDSHAKE --SaslHandshake(mech)--> AUTHENTICATE
          |                                                 ^     |   v0: raw tokens
          +------------------SaslHandshake(mech)------------+     |   v1: SaslAuthenticate
                                                                  v
    FAILED <--- bad mechanism, bad token, wrong request --- (mechanism done) ---> COMPLETE
                                                                                    |
    REAUTH_AUTHENTICATE <--SaslHandshake, same mechanism (KIP-368)------------------+

Rules, each Kafka's:

- Before authentication only ApiVersions (once, first), SaslHandshake and SaslAuthenticate
  are allowed; anything else fails the connection (ILLEGAL_SASL_STATE, closed).
- SaslHandshake v0 means the client's next frames are raw SASL tokens and our answers
  raw length-prefixed tokens; v1 means SaslAuthenticate requests carry them.
- An unknown mechanism gets UNSUPPORTED_SASL_MECHANISM (33) with the enabled list; a
  failed authentication SASL_AUTHENTICATION_FAILED (58) with the mechanism's message for
  the client (KIP-152); a SaslAuthenticate where none is expected ILLEGAL_SASL_STATE (34).
- ``session_lifetime_ms`` (SaslAuthenticate v1+) is the shorter of
  ``connections.max.reauth.ms`` (per mechanism) and the credential's remaining life (an
  OAUTHBEARER token's ``exp``); 0 means no limit. After it has passed, any request but
  SaslHandshake closes the connection; a client that spoke SaslAuthenticate v1+ may
  re-authenticate with the same mechanism, as the same principal (KIP-368).
- A frame over ``sasl.server.max.receive.size`` (Kafka's default 512 KiB) before
  authentication fails the connection: an unauthenticated peer may not make the broker
  buffer a full ``socket.request.max.bytes``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Final

from kio.schema.errors import ErrorCode

from tierlog.protocol import ProtocolError, Request, frame
from tierlog.security.errors import AuthenticationError, IllegalSaslStateError
from tierlog.security.principal import KafkaPrincipal
from tierlog.security.sasl_codec import (
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    authenticate_response,
    decode_sasl_request,
    handshake_response,
    peek_api_key,
)
from tierlog.security.sasl_server import SaslOutcome, SaslServer
from tierlog.util.clock import Clock

__all__ = [
    "DEFAULT_FAILED_AUTHENTICATION_DELAY_MS",
    "DEFAULT_MAX_RECEIVE_BYTES",
    "Action",
    "Authenticated",
    "Close",
    "Fail",
    "Forward",
    "SaslSession",
    "SaslState",
    "Send",
]

API_VERSIONS: Final = 18
# Kafka's defaults: connection.failed.authentication.delay.ms and sasl.server.max.receive.size.
DEFAULT_FAILED_AUTHENTICATION_DELAY_MS: Final = 100
DEFAULT_MAX_RECEIVE_BYTES: Final = 524_288


@dataclass(frozen=True)
class Send:
    data: bytes


@dataclass(frozen=True)
class Forward:
    """Give ``frame`` to the normal request path (the connection's principal applies)."""

    frame: bytes


@dataclass(frozen=True)
class Authenticated:
    principal: KafkaPrincipal
    mechanism: str
    session_lifetime_ms: int
    reauthenticated: bool


@dataclass(frozen=True)
class Fail:
    """Authentication failed: wait ``delay_ms``, send ``response`` if any, then close.
    ``reason`` is for the broker's log (one line per failure)."""

    reason: str
    delay_ms: int
    response: bytes | None = None


@dataclass(frozen=True)
class Close:
    reason: str
    session_expired: bool = False  # KIP-368: counted as Kafka's expired-connections-killed


Action = Send | Forward | Authenticated | Fail | Close


class SaslState(Enum):
    HANDSHAKE_OR_VERSIONS = "HANDSHAKE_OR_VERSIONS"
    HANDSHAKE = "HANDSHAKE"
    AUTHENTICATE = "AUTHENTICATE"
    COMPLETE = "COMPLETE"
    REAUTH_AUTHENTICATE = "REAUTH_AUTHENTICATE"
    FAILED = "FAILED"


class SaslSession:
    """One connection's SASL exchange (see the module docstring).

    Args:
        mechanisms: enabled mechanism name -> a factory of its ``SaslServer``, in the
            order SaslHandshake lists them.
        clock: for session lifetimes.
        max_reauth_ms: ``connections.max.reauth.ms`` per mechanism (0 or absent: none).
        failed_authentication_delay_ms: ``connection.failed.authentication.delay.ms``.
        max_receive_bytes: ``sasl.server.max.receive.size``.
    """

    def __init__(
        self,
        mechanisms: Mapping[str, Callable[[], SaslServer]],
        clock: Clock,
        max_reauth_ms: Mapping[str, int] | None = None,
        failed_authentication_delay_ms: int = DEFAULT_FAILED_AUTHENTICATION_DELAY_MS,
        max_receive_bytes: int = DEFAULT_MAX_RECEIVE_BYTES,
    ) -> None:
        if not mechanisms:
            raise ValueError("No SASL mechanisms are enabled")
        self._factories = dict(mechanisms)
        self._clock = clock
        self._max_reauth_ms = dict(max_reauth_ms or {})
        self._delay_ms = failed_authentication_delay_ms
        self.max_receive_bytes = max_receive_bytes
        self.state = SaslState.HANDSHAKE_OR_VERSIONS
        self.principal: KafkaPrincipal | None = None
        self.mechanism: str | None = None
        self.session_expiry_ms: int | None = None
        self._server: SaslServer | None = None
        self._authenticate_headers = False  # SaslHandshake v1: tokens in SaslAuthenticate
        self._client_supports_reauth = False

    @property
    def authenticated(self) -> bool:
        return self.state is SaslState.COMPLETE

    def receive(self, data: bytes) -> list[Action]:
        """The actions for one received frame (its size prefix removed)."""
        if self.state is SaslState.FAILED:
            return [Close("frame after a failed authentication")]
        if self.state is SaslState.COMPLETE:
            return self._after_authentication(data)
        if len(data) > self.max_receive_bytes:
            return self._fail(
                f"Failing SASL authentication due to invalid receive size ({len(data)} bytes)"
            )
        if self.state is SaslState.AUTHENTICATE and not self._authenticate_headers:
            return self._raw_token(data)
        api_key = peek_api_key(data)
        if self.state in (SaslState.AUTHENTICATE, SaslState.REAUTH_AUTHENTICATE):
            if api_key != SASL_AUTHENTICATE:
                return self._fail(
                    f"Unexpected Kafka request of type {api_key} during SASL authentication."
                )
            return self._authenticate(data)
        if api_key == API_VERSIONS and self.state is SaslState.HANDSHAKE_OR_VERSIONS:
            self.state = SaslState.HANDSHAKE
            return [Forward(data)]
        if api_key == SASL_HANDSHAKE:
            return self._handshake(data, reauth=False)
        return self._fail(f"Unexpected Kafka request of type {api_key} during SASL handshake.")

    # --- handshake -----------------------------------------------------------------------

    def _decode(self, data: bytes) -> Request | list[Action]:
        try:
            return decode_sasl_request(data)
        except ProtocolError as exc:
            return self._fail(f"invalid SASL request: {exc}")

    def _handshake(self, data: bytes, reauth: bool) -> list[Action]:
        request = self._decode(data)
        if isinstance(request, list):
            return request
        requested = str(getattr(request.body, "mechanism", ""))
        enabled = tuple(self._factories)
        if requested not in self._factories:
            return self._fail(
                f"Unsupported SASL mechanism {requested}",
                handshake_response(request, ErrorCode.unsupported_sasl_mechanism, enabled),
            )
        if reauth and requested != self.mechanism:
            # Kafka answers the handshake, then fails the first token (REAUTH_BAD_MECHANISM).
            return self._fail(
                f"SASL mechanism '{requested}' requested by client is not supported for "
                f"re-authentication of mechanism '{self.mechanism}'",
                handshake_response(request, ErrorCode.unsupported_sasl_mechanism, enabled),
            )
        self._authenticate_headers = request.api_version >= 1
        self._server = self._factories[requested]()
        self.mechanism = requested
        self.state = SaslState.REAUTH_AUTHENTICATE if reauth else SaslState.AUTHENTICATE
        return [Send(handshake_response(request, ErrorCode.none, enabled))]

    # --- tokens --------------------------------------------------------------------------

    def _raw_token(self, data: bytes) -> list[Action]:
        server = self._server
        assert server is not None
        try:
            challenge = server.evaluate(data)
        except (AuthenticationError, IllegalSaslStateError) as exc:
            return self._fail(str(exc))  # v0 has no error response: just close
        # Kafka answers every raw token with a size-prefixed one, even an empty one.
        actions: list[Action] = [Send(frame(challenge))]
        outcome = server.outcome
        if outcome is not None:
            actions.extend(self._complete(outcome, reauth=False))
        return actions

    def _authenticate(self, data: bytes) -> list[Action]:
        request = self._decode(data)
        if isinstance(request, list):
            return request
        server = self._server
        assert server is not None
        reauth = self.state is SaslState.REAUTH_AUTHENTICATE
        self._client_supports_reauth |= request.api_version > 0
        token = bytes(getattr(request.body, "auth_bytes", b""))
        try:
            challenge = server.evaluate(token)
            outcome = server.outcome
            if outcome is not None and reauth and outcome.principal != self.principal:
                message = (
                    f"Cannot change principals during re-authentication from "
                    f"{self.principal}: {outcome.principal}"
                )
                raise AuthenticationError(message, message)
        except AuthenticationError as exc:
            what = "re-authentication" if reauth else "authentication"
            text = exc.client_message or (
                f"Authentication failed during {what} due to invalid credentials with SASL "
                f"mechanism {self.mechanism}"
            )
            return self._fail(
                exc.reason,
                authenticate_response(
                    request, ErrorCode.sasl_authentication_failed, error_message=text
                ),
            )
        except IllegalSaslStateError as exc:
            return self._fail(
                str(exc),
                authenticate_response(
                    request, ErrorCode.illegal_sasl_state, error_message=str(exc)
                ),
            )
        if outcome is None:
            return [Send(authenticate_response(request, ErrorCode.none, challenge))]
        completion = self._complete(outcome, reauth)
        assert isinstance(completion[0], Authenticated)
        lifetime = completion[0].session_lifetime_ms
        return [
            Send(
                authenticate_response(
                    request, ErrorCode.none, challenge, session_lifetime_ms=lifetime
                )
            ),
            *completion,
        ]

    def _complete(self, outcome: SaslOutcome, reauth: bool) -> list[Action]:
        assert self.mechanism is not None
        now = self._clock.milliseconds()
        max_reauth = self._max_reauth_ms.get(self.mechanism, 0)
        lifetime = 0
        if outcome.credential_expiry_ms is not None or max_reauth > 0:
            remaining = (
                None if outcome.credential_expiry_ms is None else outcome.credential_expiry_ms - now
            )
            if remaining is None:
                lifetime = max_reauth
            elif max_reauth <= 0:
                lifetime = max(0, remaining)
            else:
                lifetime = max(0, min(remaining, max_reauth))
            self.session_expiry_ms = now + lifetime
        else:
            self.session_expiry_ms = None
        self.principal = outcome.principal
        self.state = SaslState.COMPLETE
        self._server = None
        return [Authenticated(outcome.principal, self.mechanism, lifetime, reauth)]

    # --- after authentication ------------------------------------------------------------

    def _after_authentication(self, data: bytes) -> list[Action]:
        api_key = peek_api_key(data)
        if api_key == SASL_HANDSHAKE:
            if self._client_supports_reauth:
                return self._handshake(data, reauth=True)
            request = self._decode(data)
            if isinstance(request, list):
                return request
            # Kafka's KafkaApis: a handshake on an authenticated connection that cannot
            # re-authenticate is answered ILLEGAL_SASL_STATE, and the connection stays.
            return [Send(handshake_response(request, ErrorCode.illegal_sasl_state, ()))]
        if (
            self.session_expiry_ms is not None
            and self._clock.milliseconds() > self.session_expiry_ms
        ):
            return [
                Close(
                    f"session of {self.principal} expired (KIP-368): re-authentication was due",
                    session_expired=True,
                )
            ]
        if api_key == SASL_AUTHENTICATE:
            request = self._decode(data)
            if isinstance(request, list):
                return request
            message = "SaslAuthenticate request received after successful authentication"
            return [
                Send(
                    authenticate_response(
                        request, ErrorCode.illegal_sasl_state, error_message=message
                    )
                )
            ]
        return [Forward(data)]

    def _fail(self, reason: str, response: bytes | None = None) -> list[Action]:
        self.state = SaslState.FAILED
        self._server = None
        return [Fail(reason, self._delay_ms, response)]
