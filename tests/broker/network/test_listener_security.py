"""Named listeners, TLS and SASL on a real broker process, with real clients (issue 22,
stage 3a): one broker with PLAINTEXT, SASL_SSL (SCRAM-SHA-256/512, PLAIN), SSL (mutual
TLS, principals from ssl.principal.mapping.rules) and SASL_PLAINTEXT listeners, the ACL
authorizer, and users stored with ``tierlog users`` before it starts. ACLs tell the
principals apart; every listener answers Metadata with its own address; bad input on
the wire closes that connection only."""

from __future__ import annotations

import io
import re
import socket
import ssl
import struct
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kafka import KafkaProducer
from kafka.errors import KafkaError as PyKafkaError

from tests.broker.harness import BrokerProcess
from tierlog.security.local_ca import LocalCa
from tierlog.security.password import Password
from tierlog.tools.users import add_user

pytestmark = pytest.mark.timeout(240)

PASSWORDS = {"alice": "alice-secret", "bob": "bob-secret"}
PLAIN_USERS = {"admin": "admin-secret", "alice": "alice-plain", "bob": "bob-plain"}
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
OAUTH_JAAS = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" '
    + " ".join(f'user_{u}="{p}"' for u, p in PLAIN_USERS.items())
    + ";"
)


@dataclass
class Secured:
    broker: BrokerProcess
    ca: Path
    certs: dict[str, tuple[Path, Path]]  # name -> (certificate chain, key)

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.broker.ports[listener]}"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    tmp = tmp_path_factory.mktemp("secured")
    ca = LocalCa.create()
    ca_path = ca.write_ca(tmp / "ca.pem")
    keystore = ca.issue("localhost", organizational_unit="brokers").write_pem_keystore(
        tmp / "broker.pem"
    )
    certs = {}
    for name in ("carol", "dave"):
        issued = ca.issue(name, hosts=(), organizational_unit="clients", organization="tierlog")
        chain = tmp / f"{name}.crt"
        chain.write_bytes(issued.chain_pem())
        key = tmp / f"{name}.key"
        key.write_bytes(issued.key_pem())
        key.chmod(0o600)
        certs[name] = (chain, key)
    data = tmp / "data"
    data.mkdir()
    for user, password in PASSWORDS.items():
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            add_user(user, mechanism, Password(password), io.StringIO(), data_dir=data)
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
                "RULE:^CN=([a-z]+),OU=clients,O=tierlog$/$1/L,DEFAULT"
            ),
            "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN",
            "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
            "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-256,OAUTHBEARER",
            "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
            # Kafka's unsecured tokens (development only): the principal is the token's sub.
            "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": OAUTH_JAAS,
            "connection.failed.authentication.delay.ms": "300",
            # Every listener's mechanisms have their own entries; this one is the fallback,
            # here to show that DescribeConfigs keeps it secret.
            "sasl.jaas.config": SCRAM_JAAS,
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            # The PLAINTEXT listener is the operators' (everyone there is ANONYMOUS).
            "super.users": "User:ANONYMOUS;User:admin",
            "auto.create.topics.enable": "false",
        },
    ).start()
    try:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{broker.ports['PLAINTEXT']}"})
        for future in admin.create_topics(
            [NewTopic(t, 1, 1) for t in ("a", "c")], operation_timeout=10
        ).values():
            future.result(timeout=30)
        allowed = [("a", "User:alice"), ("c", "User:carol")]
        bindings = [
            AclBinding(
                ResourceType.TOPIC,
                topic,
                ResourcePatternType.LITERAL,
                principal,
                "*",
                AclOperation.WRITE,
                AclPermissionType.ALLOW,
            )
            for topic, principal in allowed
        ]
        for future in admin.create_acls(bindings).values():
            future.result(timeout=30)
        yield Secured(broker, ca_path, certs)
    finally:
        broker.stop()


def sasl_ssl(secured: Secured, mechanism: str, user: str, password: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": secured.bootstrap("SASL_SSL"),
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
        "ssl.ca.location": str(secured.ca),
    }


