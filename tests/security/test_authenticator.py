from __future__ import annotations

from pathlib import Path

import kio.schema.sasl_authenticate.v2.request as sa2
import kio.schema.sasl_handshake.v1.request as sh1
import pytest

from tests.security.certs import LocalCa
from tests.security.scram_store import MemoryScramStore
from tierlog.protocol import decode_response, encode_request
from tierlog.security.api import ConnectionInfo, SecurityProtocol
from tierlog.security.authenticator import ListenerAuthenticator, listener_setting
from tierlog.security.errors import AuthenticationError, SecurityConfigError
from tierlog.security.oauth_unsecured import unsecured_token
from tierlog.security.principal import ANONYMOUS, KafkaPrincipal
from tierlog.security.sasl_session import SaslSession, Send
from tierlog.util.clock import ManualClock

PLAIN_JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="a";'
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
OAUTH_JAAS = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"


def _conn(protocol: SecurityProtocol, cert: bytes | None = None) -> ConnectionInfo:
    return ConnectionInfo("SASL_SSL", protocol, "127.0.0.1", cert)


def test_per_listener_and_per_mechanism_keys_win() -> None:
    config = {
        "sasl.jaas.config": "general",
        "listener.name.sasl_ssl.sasl.jaas.config": "listener",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": "mechanism",
    }
    assert listener_setting(config, "SASL_SSL", "sasl.jaas.config", "PLAIN") == (
        "listener.name.sasl_ssl.plain.sasl.jaas.config",
        "mechanism",
    )
    assert (
        listener_setting(config, "SASL_SSL", "sasl.jaas.config", "SCRAM-SHA-256")[1] == "listener"
    )
    assert listener_setting(config, "OTHER", "sasl.jaas.config")[1] == "general"


def test_sasl_listener_from_kafka_keys() -> None:
    config = {
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
        "listener.name.sasl_ssl.scram-sha-256.connections.max.reauth.ms": "3600000",
        "connection.failed.authentication.delay.ms": "500",
    }
    authenticator = ListenerAuthenticator.from_config(
        config, "SASL_SSL", SecurityProtocol.SASL_SSL, ManualClock(), MemoryScramStore()
    )
    assert authenticator.mechanisms == ("PLAIN", "SCRAM-SHA-256")
    session = authenticator.start(_conn(SecurityProtocol.SASL_SSL))
    assert isinstance(session, SaslSession)


@pytest.mark.parametrize(
    ("config", "key"),
    [
        ({"sasl.enabled.mechanisms": "PLAIN"}, "listener.name.sasl_ssl.plain.sasl.jaas.config"),
        ({"sasl.enabled.mechanisms": "GSSAPI"}, "sasl.enabled.mechanisms"),
        ({"sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config": SCRAM_JAAS}, "sasl.jaas.config"),
        ({"sasl.enabled.mechanisms": ""}, "sasl.enabled.mechanisms"),
        (
            {
                "sasl.enabled.mechanisms": "PLAIN",
                "sasl.jaas.config": PLAIN_JAAS,
                "connections.max.reauth.ms": "soon",
            },
            "connections.max.reauth.ms",
        ),
    ],
)
def test_config_errors_name_the_key(config: dict[str, str], key: str) -> None:
    with pytest.raises(SecurityConfigError) as caught:
        ListenerAuthenticator.from_config(
            config, "SASL_SSL", SecurityProtocol.SASL_SSL, ManualClock(), MemoryScramStore()
        )
    assert caught.value.key == key


