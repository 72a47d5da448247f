from __future__ import annotations

import json

import pytest
from kafka.net.sasl.oauth import AbstractTokenProvider, SaslMechanismOAuth

from tierlog.security.errors import AuthenticationError
from tierlog.security.jaas import parse_jaas_config
from tierlog.security.oauth_unsecured import UnsecuredJwsValidator, unsecured_token
from tierlog.security.oauthbearer import (
    OAuthBearerSaslServer,
    TokenRejected,
    parse_client_initial_response,
)
from tierlog.security.principal import KafkaPrincipal
from tierlog.util.clock import ManualClock

NOW_S = 1_700_000_000


class _Provider(AbstractTokenProvider):
    def __init__(self, token: str, extensions: dict[str, str] | None = None) -> None:
        self._token = token
        self._extensions = extensions or {}

    def token(self) -> str:
        return self._token

    def extensions(self) -> dict[str, str]:
        return self._extensions


def _server(clock: ManualClock, **options: object) -> OAuthBearerSaslServer:
    return OAuthBearerSaslServer(UnsecuredJwsValidator(clock, **options))  # type: ignore[arg-type]


def _drive(client: SaslMechanismOAuth, server: OAuthBearerSaslServer) -> None:
    while not client.is_done():
        client.receive(server.evaluate(client.auth_bytes()))


def test_kafka_python_client_with_an_unsecured_token_and_extensions() -> None:
    clock = ManualClock(NOW_S * 1000)
    token = unsecured_token({"sub": "alice", "iat": NOW_S, "exp": NOW_S + 3600, "scope": "a b"})
    client = SaslMechanismOAuth(sasl_oauth_token_provider=_Provider(token, {"traceId": "abc"}))
    server = _server(clock)
    _drive(client, server)
    assert client.is_authenticated()
    outcome = server.outcome
    assert outcome is not None and outcome.principal == KafkaPrincipal.user("alice")
    assert outcome.credential_expiry_ms == (NOW_S + 3600) * 1000
    assert dict(outcome.extensions) == {"traceId": "abc"}


def test_a_refused_token_follows_rfc_7628() -> None:
    # Error JSON as a challenge, the client's %x01, then the failure with the reason.
    clock = ManualClock(NOW_S * 1000)
    expired = unsecured_token({"sub": "alice", "iat": NOW_S - 7200, "exp": NOW_S - 3600})
    client = SaslMechanismOAuth(sasl_oauth_token_provider=_Provider(expired))
    server = _server(clock)
    challenge = server.evaluate(client.auth_bytes())
    assert json.loads(challenge) == {"status": "invalid_token"}
    client.receive(challenge)
    with pytest.raises(AuthenticationError) as caught:
        server.evaluate(client.auth_bytes())
    assert (
        caught.value.client_message is not None and "Expiration Time" in caught.value.client_message
    )


def test_missing_scope_is_insufficient_scope() -> None:
    clock = ManualClock(NOW_S * 1000)
    server = _server(clock, required_scope=frozenset({"LOGIN_TO_KAFKA"}))
    token = unsecured_token({"sub": "alice", "exp": NOW_S + 60, "scope": ["other"]})
    challenge = server.evaluate(f"n,,\x01auth=Bearer {token}\x01\x01".encode())
    assert json.loads(challenge) == {"status": "insufficient_scope", "scope": "LOGIN_TO_KAFKA"}


@pytest.mark.parametrize(
    ("claims", "reason"),
    [
        ({"exp": NOW_S + 60}, "Required claim missing: sub"),
        ({"sub": "a"}, "Required claim missing: exp"),
        ({"sub": "a", "exp": NOW_S}, "on or after the Expiration Time"),
        ({"sub": "a", "exp": NOW_S + 60, "iat": NOW_S + 30}, "Issued At"),
        ({"sub": "a", "exp": NOW_S + 60, "iat": NOW_S + 60}, "Issued At"),
        ({"sub": 7, "exp": NOW_S + 60}, "incorrect type"),
    ],
)
def test_unsecured_validation_rules(claims: dict[str, object], reason: str) -> None:
    validator = UnsecuredJwsValidator(ManualClock(NOW_S * 1000))
    with pytest.raises(TokenRejected, match=reason):
        validator.validate(unsecured_token(claims))


def test_clock_skew_and_options_from_jaas() -> None:
    entry = parse_jaas_config(
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        'unsecuredValidatorPrincipalClaimName="user" unsecuredValidatorAllowableClockSkewMs="5000";'
    )
    validator = UnsecuredJwsValidator.from_jaas(entry, ManualClock(NOW_S * 1000))
    token = validator.validate(unsecured_token({"user": "bob", "exp": NOW_S - 2}))
    assert token.principal_name == "bob"


@pytest.mark.parametrize(
    "message",
    [
        b"",
        b"n,,\x01\x01",
        b"n,,\x01auth=Basic abc\x01\x01",
        b"n,,\x01auth=Bearer a b\x01\x01",
        b"n,,\x01auth=Bearer abc\x01bad key=v\x01\x01",
        b"n,,auth=Bearer abc\x01\x01",
    ],
)
def test_malformed_client_messages(message: bytes) -> None:
    with pytest.raises(AuthenticationError):
        parse_client_initial_response(message)


def test_token_is_hidden_in_repr() -> None:
    parsed = parse_client_initial_response(b"n,a=alice,\x01auth=Bearer s3cr3t.t0ken\x01x=1\x01\x01")
    assert parsed.token == "s3cr3t.t0ken" and parsed.authorization_id == "alice"
    assert "s3cr3t" not in repr(parsed)


def test_signed_tokens_are_not_unsecured_tokens() -> None:
    validator = UnsecuredJwsValidator(ManualClock(NOW_S * 1000))
    token = unsecured_token({"sub": "a", "exp": NOW_S + 60})
    with pytest.raises(TokenRejected, match="digital signature"):
        validator.validate(token + "c2ln")