def produce_error(config: dict[str, Any], topic: str) -> KafkaError | None:
    """Produce one record with confluent-kafka; the delivery error, or None."""
    errors: list[KafkaError | None] = []
    producer = Producer({**config, "message.timeout.ms": 20000})
    producer.produce(topic, b"v", on_delivery=lambda err, _msg: errors.append(err))
    assert producer.flush(30) == 0
    return errors[0]


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_confluent_kafka_over_sasl_ssl_scram_and_acls_tell_users_apart(
    secured: Secured, mechanism: str
) -> None:
    alice = sasl_ssl(secured, mechanism, "alice", PASSWORDS["alice"])
    assert produce_error(alice, "a") is None
    error = produce_error(sasl_ssl(secured, mechanism, "bob", PASSWORDS["bob"]), "a")
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_confluent_kafka_over_sasl_ssl_plain(secured: Secured) -> None:
    assert produce_error(sasl_ssl(secured, "PLAIN", "alice", PLAIN_USERS["alice"]), "a") is None
    error = produce_error(sasl_ssl(secured, "PLAIN", "bob", PLAIN_USERS["bob"]), "a")
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_a_wrong_password_fails_authentication_and_others_keep_working(
    secured: Secured,
) -> None:
    errors: list[KafkaError] = []
    config = sasl_ssl(secured, "SCRAM-SHA-256", "alice", "not-her-password")
    producer = Producer({**config, "error_cb": errors.append})
    deadline = time.monotonic() + 20
    while not any(e.code() == KafkaError._AUTHENTICATION for e in errors):
        assert time.monotonic() < deadline, errors
        producer.poll(0.1)
    text = next(e.str() for e in errors if e.code() == KafkaError._AUTHENTICATION)
    assert "invalid credentials with SASL mechanism SCRAM-SHA-256" in text
    alice = sasl_ssl(secured, "SCRAM-SHA-256", "alice", PASSWORDS["alice"])
    assert produce_error(alice, "a") is None
    assert "Failed authentication with 127.0.0.1" in secured.broker.log_text()


@pytest.mark.parametrize(
    ("protocol", "mechanism", "password"),
    [
        ("SASL_SSL", "SCRAM-SHA-512", PASSWORDS["alice"]),
        ("SASL_SSL", "PLAIN", PLAIN_USERS["alice"]),
        ("SASL_PLAINTEXT", "SCRAM-SHA-256", PASSWORDS["alice"]),
    ],
)
def test_kafka_python_over_sasl(
    secured: Secured, protocol: str, mechanism: str, password: str
) -> None:
    def producer(user: str, secret: str) -> KafkaProducer:
        return KafkaProducer(
            bootstrap_servers=secured.bootstrap(protocol),
            security_protocol=protocol,
            sasl_mechanism=mechanism,
            sasl_plain_username=user,
            sasl_plain_password=secret,
            ssl_cafile=str(secured.ca) if protocol == "SASL_SSL" else None,
            request_timeout_ms=20000,
            max_block_ms=20000,
        )

    alice = producer("alice", password)
    try:
        metadata = alice.send("a", b"v").get(timeout=30)
        assert metadata.topic == "a"
    finally:
        alice.close()
    bob_password = PASSWORDS["bob"] if mechanism.startswith("SCRAM") else PLAIN_USERS["bob"]
    bob = producer("bob", bob_password)
    try:
        with pytest.raises(PyKafkaError) as refused:
            bob.send("a", b"v").get(timeout=30)
        assert "TopicAuthorizationFailed" in type(refused.value).__name__ or (
            "TOPIC_AUTHORIZATION_FAILED" in str(refused.value).upper()
            or "TopicAuthorizationFailed" in repr(refused.value)
        )
    finally:
        bob.close()


def test_confluent_kafka_over_sasl_plaintext_oauthbearer(secured: Secured) -> None:
    def oauth(user: str) -> dict[str, Any]:
        return {
            "bootstrap.servers": secured.bootstrap("SASL_PLAINTEXT"),
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "enable.sasl.oauthbearer.unsecure.jwt": True,
            "sasl.oauthbearer.config": f"principal={user}",
        }

    assert produce_error(oauth("alice"), "a") is None
    error = produce_error(oauth("bob"), "a")
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def mutual_tls(secured: Secured, name: str) -> dict[str, Any]:
    chain, key = secured.certs[name]
    return {
        "bootstrap.servers": secured.bootstrap("SSL"),
        "security.protocol": "SSL",
        "ssl.ca.location": str(secured.ca),
        "ssl.certificate.location": str(chain),
        "ssl.key.location": str(key),
    }