def test_oauthbearer_with_a_jwks_url_validates_jwts(tmp_path: Path) -> None:
    jwks = tmp_path / "jwks.json"
    jwks.write_text('{"keys": []}')
    config = {
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.sasl_ssl.oauthbearer.sasl.jaas.config": OAUTH_JAAS,
        "listener.name.sasl_ssl.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": jwks.as_uri(),
        "sasl.oauthbearer.expected.audience": "kafka,spark",
    }
    authenticator = ListenerAuthenticator.from_config(
        config, "SASL_SSL", SecurityProtocol.SASL_SSL, ManualClock()
    )
    session = authenticator.start(_conn(SecurityProtocol.SASL_SSL))
    assert isinstance(session, SaslSession)
    # An unsecured token, which the development validator would accept, is refused.
    token = unsecured_token({"sub": "admin", "exp": 2_000_000_000, "iat": 1_000_000_000})
    session.receive(encode_request(sh1.SaslHandshakeRequest(mechanism="OAUTHBEARER"), 1)[4:])
    request = sa2.SaslAuthenticateRequest(auth_bytes=f"n,,\x01auth=Bearer {token}\x01\x01".encode())
    [answer] = session.receive(encode_request(request, 2)[4:])
    assert isinstance(answer, Send)
    assert decode_response(answer.data[4:], 36, 2)[1].auth_bytes == b'{"status":"invalid_token"}'


def test_kafkas_validator_class_names_pick_the_validator(tmp_path: Path) -> None:
    jwks = tmp_path / "jwks.json"
    jwks.write_text('{"keys": []}')
    handler = "listener.name.sasl_ssl.oauthbearer.sasl.server.callback.handler.class"
    base = {
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.sasl_ssl.oauthbearer.sasl.jaas.config": OAUTH_JAAS,
    }
    jwt_class = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
    # The JWT validator without a JWKS fails at start, naming the key, as in Kafka.
    with pytest.raises(SecurityConfigError) as caught:
        ListenerAuthenticator.from_config(
            {**base, handler: jwt_class}, "SASL_SSL", SecurityProtocol.SASL_SSL, ManualClock()
        )
    assert caught.value.key == handler and "jwks.endpoint.url" in str(caught.value)
    # The unsecured validator, named, accepts unsecured tokens even beside a JWKS URL.
    unsecured = (
        "org.apache.kafka.common.security.oauthbearer.internals.unsecured."
        "OAuthBearerUnsecuredValidatorCallbackHandler"
    )
    config = {**base, handler: unsecured, "sasl.oauthbearer.jwks.endpoint.url": jwks.as_uri()}
    authenticator = ListenerAuthenticator.from_config(
        config, "SASL_SSL", SecurityProtocol.SASL_SSL, ManualClock(1_500_000_000_000)
    )
    session = authenticator.start(_conn(SecurityProtocol.SASL_SSL))
    assert isinstance(session, SaslSession)
    token = unsecured_token({"sub": "admin", "exp": 2_000_000_000, "iat": 1_000_000_000})
    session.receive(encode_request(sh1.SaslHandshakeRequest(mechanism="OAUTHBEARER"), 1)[4:])
    request = sa2.SaslAuthenticateRequest(auth_bytes=f"n,,\x01auth=Bearer {token}\x01\x01".encode())
    answer = session.receive(encode_request(request, 2)[4:])[0]
    assert isinstance(answer, Send)
    assert decode_response(answer.data[4:], 36, 2)[1].error_code == 0


def test_plaintext_is_anonymous_and_ssl_maps_the_certificate(ca: LocalCa) -> None:
    plaintext = ListenerAuthenticator("PLAINTEXT", SecurityProtocol.PLAINTEXT, ManualClock())
    assert plaintext.start(_conn(SecurityProtocol.PLAINTEXT)) == ANONYMOUS
    mapped = ListenerAuthenticator.from_config(
        {"ssl.principal.mapping.rules": "RULE:^CN=([^,]+),OU=ops.*$/$1/L"},
        "SSL",
        SecurityProtocol.SSL,
        ManualClock(),
    )
    cert = ca.issue("Alice", organizational_unit="ops").certificate_der()
    assert mapped.start(_conn(SecurityProtocol.SSL, cert)) == KafkaPrincipal.user("alice")
    assert mapped.start(_conn(SecurityProtocol.SSL, None)) == ANONYMOUS
    with pytest.raises(AuthenticationError, match="No rules apply"):
        mapped.start(
            _conn(
                SecurityProtocol.SSL, ca.issue("bob", organizational_unit="dev").certificate_der()
            )
        )
