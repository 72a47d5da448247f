"""tierlog's own client over TLS and SASL against a real broker process (issue 22):
``LogClient`` (blocking) and ``AsyncConnection`` (asyncio) over SASL_SSL (SCRAM-SHA-256/512,
PLAIN), SSL with mutual TLS and SASL_PLAINTEXT (OAUTHBEARER), configured with Kafka's
client keys. The ACL authorizer tells the principals apart: Metadata lists topic ``a``
only to principals allowed to describe it, so seeing it proves who the broker thinks
logged in. A refused login is one error naming the mechanism and the broker's message."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kio.schema.metadata.v12.request import MetadataRequest

from tests.broker.harness import BrokerProcess
from tierlog.client import LogClient
from tierlog.client.async_connection import AsyncConnection
from tierlog.client.connection import BrokerConnection
from tierlog.protocol.kio_build import build
from tierlog.security.client_config import ClientSecurity
from tierlog.security.errors import SaslAuthenticationFailedError
from tierlog.security.local_ca import LocalCa
from tierlog.security.password import Password
from tierlog.tools.users import add_user

pytestmark = pytest.mark.timeout(180)

SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
OAUTH_JAAS = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_alice="alice-plain" user_bob="bob-plain";'
)


@dataclass
class Secured:
    broker: BrokerProcess
    ca: Path
    certs: dict[str, Path]  # name -> PEM keystore (key and chain)

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.broker.ports[listener]}"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    tmp = tmp_path_factory.mktemp("client-secured")
    ca = LocalCa.create()
    ca_path = ca.write_ca(tmp / "ca.pem")
    keystore = ca.issue("localhost", organizational_unit="brokers").write_pem_keystore(
        tmp / "broker.pem"
    )
    certs = {
        name: ca.issue(name, hosts=(), organizational_unit="clients").write_pem_keystore(
            tmp / f"{name}.pem", "key-secret"
        )
        for name in ("alice", "bob")
    }
    data = tmp / "data"
    data.mkdir()
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        add_user("alice", mechanism, Password("alice-secret"), io.StringIO(), data_dir=data)
        add_user("bob", mechanism, Password("bob-secret"), io.StringIO(), data_dir=data)
    broker = BrokerProcess(
        data,
        {
            "listeners": (
                "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0,"
                "SASL_PLAINTEXT://127.0.0.1:0"
            ),
            "ssl.keystore.location": str(keystore),
            "ssl.truststore.location": str(ca_path),
            "listener.name.ssl.ssl.client.auth": "required",
            "listener.name.ssl.ssl.principal.mapping.rules": (
                "RULE:^CN=([a-z]+),OU=clients$/$1/L,DEFAULT"
            ),
            "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN",
            "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
            "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "OAUTHBEARER",
            "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": OAUTH_JAAS,
            "connection.failed.authentication.delay.ms": "100",
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:ANONYMOUS",
            "auto.create.topics.enable": "false",
        },
    ).start()
    try:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{broker.ports['PLAINTEXT']}"})
        for future in admin.create_topics([NewTopic("a", 1, 1)], operation_timeout=10).values():
            future.result(timeout=30)
        binding = AclBinding(
            ResourceType.TOPIC,
            "a",
            ResourcePatternType.LITERAL,
            "User:alice",
            "*",
            AclOperation.READ,
            AclPermissionType.ALLOW,
        )
        for future in admin.create_acls([binding]).values():
            future.result(timeout=30)
        producer = Producer({"bootstrap.servers": f"127.0.0.1:{broker.ports['PLAINTEXT']}"})
        for i in range(5):
            producer.produce("a", f"v{i}".encode())
        assert producer.flush(30) == 0
        yield Secured(broker, ca_path, certs)
    finally:
        broker.stop()


def scram(secured: Secured, mechanism: str, user: str, password: str) -> dict[str, Any]:
    """As a Java client writes it: sasl.jaas.config and a PEM truststore."""
    return {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": mechanism,
        "sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{user}" password="{password}";'
        ),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(secured.ca),
    }


def sees_topic_a(secured: Secured, listener: str, config: dict[str, Any]) -> bool:
    with LogClient(
        secured.bootstrap(listener), security=ClientSecurity.from_config(config), timeout=20
    ) as client:
        client.refresh()
        return "a" in client.topics()


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_log_client_over_sasl_ssl_scram(secured: Secured, mechanism: str) -> None:
    assert sees_topic_a(secured, "SASL_SSL", scram(secured, mechanism, "alice", "alice-secret"))
    assert not sees_topic_a(secured, "SASL_SSL", scram(secured, mechanism, "bob", "bob-secret"))


def test_log_client_fetches_over_sasl_ssl(secured: Secured) -> None:
    config = scram(secured, "SCRAM-SHA-512", "alice", "alice-secret")
    with LogClient(
        secured.bootstrap("SASL_SSL"), security=ClientSecurity.from_config(config), timeout=20
    ) as client:
        result = client.fetch("a", 0, 0)
    assert result.high_watermark == 5
    assert len(result.records) > 0


def test_log_client_over_sasl_ssl_plain_with_librdkafka_names(secured: Secured) -> None:
    def plain(user: str, password: str) -> dict[str, Any]:
        return {
            "security.protocol": "sasl_ssl",
            "sasl.mechanisms": "PLAIN",
            "sasl.username": user,
            "sasl.password": password,
            "ssl.ca.location": str(secured.ca),
        }

    assert sees_topic_a(secured, "SASL_SSL", plain("alice", "alice-plain"))
    assert not sees_topic_a(secured, "SASL_SSL", plain("bob", "bob-plain"))


def test_log_client_over_mutual_tls(secured: Secured) -> None:
    def mutual(name: str) -> dict[str, Any]:
        return {
            "security.protocol": "SSL",
            "ssl.truststore.location": str(secured.ca),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(secured.certs[name]),
            "ssl.key.password": "key-secret",
        }

    assert sees_topic_a(secured, "SSL", mutual("alice"))
    assert not sees_topic_a(secured, "SSL", mutual("bob"))


def test_log_client_over_sasl_plaintext_oauthbearer(secured: Secured) -> None:
    def oauth(user: str) -> dict[str, Any]:
        return {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.jaas.config": (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
                f'required unsecuredLoginStringClaim_sub="{user}";'
            ),
        }

    assert sees_topic_a(secured, "SASL_PLAINTEXT", oauth("alice"))
    assert not sees_topic_a(secured, "SASL_PLAINTEXT", oauth("bob"))


def test_a_wrong_password_is_one_error_naming_the_mechanism(secured: Secured) -> None:
    config = scram(secured, "SCRAM-SHA-256", "alice", "not-her-password")
    with pytest.raises(SaslAuthenticationFailedError) as failed:
        sees_topic_a(secured, "SASL_SSL", config)
    message = str(failed.value)
    assert "SCRAM-SHA-256" in message and secured.bootstrap("SASL_SSL") in message
    assert failed.value.broker_message  # the broker's own words
    assert "not-her-password" not in message


def test_a_mechanism_the_listener_does_not_enable_names_those_it_does(secured: Secured) -> None:
    config = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.jaas.config": (
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
            'required unsecuredLoginStringClaim_sub="alice";'
        ),
        "ssl.truststore.location": str(secured.ca),
    }
    with pytest.raises(SaslAuthenticationFailedError, match=r"UNSUPPORTED_SASL_MECHANISM.*PLAIN"):
        sees_topic_a(secured, "SASL_SSL", config)


def test_a_broker_certificate_from_another_ca_is_refused(secured: Secured, tmp_path: Path) -> None:
    other = LocalCa.create("someone else").write_ca(tmp_path / "other.pem")
    config = {**scram(secured, "SCRAM-SHA-256", "alice", "alice-secret")}
    config["ssl.truststore.location"] = str(other)
    with pytest.raises(ConnectionError, match="CERTIFICATE_VERIFY_FAILED"):
        sees_topic_a(secured, "SASL_SSL", config)


def metadata() -> Any:
    return build(
        MetadataRequest,
        {
            "topics": None,
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
        },
    )


def test_async_connection_over_sasl_ssl_and_its_failures(secured: Secured) -> None:
    host, port = "127.0.0.1", secured.broker.ports["SASL_SSL"]

    async def topics(config: dict[str, Any]) -> list[str]:
        security = ClientSecurity.from_config(config)
        connection = await AsyncConnection.open(host, port, security=security)
        try:
            answer = await connection.request(metadata())
        finally:
            await connection.close()
        return [str(t.name) for t in answer.topics]

    async def scenario() -> None:
        assert "a" in await topics(scram(secured, "SCRAM-SHA-512", "alice", "alice-secret"))
        assert "a" not in await topics(scram(secured, "SCRAM-SHA-512", "bob", "bob-secret"))
        with pytest.raises(SaslAuthenticationFailedError, match="SCRAM-SHA-512"):
            await topics(scram(secured, "SCRAM-SHA-512", "alice", "wrong"))

    asyncio.run(scenario())


def test_a_blocking_connection_logs_in_again_after_a_reconnect(secured: Secured) -> None:
    security = ClientSecurity.from_config(scram(secured, "SCRAM-SHA-256", "alice", "alice-secret"))
    connection = BrokerConnection("127.0.0.1", secured.broker.ports["SASL_SSL"], security=security)
    try:
        assert "a" in [str(t.name) for t in connection.call(metadata()).topics]
        connection.close()
        assert "a" in [str(t.name) for t in connection.call(metadata()).topics]
    finally:
        connection.close()