def test_mutual_tls_principal_comes_from_the_mapping_rules(secured: Secured) -> None:
    # The ACL names User:carol: only the mapping rule turns her DN into that name.
    assert produce_error(mutual_tls(secured, "carol"), "c") is None
    error = produce_error(mutual_tls(secured, "dave"), "c")
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_kafka_python_over_mutual_tls(secured: Secured) -> None:
    chain, key = secured.certs["carol"]
    producer = KafkaProducer(
        bootstrap_servers=secured.bootstrap("SSL"),
        security_protocol="SSL",
        ssl_cafile=str(secured.ca),
        ssl_certfile=str(chain),
        ssl_keyfile=str(key),
        request_timeout_ms=20000,
        max_block_ms=20000,
    )
    try:
        assert producer.send("c", b"v").get(timeout=30).topic == "c"
    finally:
        producer.close()


def test_each_listener_answers_metadata_with_its_own_address(secured: Secured) -> None:
    configs = {
        "PLAINTEXT": {"bootstrap.servers": secured.bootstrap("PLAINTEXT")},
        "SASL_SSL": sasl_ssl(secured, "SCRAM-SHA-256", "alice", PASSWORDS["alice"]),
        "SSL": mutual_tls(secured, "carol"),
    }
    for listener, config in configs.items():
        brokers = AdminClient(config).list_topics(timeout=20).brokers.values()
        assert [(b.host, b.port) for b in brokers] == [
            ("127.0.0.1", secured.broker.ports[listener])
        ], listener


def read_until_closed(sock: socket.socket, timeout: float = 10.0) -> bytes:
    sock.settimeout(timeout)
    got = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return got
        got += chunk


METADATA_V1 = struct.pack(">hhih", 3, 1, 7, 4) + b"test" + struct.pack(">i", -1)


def test_a_request_before_authentication_closes_the_connection(secured: Secured) -> None:
    with socket.create_connection(("127.0.0.1", secured.broker.ports["SASL_PLAINTEXT"])) as sock:
        sock.sendall(struct.pack(">i", len(METADATA_V1)) + METADATA_V1)
        started = time.monotonic()
        assert read_until_closed(sock) == b""  # no answer: closed
        # ... after connection.failed.authentication.delay.ms (300 here).
        assert time.monotonic() - started >= 0.25
    assert "during SASL handshake" in secured.broker.log_text()


def test_an_oversized_sasl_frame_closes_the_connection(secured: Secured) -> None:
    with socket.create_connection(("127.0.0.1", secured.broker.ports["SASL_PLAINTEXT"])) as sock:
        sock.sendall(struct.pack(">i", 10_000_000) + b"\0" * 64)
        assert read_until_closed(sock) == b""


def test_a_truncated_sasl_frame_closes_the_connection(secured: Secured) -> None:
    # One byte: too short to hold a request header.
    with socket.create_connection(("127.0.0.1", secured.broker.ports["SASL_PLAINTEXT"])) as sock:
        sock.sendall(struct.pack(">i", 1) + b"\x00")
        assert read_until_closed(sock) == b""
    # A frame cut short by the client: nothing is answered, the connection ends.
    with socket.create_connection(("127.0.0.1", secured.broker.ports["SASL_PLAINTEXT"])) as sock:
        sock.sendall(struct.pack(">i", 100) + b"\x00\x11\x00\x01")
        sock.shutdown(socket.SHUT_WR)
        assert read_until_closed(sock) == b""


def wait_for_log(secured: Secured, text: str) -> None:
    deadline = time.monotonic() + 10
    while text not in secured.broker.log_text():
        assert time.monotonic() < deadline, secured.broker.log_text()[-2000:]
        time.sleep(0.05)


