from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from tierlog.security.jwks_fetch import fetcher
from tierlog.security.oauth_jwt import JwksKeys, JwtValidator, JwtValidatorConfig
from tierlog.security.oauthbearer import OAuthBearerSaslServer, TokenRejected
from tierlog.security.principal import KafkaPrincipal
from tierlog.util.clock import ManualClock

NOW_S = 1_700_000_000
ISSUER = "https://idp.example"


def _jwk(key: Any, kid: str) -> dict[str, Any]:
    algorithm = RSAAlgorithm if isinstance(key, rsa.RSAPrivateKey) else ECAlgorithm
    data = json.loads(algorithm.to_jwk(key.public_key()))
    data["kid"] = kid
    return data


class _Idp:
    """Signs tokens; publishes its public keys as a JWKS file (a real file read through
    ``jwks_fetch``) and counts how often the broker read it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.keys: dict[str, Any] = {
            "rsa-1": rsa.generate_private_key(public_exponent=65537, key_size=2048)
        }
        self.reads = 0
        self.publish()

    def publish(self) -> None:
        self.path.write_text(json.dumps({"keys": [_jwk(k, kid) for kid, k in self.keys.items()]}))

    def fetch(self) -> bytes:
        self.reads += 1
        return fetcher(self.path.as_uri())()

    def token(self, kid: str = "rsa-1", algorithm: str = "RS256", **claims: Any) -> str:
        body = {
            "sub": "alice",
            "iss": ISSUER,
            "aud": "kafka",
            "iat": NOW_S,
            "exp": NOW_S + 600,
            **claims,
        }
        return jwt.encode(
            {k: v for k, v in body.items() if v is not None},
            self.keys[kid],
            algorithm,
            headers={"kid": kid},
        )


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW_S * 1000)


@pytest.fixture
def idp(tmp_path: Path) -> _Idp:
    return _Idp(tmp_path / "jwks.json")


def _validator(idp: _Idp, clock: ManualClock, **config: Any) -> JwtValidator:
    settings = {"expected_audience": ("kafka",), "expected_issuer": ISSUER, **config}
    return JwtValidator(
        JwksKeys(idp.fetch, clock, refresh_ms=60_000, missing_key_backoff_ms=100),
        clock,
        JwtValidatorConfig(**settings),
    )


def test_a_valid_token_names_the_principal_and_its_lifetime(idp: _Idp, clock: ManualClock) -> None:
    server = OAuthBearerSaslServer(_validator(idp, clock))
    assert (
        server.evaluate(f"n,,\x01auth=Bearer {idp.token(scope=['read', 'write'])}\x01\x01".encode())
        == b""
    )
    assert server.outcome is not None
    assert server.outcome.principal == KafkaPrincipal.user("alice")
    assert server.outcome.credential_expiry_ms == (NOW_S + 600) * 1000


@pytest.mark.parametrize(
    ("claims", "reason"),
    [
        ({"exp": NOW_S - 31}, "expired"),
        ({"nbf": NOW_S + 31}, "not yet valid"),
        ({"aud": "other"}, "Audience"),
        ({"iss": "https://evil.example"}, "issuer"),
        ({"iat": None}, "iat"),
        ({"exp": None}, "exp"),
        ({"sub": None}, "'sub' claim"),
    ],
)
def test_refusals_say_why(
    idp: _Idp, clock: ManualClock, claims: dict[str, Any], reason: str
) -> None:
    with pytest.raises(TokenRejected, match=f"(?i){reason}"):
        _validator(idp, clock).validate(idp.token(**claims))


def test_clock_skew_tolerates_a_little(idp: _Idp, clock: ManualClock) -> None:
    assert _validator(idp, clock).validate(idp.token(exp=NOW_S - 29)).principal_name == "alice"


def test_a_token_signed_by_another_key_is_refused(idp: _Idp, clock: ManualClock) -> None:
    forger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    forged = jwt.encode(
        {"sub": "admin", "aud": "kafka", "iss": ISSUER, "iat": NOW_S, "exp": NOW_S + 60},
        forger,
        "RS256",
        headers={"kid": "rsa-1"},
    )
    with pytest.raises(TokenRejected, match="signature"):
        _validator(idp, clock).validate(forged)


def test_alg_none_and_hmac_are_refused(idp: _Idp, clock: ManualClock) -> None:
    validator = _validator(idp, clock)
    unsigned = jwt.encode({"sub": "admin", "exp": NOW_S + 60, "iat": NOW_S}, None, "none")
    with pytest.raises(TokenRejected, match="refused"):
        validator.validate(unsigned)
    # An HMAC token (the classic confusion attack signs with something public).
    hmac_token = jwt.encode(
        {"sub": "admin", "exp": NOW_S + 60, "iat": NOW_S},
        b"k" * 32,
        "HS256",
        headers={"kid": "rsa-1"},
    )
    with pytest.raises(TokenRejected, match="refused"):
        validator.validate(hmac_token)


def test_sub_and_scope_claim_names(idp: _Idp, clock: ManualClock) -> None:
    validator = _validator(idp, clock, sub_claim_name="client_id", scope_claim_name="scp")
    token = validator.validate(idp.token(client_id="svc-orders", scp="kafka.write"))
    assert token.principal_name == "svc-orders" and token.scope == frozenset({"kafka.write"})


def test_rotated_keys_are_fetched_when_an_unknown_kid_shows_up(
    idp: _Idp, clock: ManualClock
) -> None:
    validator = _validator(idp, clock)
    validator.validate(idp.token())
    assert idp.reads == 1
    idp.keys["ec-2"] = ec.generate_private_key(ec.SECP256R1())
    idp.publish()
    clock.advance(200)  # past the retry backoff
    assert validator.validate(idp.token(kid="ec-2", algorithm="ES256")).principal_name == "alice"
    assert idp.reads == 2
    # An unknown kid does not make every token a JWKS fetch: one per backoff period.
    idp.keys["ec-3"] = ec.generate_private_key(ec.SECP256R1())  # signs, but never published
    clock.advance(200)
    for _ in range(3):
        with pytest.raises(TokenRejected, match="key id"):
            validator.validate(idp.token(kid="ec-3", algorithm="ES256"))
    assert idp.reads == 3


def test_keys_refresh_on_their_period(idp: _Idp, clock: ManualClock) -> None:
    validator = _validator(idp, clock)
    validator.validate(idp.token())
    clock.advance(60_000)
    validator.validate(idp.token(exp=NOW_S + 6000))
    assert idp.reads == 2


def test_a_jwks_that_cannot_be_loaded_is_a_refusal(tmp_path: Path, clock: ManualClock) -> None:
    keys = JwksKeys(fetcher((tmp_path / "missing.json").as_uri()), clock)
    with pytest.raises(TokenRejected, match="Could not load the JWKS"):
        JwtValidator(keys, clock, JwtValidatorConfig()).validate(
            jwt.encode(
                {"sub": "a"},
                rsa.generate_private_key(public_exponent=65537, key_size=2048),
                "RS256",
                headers={"kid": "x"},
            )
        )
