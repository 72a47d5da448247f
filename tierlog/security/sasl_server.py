"""What every SASL mechanism's server side looks like to the per-connection exchange.

A ``SaslServer`` is a sans-I/O state machine for one authentication: ``evaluate`` takes
the client's token and returns the challenge to send back (``b""`` for an empty one);
once ``outcome`` is set the exchange is complete. It raises ``AuthenticationError`` when
the client fails and ``IllegalSaslStateError`` when a token arrives after the end. Its
mechanisms: ``plain`` (RFC 4616), ``scram`` (RFC 5802/7677), ``oauthbearer`` (RFC 7628,
KIP-255/768).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from tierlog.security.principal import KafkaPrincipal

__all__ = ["SaslOutcome", "SaslServer"]


@dataclass(frozen=True)
class SaslOutcome:
    """A completed authentication.

    Attributes:
        principal: who authenticated (``User:<authorization id>``).
        credential_expiry_ms: when the credential stops being valid (epoch ms): an
            OAUTHBEARER token's ``exp``, a delegation token's expiry; ``None`` if never.
            Bounds the session lifetime (KIP-368).
        extensions: SASL extensions the server accepted (KIP-342), for auditing.
    """

    principal: KafkaPrincipal
    credential_expiry_ms: int | None = None
    extensions: Mapping[str, str] = field(default_factory=dict)


class SaslServer(Protocol):
    """One mechanism's server side for one authentication (see the module docstring)."""

    @property
    def mechanism(self) -> str: ...

    @property
    def outcome(self) -> SaslOutcome | None: ...

    def evaluate(self, token: bytes) -> bytes: ...
