"""The errors of ``tierlog.security``: one tree under ``SecurityError``.

What the network layer does with each (the per-connection state machine in
``tierlog.security.sasl_session`` already turns them into answers):

- ``AuthenticationError``: the client failed to authenticate. Kafka answers
  SASL_AUTHENTICATION_FAILED (58) after ``connection.failed.authentication.delay.ms`` and
  closes. ``client_message`` is what the client may see; ``str(error)`` is the reason for
  the broker's log, which may name things (a user that does not exist) the client must not
  learn. Kafka draws the same line between ``SaslAuthenticationException`` (message sent)
  and ``SaslException`` (a generic message sent).
- ``UnsupportedSaslMechanismError``: UNSUPPORTED_SASL_MECHANISM (33), then close.
- ``IllegalSaslStateError``: ILLEGAL_SASL_STATE (34), then close.
- ``SecurityConfigError``: a bad config line; a ``ConfigError`` naming the key.
- ``InvalidAclError``: a CreateAcls/DeleteAcls entry Kafka would refuse (INVALID_REQUEST).
- ``SaslAuthenticationFailedError``: the client side: a broker refused our login (or could
  not prove it knows our SCRAM credential). Also a ``ConnectionError``: the connection is
  unusable, and whoever retries broken connections retries this one with its backoff.
"""

from __future__ import annotations

from tierlog.util.configdef import ConfigError

__all__ = [
    "AuthenticationError",
    "IllegalSaslStateError",
    "InvalidAclError",
    "SaslAuthenticationFailedError",
    "SecurityConfigError",
    "SecurityError",
    "UnsupportedSaslMechanismError",
]


class SecurityError(Exception):
    """Base of the errors raised by ``tierlog.security`` (except config errors)."""


class AuthenticationError(SecurityError):
    """Authentication failed.

    Args:
        reason: for the broker's log (never contains a password or a token).
        client_message: what the client is told; ``None`` means the generic
            "invalid credentials" text, as Kafka sends for a ``SaslException``.
    """

    def __init__(self, reason: str, client_message: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.client_message = client_message


class UnsupportedSaslMechanismError(SecurityError):
    """The client asked for a mechanism the listener does not enable."""


class IllegalSaslStateError(SecurityError):
    """A request or token that the SASL exchange does not expect now."""


class InvalidAclError(SecurityError):
    """An ACL binding or filter Kafka refuses, with Kafka's reason."""


class SecurityConfigError(ConfigError):
    """A security setting that cannot be used; names the key and the reason."""


class SaslAuthenticationFailedError(SecurityError, ConnectionError):
    """A broker refused this client's SASL login; names the mechanism, the broker and the
    broker's message (which never holds the password: brokers do not echo it)."""

    def __init__(self, mechanism: str, broker: str, message: str) -> None:
        super().__init__(f"SASL {mechanism} authentication to {broker} failed: {message}")
        self.mechanism = mechanism
        self.broker = broker
        self.broker_message = message
