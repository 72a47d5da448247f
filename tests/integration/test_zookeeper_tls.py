"""TLS to ZooKeeper (KIP-515's ``zookeeper.ssl.*``) against a real ZooKeeper serving TLS on
its ``secureClientPort`` and asking every client for a certificate: a broker connects with
its PEM keystore (an encrypted key) and truststore, together with its digest identity and
``zookeeper.set.acl``, registers and serves; DescribeConfigs keeps both secrets back. A
session that trusts another CA, or speaks plain TCP to the TLS port, gets no session.
``tierlog users --zk-config-file`` reaches ZooKeeper the same way."""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from kazoo.handlers.threading import KazooTimeoutError

from tests.broker.harness import BrokerProcess
from tierlog.broker.coordination.zk_server import ZooKeeperServer
from tierlog.broker.coordination.zk_session import ZkSession
from tierlog.broker.coordination.zk_tls import ZkTls, zk_tls
from tierlog.security.local_ca import LocalCa
from tierlog.security.password import Password
from tierlog.tools.users import add_user

pytestmark = pytest.mark.timeout(240)

ENTRY = (
    "org.apache.zookeeper.server.auth.DigestLoginModule required "
    'username="tierlog-brokers" password="zk-secret-1";'
)


@dataclass
class SecureZk:
    server: ZooKeeperServer
    broker_tls: dict[str, str]  # the zookeeper.ssl.* keys of a broker or tool
    other_ca: Path


@pytest.fixture(scope="module")
def secure_zk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureZk]:
    tmp = tmp_path_factory.mktemp("zk-tls")
    ca = LocalCa.create()
    server_pem = ca.issue("localhost").write_pem_keystore(tmp / "zk.pem")
    ca_pem = ca.write_ca(tmp / "ca.pem")
    broker_pem = ca.issue("broker", hosts=()).write_pem_keystore(tmp / "broker.pem", "key-pass")
    other_ca = LocalCa.create().write_ca(tmp / "other-ca.pem")
    server = ZooKeeperServer(tmp / "zk", tls=(server_pem, ca_pem)).start()
    try:
        yield SecureZk(
            server,
            {
                "zookeeper.ssl.client.enable": "true",
                "zookeeper.clientCnxnSocket": "org.apache.zookeeper.ClientCnxnSocketNetty",
                "zookeeper.ssl.keystore.location": str(broker_pem),
                "zookeeper.ssl.keystore.password": "key-pass",
                "zookeeper.ssl.truststore.location": str(ca_pem),
            },
            other_ca,
        )
    finally:
        server.close()


def test_a_broker_registers_and_serves_over_tls_to_zookeeper(
    secure_zk: SecureZk, tmp_path: Path
) -> None:
    connect = f"{secure_zk.server.connect_tls}/tls-cluster"
    broker = BrokerProcess(
        tmp_path / "data",
        {
            "zookeeper.connect": connect,
            "zookeeper.set.acl": "true",
            "zookeeper.jaas.config": ENTRY,
            **secure_zk.broker_tls,
        },
    ).start(timeout=60)
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("over-tls", 1, 1)])["over-tls"].result(30)
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        producer.produce("over-tls", b"kept")
        assert producer.flush(30) == 0
        consumer = Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": "g",
                "auto.offset.reset": "earliest",
            }
        )
        try:
            consumer.subscribe(["over-tls"])
            message = None
            for _ in range(60):
                message = consumer.poll(0.5)
                if message is not None and message.error() is None:
                    break
            assert message is not None and message.value() == b"kept"
        finally:
            consumer.close()
        # The broker's registration, read back over TLS by a tool's session.
        tls = zk_tls(secure_zk.broker_tls)
        with ZkSession(connect, tls=tls) as session:
            assert session.kazoo.get_children("/brokers/ids") == ["0"]
        # Both secrets stay back in DescribeConfigs.
        resource = ConfigResource(ConfigResource.Type.BROKER, "0")
        configs = admin.describe_configs([resource])[resource].result(timeout=30)
        for key in ("zookeeper.ssl.keystore.password", "zookeeper.jaas.config"):
            assert configs[key].is_sensitive and configs[key].value is None, key
        assert configs["zookeeper.ssl.client.enable"].value == "true"
    finally:
        broker.stop()


def test_a_session_that_trusts_another_ca_gets_none(secure_zk: SecureZk) -> None:
    tls = zk_tls(
        {**secure_zk.broker_tls, "zookeeper.ssl.truststore.location": str(secure_zk.other_ca)}
    )
    assert isinstance(tls, ZkTls)
    session = ZkSession(secure_zk.server.connect_tls, 2000, tls=tls)
    with pytest.raises(KazooTimeoutError):
        session.start()


def test_plain_tcp_to_the_tls_port_gets_no_session(secure_zk: SecureZk) -> None:
    session = ZkSession(secure_zk.server.connect_tls, 2000)
    with pytest.raises(KazooTimeoutError):
        session.start()


def test_tierlog_users_writes_credentials_over_tls(secure_zk: SecureZk, tmp_path: Path) -> None:
    connect = f"{secure_zk.server.connect_tls}/tls-users"
    config = tmp_path / "zk.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in secure_zk.broker_tls.items()))
    out = io.StringIO()
    add_user(
        "alice", "SCRAM-SHA-256", Password("alice-secret"), out, zookeeper=connect, zk_config=config
    )
    with ZkSession(connect, tls=zk_tls(secure_zk.broker_tls)) as session:
        assert "SCRAM-SHA-256" in session.kazoo.get("/config/users/alice")[0].decode()