def test_plaintext_to_a_tls_port_and_tls_to_a_plaintext_port_close(secured: Secured) -> None:
    with socket.create_connection(("127.0.0.1", secured.broker.ports["SASL_SSL"])) as sock:
        sock.sendall(struct.pack(">i", len(METADATA_V1)) + METADATA_V1)
        read_until_closed(sock)  # a TLS alert at most, then closed
    wait_for_log(secured, "on SASL_SSL (SSL handshake failed")
    context = ssl.create_default_context(cafile=str(secured.ca))
    with socket.create_connection(("127.0.0.1", secured.broker.ports["PLAINTEXT"])) as raw:
        raw.settimeout(10)
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            context.wrap_socket(raw, server_hostname="localhost")
    wait_for_log(secured, "a TLS handshake, sent to PLAINTEXT listener")
    # Still serving everyone else.
    brokers = AdminClient({"bootstrap.servers": secured.bootstrap("PLAINTEXT")}).list_topics(
        timeout=10
    )
    assert brokers.brokers


def test_describe_configs_answers_secrets_as_sensitive(secured: Secured) -> None:
    from confluent_kafka.admin import ConfigResource

    admin = AdminClient({"bootstrap.servers": secured.bootstrap("PLAINTEXT")})
    resource = ConfigResource(ConfigResource.Type.BROKER, "0")
    configs = admin.describe_configs([resource])[resource].result(timeout=30)
    jaas = configs["sasl.jaas.config"]
    assert jaas.is_sensitive and jaas.value is None
    assert configs["ssl.keystore.location"].value.endswith("broker.pem")


def metric(broker: BrokerProcess, name: str) -> float:
    with urllib.request.urlopen(
        f"http://127.0.0.1:{broker.metrics_port()}/metrics", timeout=10
    ) as answer:
        text = answer.read().decode()
    found = re.search(rf"^{name} (\S+)$", text, re.M)
    assert found, f"no {name}"
    return float(found.group(1))


def reauthenticating_broker(data: Path, session_ms: int) -> BrokerProcess:
    """A broker (not started) whose SASL_PLAINTEXT listener logs SCRAM-SHA-256 user
    ``alice`` (password ``alice-secret``) in for sessions of ``session_ms``
    (``connections.max.reauth.ms``), with a PLAINTEXT listener and metrics beside it."""
    data.mkdir(parents=True)
    add_user("alice", "SCRAM-SHA-256", Password("alice-secret"), io.StringIO(), data_dir=data)
    prefix = "listener.name.sasl_plaintext."
    return BrokerProcess(
        data,
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            f"{prefix}sasl.enabled.mechanisms": "SCRAM-SHA-256",
            f"{prefix}scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
            f"{prefix}scram-sha-256.connections.max.reauth.ms": str(session_ms),
            "metrics.http.port": "0",
        },
    )


def test_sessions_are_reauthenticated_before_connections_max_reauth_ms(tmp_path: Path) -> None:
    # KIP-368: with connections.max.reauth.ms the broker tells the client its session's
    # lifetime; librdkafka re-authenticates on the same connection before it ends, and
    # keeps producing through it.
    broker = reauthenticating_broker(tmp_path / "data", 2000).start()
    try:
        errors: list[KafkaError | None] = []
        producer = Producer(
            {
                "bootstrap.servers": f"127.0.0.1:{broker.ports['SASL_PLAINTEXT']}",
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-256",
                "sasl.username": "alice",
                "sasl.password": "alice-secret",
            }
        )
        reauthenticated = "kafka_server_socket_server_metrics_successful_reauthentication_total"
        deadline = time.monotonic() + 60
        while metric(broker, reauthenticated) < 2:
            assert time.monotonic() < deadline, broker.log_text()[-3000:]
            producer.produce("r", b"v", on_delivery=lambda err, _m: errors.append(err))
            producer.flush(10)
            time.sleep(0.2)
        producer.produce("r", b"v", on_delivery=lambda err, _m: errors.append(err))
        assert producer.flush(30) == 0
        assert errors and all(e is None for e in errors), [e for e in errors if e]
        assert metric(broker, "kafka_server_socket_server_metrics_failed_authentication_total") == 0
    finally:
        broker.stop()
