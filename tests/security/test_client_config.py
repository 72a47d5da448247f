"""Kafka's client security keys -> ``ClientSecurity`` (sans-I/O): what is read, what is
refused by name, the OAUTHBEARER development token, librdkafka's names, and redaction."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from tierlog.security.api import SecurityProtocol
from tierlog.security.client_config import ClientSecurity, librdkafka_config, redacted
from tierlog.security.errors import SecurityConfigError
from tierlog.security.oauth_unsecured import UnsecuredJwsValidator
from tierlog.security.oauthbearer import parse_client_initial_response
from tierlog.security.sasl_client import PlainSaslClient, ScramMechanismClient
from tierlog.util.clock import ManualClock

SCRAM_JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="alice" password="alice-secret";'
)


def test_plaintext_by_default_and_other_keys_ignored() -> None:
    security = ClientSecurity.from_config({"bootstrap.servers": "x:1", "acks": "all"})
    assert security.protocol is SecurityProtocol.PLAINTEXT
    assert security.ssl_context() is None and security.sasl_client() is None


def test_java_client_keys_for_scram_over_sasl_ssl() -> None:
    security = ClientSecurity.from_config(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": SCRAM_JAAS,
            "ssl.truststore.certificates": "-----BEGIN CERTIFICATE-----",
            "ssl.endpoint.identification.algorithm": "",
        }
    )
    assert security.sasl is not None
    assert (security.sasl.mechanism, security.sasl.username) == ("SCRAM-SHA-512", "alice")
    assert security.tls is not None and security.tls.endpoint_identification_algorithm == ""
    assert isinstance(security.sasl_client(), ScramMechanismClient)
    assert "alice-secret" not in repr(security)


def test_librdkafka_names_for_plain() -> None:
    security = ClientSecurity.from_config(
        {
            "security.protocol": "sasl_plaintext",
            "sasl.mechanisms": "plain",
            "sasl.username": "bob",
            "sasl.password": "bob-secret",
        }
    )
    client = security.sasl_client()
    assert isinstance(client, PlainSaslClient)
    assert client.initial() == b"\0bob\0bob-secret"


@pytest.mark.parametrize(
    ("config", "key"),
    [
        ({"security.protocol": "TLS"}, "security.protocol"),
        ({"security.protocol": "SASL_SSL"}, "sasl.mechanism"),
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI"}, "sasl.mechanism"),
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}, "sasl.username"),
        (
            {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "a"},
            "sasl.password",
        ),
        (
            {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "PLAIN",
                "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule "
                'required username="a";',
            },
            "sasl.jaas.config",
        ),
        (
            {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.jaas.config": "x"},
            "sasl.jaas.config",
        ),
        (
            {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "OAUTHBEARER",
                "sasl.jaas.config": SCRAM_JAAS,
            },
            "sasl.jaas.config",
        ),
        ({"sasl.kerberos.service.name": "kafka"}, "sasl.kerberos.service.name"),
        ({"ssl.protocol": "TLSv1.3"}, "ssl.protocol"),
        ({"security.protocol": "SSL", "ssl.keystore.type": "JKS"}, "ssl.keystore.type"),
    ],
)
def test_bad_settings_name_the_key(config: dict[str, Any], key: str) -> None:
    with pytest.raises(SecurityConfigError) as refused:
        ClientSecurity.from_config(config)
    assert refused.value.key == key


def oauth_config(options: str) -> dict[str, Any]:
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.jaas.config": (
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
            f"{options};"
        ),
    }


def test_oauthbearer_unsecured_login_token_is_what_the_broker_accepts() -> None:
    clock = ManualClock(1_700_000_000_000)
    security = ClientSecurity.from_config(
        oauth_config(
            'unsecuredLoginStringClaim_sub="alice" unsecuredLoginLifetimeSeconds="60" '
            'unsecuredLoginListClaim_scope=",read,write" unsecuredLoginExtension_team="data"'
        ),
        clock,
    )
    client = security.sasl_client()
    assert client is not None
    message = parse_client_initial_response(client.initial())
    assert dict(message.extensions) == {"team": "data"}
    claims = json.loads(base64.urlsafe_b64decode(message.token.split(".")[1] + "=="))
    assert claims["exp"] - claims["iat"] == 60
    token = UnsecuredJwsValidator(clock, required_scope=frozenset({"read"})).validate(message.token)
    assert token.principal_name == "alice"
    clock.advance(61_000)
    with pytest.raises(Exception, match="Expiration"):
        UnsecuredJwsValidator(clock).validate(message.token)


def test_oauthbearer_without_the_principal_claim_is_refused() -> None:
    with pytest.raises(SecurityConfigError, match="principal claim"):
        ClientSecurity.from_config(oauth_config('unsecuredLoginStringClaim_aud="x"'))


def test_librdkafka_config_says_the_same() -> None:
    security = ClientSecurity.from_config(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.jaas.config": SCRAM_JAAS,
            "ssl.truststore.location": "/ca.pem",
            "ssl.keystore.location": "/me.pem",
            "ssl.key.password": "k",
        }
    )
    assert librdkafka_config(security) == {
        "security.protocol": "sasl_ssl",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "alice",
        "sasl.password": "alice-secret",
        "ssl.ca.location": "/ca.pem",
        "ssl.certificate.location": "/me.pem",
        "ssl.key.location": "/me.pem",
        "ssl.key.password": "k",
        "ssl.endpoint.identification.algorithm": "https",
    }
    oauth = librdkafka_config(
        ClientSecurity.from_config(oauth_config('unsecuredLoginStringClaim_sub="bob"'))
    )
    assert oauth["sasl.oauthbearer.config"] == "principal=bob lifeSeconds=3600"
    assert oauth["enable.sasl.oauthbearer.unsecure.jwt"] == "true"


def test_redacted_hides_every_secret() -> None:
    shown = redacted(
        {
            "kafka.sasl.jaas.config": SCRAM_JAAS,
            "kafka.sasl.password": "p",
            "kafka.ssl.key.password": "k",
            "kafka.bootstrap.servers": "h:1",
        }
    )
    assert "alice-secret" not in repr(shown) and "'p'" not in repr(shown)
    assert shown["kafka.bootstrap.servers"] == "h:1"
