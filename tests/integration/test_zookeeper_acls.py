"""``zookeeper.set.acl=true`` against a real ZooKeeper and a real broker process: the
broker authenticates with its digest identity (``zookeeper.jaas.config``) and creates
Kafka's ACLs, so an unauthenticated ZooKeeper client can read the cluster's layout but
change nothing, and cannot read SCRAM credentials at all; the broker itself works as
before, and ``tierlog users`` writes credentials given the brokers' identity."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import NewTopic
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import Permissions

from tests.cli import one_line_failure
from tests.integration.cluster_harness import ProcessCluster
from tests.tools.cli import tierlog

pytestmark = pytest.mark.timeout(180)

ENTRY = (
    "org.apache.zookeeper.server.auth.DigestLoginModule required "
    'username="tierlog-brokers" password="zk-secret-1";'
)
SECURE = {"zookeeper.set.acl": "true", "zookeeper.jaas.config": ENTRY}


@pytest.fixture
def cluster(tmp_path: Path, zk_connect: str) -> Iterator[ProcessCluster]:
    c = ProcessCluster(tmp_path, zk_connect, 1, SECURE).start()
    try:
        yield c
    finally:
        c.kill()


@contextlib.contextmanager
def zk_client(zk_connect: str, auth: str | None = None) -> Iterator[KazooClient]:
    """A ZooKeeper client, anonymous or with a digest ``user:password``."""
    client = KazooClient(hosts=zk_connect, auth_data=[("digest", auth)] if auth else None)
    client.start(timeout=15)
    try:
        yield client
    finally:
        client.stop()
        client.close()


@pytest.fixture
def anonymous(zk_connect: str) -> Iterator[KazooClient]:
    with zk_client(zk_connect) as client:
        yield client


@pytest.fixture
def broker_identity(zk_connect: str) -> Iterator[KazooClient]:
    with zk_client(zk_connect, "tierlog-brokers:zk-secret-1") as client:
        yield client


def schemes(acls: list) -> dict[str, int]:  # type: ignore[type-arg]
    return {f"{acl.id.scheme}:{acl.id.id.split(':')[0]}": acl.perms for acl in acls}


def test_znodes_are_readable_by_all_and_writable_only_by_the_brokers(
    cluster: ProcessCluster, anonymous: KazooClient, broker_identity: KazooClient
) -> None:
    admin = cluster.admin()
    admin.create_topics([NewTopic("guarded", 2, 1)], operation_timeout=60)["guarded"].result(60)
    cluster.wait_for_full_isr("guarded", 2, 1)
    # The broker works: what it acknowledges can be read back.
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for n in range(10):
        producer.produce("guarded", b"%d" % n, partition=n % 2)
    assert producer.flush(30) == 0
    consumer = Consumer(
        {"bootstrap.servers": cluster.bootstrap, "group.id": "g", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe(["guarded"])
    got: set[bytes] = set()
    for _ in range(60):
        message = consumer.poll(1)
        if message is not None and message.error() is None:
            got.add(message.value())
        if len(got) == 10:
            break
    consumer.close()
    assert got == {b"%d" % n for n in range(10)}

    # Kafka's ACLs on what the broker created: a topic (a multi's create), a partition
    # state (the controller's fenced multi), its registration (ephemeral).
    for path in (
        "/brokers/topics/guarded",
        "/brokers/topics/guarded/partitions/0/state",
        "/brokers/ids/0",
        "/controller",
    ):
        acls, _ = anonymous.get_acls(path)
        assert schemes(acls) == {
            "digest:tierlog-brokers": Permissions.ALL,
            "world:anyone": Permissions.READ,
        }, path
        anonymous.get(path)  # readable
    with pytest.raises(NoAuthError):
        anonymous.delete("/brokers/topics/guarded", recursive=True)
    with pytest.raises(NoAuthError):
        anonymous.set("/brokers/topics/guarded/partitions/0/state", b"{}")
    with pytest.raises(NoAuthError):
        anonymous.create("/admin/delete_topics/guarded")
    # Credentials and dynamic broker configs are not even readable.
    for path in ("/config/users", "/config/brokers"):
        acls, _ = broker_identity.get_acls(path)
        assert schemes(acls) == {"digest:tierlog-brokers": Permissions.ALL}, path
        with pytest.raises(NoAuthError):
            anonymous.get_children(path)
        with pytest.raises(NoAuthError):
            anonymous.get_acls(path)  # ZooKeeper asks READ for that too


def test_tierlog_users_writes_credentials_with_the_brokers_identity(
    cluster: ProcessCluster,
    anonymous: KazooClient,
    broker_identity: KazooClient,
    tmp_path: Path,
    zk_connect: str,
) -> None:
    password = tmp_path / "alice.password"
    password.write_text("alice-pw-77\n")
    args = ["users", "add", "alice", "--mechanism", "SCRAM-SHA-256"]
    args += ["--password-file", str(password), "--zookeeper", zk_connect]
    refused = tierlog(*args)
    assert "not authorized for /config/users" in one_line_failure(refused)
    properties = tmp_path / "zk.properties"
    properties.write_text(
        "zookeeper.set.acl=true\nzookeeper.jaas.config=" + ENTRY.replace("\\", "\\\\") + "\n"
    )
    added = tierlog(*args, "--zk-config-file", str(properties))
    assert added.returncode == 0, added.stderr
    acls, _ = broker_identity.get_acls("/config/users/alice")
    assert schemes(acls) == {"digest:tierlog-brokers": Permissions.ALL}
    assert b"SCRAM-SHA-256" in broker_identity.get("/config/users/alice")[0]
    with pytest.raises(NoAuthError):
        anonymous.get("/config/users/alice")
    listed = tierlog(
        "users", "list", "--zookeeper", zk_connect, "--zk-config-file", str(properties)
    )
    assert listed.returncode == 0 and "alice" in listed.stdout, listed.stderr
