"""KIP-768: OAUTHBEARER tokens validated as JWTs signed by keys from a JWKS.

Kafka's ``OAuthBearerValidatorCallbackHandler`` (broker side), with its keys:

- ``sasl.oauthbearer.jwks.endpoint.url``: where the JWKS comes from (``file:`` or
  ``http(s):``); refreshed every ``sasl.oauthbearer.jwks.endpoint.refresh.ms`` (default one
  hour), and at once (at most once a ``...retry.backoff.ms``) when a token names a key id
  the set does not have: the provider rotated its keys (``JwksKeys``).
- ``sasl.oauthbearer.expected.audience`` (a list; the token's ``aud`` must hold one) and
  ``sasl.oauthbearer.expected.issuer`` (``iss`` must equal it); unchecked when unset.
- ``sasl.oauthbearer.sub.claim.name`` (default ``sub``): the principal's name;
  ``sasl.oauthbearer.scope.claim.name`` (default ``scope``): a string (one scope, as
  Kafka reads it) or a list of strings.
- ``sasl.oauthbearer.clock.skew.seconds`` (default 30): slack for ``exp`` and ``nbf``.
- ``exp`` and ``iat`` are required (jose4j's ``setRequireExpirationTime`` and
  ``setRequireIssuedAt``); ``alg: none`` and HMAC algorithms are refused: only the
  asymmetric algorithms of the key's type verify (a JWKS holds public keys).

Signature, audience and issuer are checked by PyJWT; time is checked here against the
injected clock, so tests control it. Each refusal says why (expired, not yet valid, bad
signature, wrong audience...), in the broker's log and in the answer to the client.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import jwt
from jwt import PyJWK, PyJWKSet

from tierlog.security.oauthbearer import OAuthToken, TokenRejected
from tierlog.util.clock import Clock

__all__ = ["JwksKeys", "JwtValidator", "JwtValidatorConfig"]

# Asymmetric JWS algorithms per JWK key type (RFC 7518); never "none" or HS*.
_ALGORITHMS: Final[dict[str, tuple[str, ...]]] = {
    "RSA": ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512"),
    "EC": ("ES256", "ES384", "ES512"),
    "OKP": ("EdDSA",),
}
DEFAULT_REFRESH_MS: Final = 3_600_000
DEFAULT_RETRY_BACKOFF_MS: Final = 100


class JwksKeys:
    """A JWKS kept fresh: loaded through ``fetch`` (bytes of the JWKS JSON), refreshed on
    a period and when an unknown key id shows up.

    ``fetch`` does the I/O (``tierlog.security.jwks_fetch``); call ``key`` off the event
    loop, since a refresh blocks on it. A failed refresh keeps the keys it had.
    """

    def __init__(
        self,
        fetch: Callable[[], bytes],
        clock: Clock,
        refresh_ms: int = DEFAULT_REFRESH_MS,
        missing_key_backoff_ms: int = DEFAULT_RETRY_BACKOFF_MS,
    ) -> None:
        self._fetch = fetch
        self._clock = clock
        self._refresh_ms = refresh_ms
        self._backoff_ms = missing_key_backoff_ms
        self._keys: list[PyJWK] = []
        self._loaded_at: int | None = None
        self._last_attempt: int | None = None
        self.refreshes = 0

    def _refresh(self) -> None:
        now = self._clock.monotonic_ms()
        self._last_attempt = now
        try:
            document = json.loads(self._fetch())
            keys = PyJWKSet.from_dict(document).keys
        except (OSError, ValueError, jwt.PyJWTError) as exc:
            if not self._keys:
                raise TokenRejected(f"Could not load the JWKS: {exc}") from None
            return  # keep the keys we had; try again after the backoff
        self._keys = [key for key in keys if key.public_key_use in (None, "sig")]
        self._loaded_at = now
        self.refreshes += 1

    def _due(self) -> bool:
        now = self._clock.monotonic_ms()
        return self._loaded_at is None or now - self._loaded_at >= self._refresh_ms

    def _may_retry(self) -> bool:
        now = self._clock.monotonic_ms()
        return self._last_attempt is None or now - self._last_attempt >= self._backoff_ms

    def candidates(self, kid: str | None) -> list[PyJWK]:
        """The keys that may have signed a token naming ``kid`` (all keys if it names none).

        Raises:
            TokenRejected: the JWKS cannot be loaded, or has no key ``kid`` even after a
                refresh.
        """
        if self._due() and self._may_retry():
            self._refresh()
        found = self._select(kid)
        if not found and self._may_retry():
            self._refresh()  # the provider may have rotated its keys
            found = self._select(kid)
        if not found:
            raise TokenRejected(f"No key in the JWKS matches the token's key id {kid!r}")
        return found

    def _select(self, kid: str | None) -> list[PyJWK]:
        return [key for key in self._keys if kid is None or key.key_id == kid]


@dataclass(frozen=True)
class JwtValidatorConfig:
    """The ``sasl.oauthbearer.*`` settings of the module docstring."""

    expected_audience: Sequence[str] = ()
    expected_issuer: str | None = None
    sub_claim_name: str = "sub"
    scope_claim_name: str = "scope"
    clock_skew_seconds: int = 30


class JwtValidator:
    """Validates signed JWTs against ``JwksKeys`` (``TokenValidator``)."""

    def __init__(self, keys: JwksKeys, clock: Clock, config: JwtValidatorConfig) -> None:
        self._keys = keys
        self._clock = clock
        self._config = config

    def validate(self, token: str) -> OAuthToken:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise TokenRejected(f"Could not validate the access token: {exc}") from None
        algorithm = header.get("alg")
        if (
            not isinstance(algorithm, str)
            or algorithm in ("none", "")
            or algorithm.startswith("HS")
        ):
            raise TokenRejected(
                f"Could not validate the access token: algorithm {algorithm!r} refused"
            )
        kid = header.get("kid")
        claims = self._verified_claims(token, algorithm, kid if isinstance(kid, str) else None)
        return self._check_claims(claims)

    def _verified_claims(self, token: str, algorithm: str, kid: str | None) -> dict[str, Any]:
        config = self._config
        last_error: Exception | None = None
        for key in self._keys.candidates(kid):
            if algorithm not in _ALGORITHMS.get(key.key_type or "", ()):
                continue
            try:
                return jwt.decode(
                    token,
                    key.key,
                    algorithms=[algorithm],
                    audience=list(config.expected_audience) or None,
                    issuer=config.expected_issuer,
                    options={
                        "verify_aud": bool(config.expected_audience),
                        "verify_exp": False,  # checked below, against the injected clock
                        "verify_nbf": False,
                        "verify_iat": False,
                        "require": ["exp", "iat"],
                    },
                )
            except jwt.InvalidSignatureError as exc:
                last_error = exc  # another key with the same id may verify it
            except jwt.PyJWTError as exc:
                raise TokenRejected(f"Could not validate the access token: {exc}") from None
        reason = (
            f"signature verification failed ({last_error})"
            if last_error
            else (f"no key of the JWKS fits algorithm {algorithm}")
        )
        raise TokenRejected(f"Could not validate the access token: {reason}")

    def _check_claims(self, claims: dict[str, Any]) -> OAuthToken:
        config = self._config
        now_ms = self._clock.milliseconds()
        skew_ms = config.clock_skew_seconds * 1000
        expires, issued_at, not_before = (claims.get(name) for name in ("exp", "iat", "nbf"))
        for name, value in (("exp", expires), ("iat", issued_at), ("nbf", not_before)):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int | float)
            ):
                raise TokenRejected(f"Could not extract the '{name}' claim from the access token")
        assert expires is not None and issued_at is not None  # PyJWT's "require"
        if now_ms - skew_ms >= expires * 1000:
            raise TokenRejected(
                f"The token is expired: its exp ({expires}) is before the time now "
                f"({now_ms} ms) less the allowed clock skew ({config.clock_skew_seconds} s)"
            )
        if not_before is not None and now_ms + skew_ms < not_before * 1000:
            raise TokenRejected(
                f"The token is not yet valid: its nbf ({not_before}) is after the time now "
                f"({now_ms} ms) plus the allowed clock skew ({config.clock_skew_seconds} s)"
            )
        subject = claims.get(config.sub_claim_name)
        if not isinstance(subject, str) or not subject.strip():
            raise TokenRejected(
                f"The token has no {config.sub_claim_name!r} claim naming the principal"
            )
        raw_scope = claims.get(config.scope_claim_name)
        if isinstance(raw_scope, str):
            scopes = [raw_scope]
        elif isinstance(raw_scope, list):
            scopes = raw_scope
        else:
            scopes = []
        if not all(isinstance(s, str) and s.strip() for s in scopes):
            raise TokenRejected(f"The {config.scope_claim_name!r} claim has an empty value")
        return OAuthToken(
            subject.strip(),
            int(expires * 1000),
            frozenset(s.strip() for s in scopes),
            int(issued_at * 1000),
        )
