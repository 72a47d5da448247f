"""``inter_broker_security``: how a broker connects to the others, from its own keys, as
Kafka's brokers do (the inter-broker listener's TLS files, its SASL mechanism from
``sasl.mechanism.inter.broker.protocol`` and the login in that listener's JAAS entry);
each mistake is a ConfigError naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from tierlog.broker.config import BrokerConfig
from tierlog.broker.network.listener_setup import inter_broker_security
from tierlog.security.api import SecurityProtocol
from tierlog.security.client_config import ClientSecurity
from tierlog.security.local_ca import LocalCa
from tierlog.security.sasl_client import ScramMechanismClient
from tierlog.util.clock import ManualClock
from tierlog.util.configdef import ConfigError

SCRAM_LOGIN = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="broker" password="broker-secret";'
)


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("inter-broker")
    ca = LocalCa.create()
    keystore = ca.issue("localhost").write_pem_keystore(tmp / "broker.pem")
    return {
        "ssl.keystore.location": str(keystore),
        "ssl.truststore.location": str(ca.write_ca(tmp / "ca.pem")),
    }


def security_of(props: dict[str, str]) -> ClientSecurity:
    config = BrokerConfig(props)
    return inter_broker_security(
        config.security,
        config.listener_plan(),
        config["sasl.mechanism.inter.broker.protocol"],
        ManualClock(),
    )


def sasl_ssl(tls_files: dict[str, str], **more: str) -> dict[str, str]:
    return {
        "listeners": "CLIENTS://127.0.0.1:9092,INTERNAL://127.0.0.1:9093",
        "listener.security.protocol.map": "CLIENTS:SASL_SSL,INTERNAL:SASL_SSL",
        "inter.broker.listener.name": "INTERNAL",
        "listener.name.internal.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.clients.sasl.enabled.mechanisms": "PLAIN",
        **tls_files,
        **more,
    }


def test_plaintext_inter_broker_has_no_tls_and_no_login() -> None:
    security = security_of({"listeners": "PLAINTEXT://127.0.0.1:9092"})
    assert security.protocol is SecurityProtocol.PLAINTEXT
    assert security.ssl_context() is None and security.sasl_client() is None


def test_sasl_ssl_logs_in_with_the_listeners_jaas_entry(tls_files: dict[str, str]) -> None:
    security = security_of(
        sasl_ssl(
            tls_files,
            **{
                "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
                "listener.name.internal.scram-sha-512.sasl.jaas.config": SCRAM_LOGIN,
            },
        )
    )
    assert security.protocol is SecurityProtocol.SASL_SSL
    assert security.sasl is not None and security.sasl.username == "broker"
    assert isinstance(security.sasl_client(), ScramMechanismClient)
    context = security.ssl_context()
    assert context is not None and context.check_hostname  # https by default, as Kafka
    assert "broker-secret" not in repr(security)


@pytest.mark.parametrize(
    ("more", "key", "words"),
    [
        ({}, "sasl.mechanism.inter.broker.protocol", "GSSAPI is not supported"),
        (
            {"sasl.mechanism.inter.broker.protocol": "PLAIN"},
            "sasl.mechanism.inter.broker.protocol",
            "not in INTERNAL's sasl.enabled.mechanisms",
        ),
        (
            {"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512"},
            "listener.name.internal.scram-sha-512.sasl.jaas.config",
            "no login entry",
        ),
        (
            {
                "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
                "listener.name.internal.scram-sha-512.sasl.jaas.config": (
                    "org.apache.kafka.common.security.scram.ScramLoginModule required;"
                ),
            },
            "listener.name.internal.scram-sha-512.sasl.jaas.config",
            "username= and password=",
        ),
    ],
)
def test_a_login_brokers_cannot_use_names_the_key(
    tls_files: dict[str, str], more: dict[str, str], key: str, words: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        security_of(sasl_ssl(tls_files, **more))
    assert refused.value.key == key and words in refused.value.reason


def test_a_missing_truststore_file_is_a_start_up_error(tmp_path: Path) -> None:
    props = {
        "listeners": "SSL://127.0.0.1:9093",
        "security.inter.broker.protocol": "SSL",
        "ssl.truststore.location": str(tmp_path / "nowhere.pem"),
    }
    with pytest.raises(ConfigError) as refused:
        security_of(props)
    assert refused.value.key == "ssl.truststore.location"
