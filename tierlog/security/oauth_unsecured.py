"""Kafka's unsecured OAUTHBEARER tokens (JWS with ``"alg":"none"``): development only.

``OAuthBearerUnsecuredValidatorCallbackHandler``'s rules, with its JAAS options:

- the token is three base64url parts, the third (signature) empty; header ``alg`` is
  ``none``;
- the principal claim (``unsecuredValidatorPrincipalClaimName``, default ``sub``) is a
  string;
- ``exp`` is required: the token is expired once now minus the allowed skew
  (``unsecuredValidatorAllowableClockSkewMs``, default 0) is at or after it; ``iat`` is
  optional but may not lie after now plus the skew; ``exp`` must be after ``iat``;
- every scope in ``unsecuredValidatorRequiredScope`` (space separated) must be in the
  scope claim (``unsecuredValidatorScopeClaimName``, default ``scope``: a space-separated
  string or a list of strings), else ``insufficient_scope``.

Anyone can mint such a token; never enable it on a listener others can reach.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any, Final

from tierlog.security.errors import SecurityConfigError
from tierlog.security.jaas import JaasEntry
from tierlog.security.oauthbearer import OAuthToken, TokenRejected
from tierlog.util.clock import Clock

__all__ = ["UnsecuredJwsValidator", "unsecured_token"]

_PREFIX: Final = "unsecuredValidator"


def _b64url_json(part: str) -> dict[str, Any]:
    try:
        data = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
        value = json.loads(data)
    except (binascii.Error, ValueError):
        raise TokenRejected("malformed JSON") from None
    if not isinstance(value, dict):
        raise TokenRejected("malformed JSON")
    return value


def _number(claims: Mapping[str, Any], name: str) -> float | None:
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TokenRejected(f"The {name} claim had the incorrect type: {type(value).__name__}")
    return float(value)


class UnsecuredJwsValidator:
    """Validates unsecured JWS tokens (``TokenValidator``); options as in the docstring."""

    def __init__(
        self,
        clock: Clock,
        principal_claim: str = "sub",
        scope_claim: str = "scope",
        required_scope: frozenset[str] = frozenset(),
        allowable_clock_skew_ms: int = 0,
    ) -> None:
        if allowable_clock_skew_ms < 0:
            raise SecurityConfigError(
                f"{_PREFIX}AllowableClockSkewMs",
                f"Allowable clock skew millis must not be negative: {allowable_clock_skew_ms}",
            )
        self._clock = clock
        self._principal_claim = principal_claim
        self._scope_claim = scope_claim
        self._required_scope = required_scope
        self._skew_ms = allowable_clock_skew_ms

    @classmethod
    def from_jaas(cls, entry: JaasEntry, clock: Clock) -> UnsecuredJwsValidator:
        """Reads the ``unsecuredValidator*`` options of an OAuthBearerLoginModule entry."""
        skew_text = (entry.option(f"{_PREFIX}AllowableClockSkewMs") or "").strip()
        try:
            skew = int(skew_text) if skew_text else 0
        except ValueError:
            raise SecurityConfigError(
                f"{_PREFIX}AllowableClockSkewMs", f"not an integer: {skew_text!r}"
            ) from None
        return cls(
            clock,
            (entry.option(f"{_PREFIX}PrincipalClaimName") or "").strip() or "sub",
            (entry.option(f"{_PREFIX}ScopeClaimName") or "").strip() or "scope",
            frozenset((entry.option(f"{_PREFIX}RequiredScope") or "").split()),
            skew,
        )

    def validate(self, token: str) -> OAuthToken:
        parts = token.split(".")
        if len(parts) != 3:
            raise TokenRejected(
                "Unsecured JWS compact serializations must have 3 dot-separated "
                "Base64URL-encoded values"
            )
        header, claims = _b64url_json(parts[0]), _b64url_json(parts[1])
        if parts[2]:
            raise TokenRejected("Unsecured JWS must not contain a digital signature")
        if header.get("alg") != "none":
            raise TokenRejected("Unsecured JWS must have 'none' for an algorithm")
        principal = claims.get(self._principal_claim)
        if principal is None:
            raise TokenRejected(f"Required claim missing: {self._principal_claim}")
        if not isinstance(principal, str) or not principal.strip():
            raise TokenRejected(f"The {self._principal_claim} claim had the incorrect type")
        now = self._clock.milliseconds()
        issued_at = _number(claims, "iat")
        expires = _number(claims, "exp")
        if issued_at is not None and 1000 * issued_at > now + self._skew_ms:
            raise TokenRejected(
                f"The Issued At value ({issued_at} seconds) was after the indicated time "
                f"({now} ms) plus allowable clock skew ({self._skew_ms} ms)"
            )
        if expires is None:
            raise TokenRejected("Required claim missing: exp")
        if now - self._skew_ms >= 1000 * expires:
            raise TokenRejected(
                f"The indicated time ({now} ms) minus allowable clock skew ({self._skew_ms} ms) "
                f"was on or after the Expiration Time value ({expires} seconds)"
            )
        if issued_at is not None and expires <= issued_at:
            raise TokenRejected(
                f"The Expiration Time time ({expires} seconds) was not after the Issued At "
                f"time ({issued_at} seconds)"
            )
        scope = _scope(claims.get(self._scope_claim))
        missing = sorted(self._required_scope - scope)
        if missing:
            raise TokenRejected(
                f"The provided scope ({sorted(scope)}) was missing a required scope "
                f"({missing[0]}).  All required scope elements: {sorted(self._required_scope)}",
                status="insufficient_scope",
                scope=" ".join(sorted(self._required_scope)),
            )
        return OAuthToken(
            principal,
            int(1000 * expires),
            scope,
            int(1000 * issued_at) if issued_at is not None else None,
        )


def _scope(value: object) -> frozenset[str]:
    if value is None:
        return frozenset()
    if isinstance(value, str):
        return frozenset(value.split())
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return frozenset(item for item in value if item.strip())
    raise TokenRejected(f"The scope claim had the incorrect type: {type(value).__name__}")


def unsecured_token(claims: Mapping[str, Any]) -> str:
    """An unsecured JWS carrying ``claims`` (what Kafka's unsecured login module makes)."""

    def part(value: Mapping[str, Any]) -> str:
        raw = json.dumps(dict(value), separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    return f"{part({'alg': 'none'})}.{part(claims)}."
