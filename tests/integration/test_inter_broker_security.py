"""Brokers that talk to each other over SASL_SSL (issue 22): a 3-broker ZooKeeper cluster
whose inter-broker listener INTERNAL is SASL_SSL with SCRAM-SHA-512, while clients use
the PLAINTEXT listener. Replica fetchers, AlterPartition to the controller and transaction
markers all go over INTERNAL (the only endpoint a broker registers for the others), so a
full ISR proves they log in. An acks=all producer loses nothing acknowledged when the
leader is SIGKILLed; a broker whose inter-broker password is wrong never gets into the
ISR, and says why in its log once per replica.fetch.backoff.ms, not in a flood. With
``connections.max.reauth.ms`` on INTERNAL, brokers renew their sessions on the
connections they have (KIP-368) instead of being cut off at each session's end."""

from __future__ import annotations

import io
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import NewTopic

from tests.broker.network.test_listener_security import metric
from tests.integration.acked_producer import PARTITIONS, TOPIC, BackgroundProducer
from tests.integration.cluster_harness import ProcessCluster
from tests.integration.test_replication import read_log
from tierlog.security.local_ca import LocalCa
from tierlog.security.password import Password
from tierlog.tools.users import add_user

pytestmark = pytest.mark.timeout(300)

BACKOFF_MS = 200
REFUSED = re.compile(r"cannot log in on the inter-broker listener: SASL SCRAM-SHA-512")


def broker_login(password: str) -> str:
    return (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="broker" password="{password}";'
    )


def secured_cluster(
    tmp_path: Path,
    zk_connect: str,
    passwords: list[str],
    extra: dict[str, str] | None = None,
) -> ProcessCluster:
    """Brokers 0..n-1, broker n logging in with ``passwords[n]`` (the stored one is
    ``broker-secret``); ``extra``: more settings for every broker."""
    ca = LocalCa.create()
    keystore = ca.issue("localhost", organizational_unit="brokers").write_pem_keystore(
        tmp_path / "broker.pem"
    )
    add_user(
        "broker", "SCRAM-SHA-512", Password("broker-secret"), io.StringIO(), zookeeper=zk_connect
    )
    cluster = ProcessCluster(
        tmp_path,
        zk_connect,
        len(passwords),
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL",
            "inter.broker.listener.name": "INTERNAL",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "listener.name.internal.sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "ssl.keystore.location": str(keystore),
            "ssl.truststore.location": str(ca.write_ca(tmp_path / "ca.pem")),
            "replica.fetch.backoff.ms": str(BACKOFF_MS),
            **(extra or {}),
        },
    )
    for broker, password in zip(cluster.brokers, passwords, strict=True):
        broker.overrides["listener.name.internal.scram-sha-512.sasl.jaas.config"] = broker_login(
            password
        )
    return cluster


@pytest.fixture
def cluster(tmp_path: Path, zk_connect: str) -> Iterator[ProcessCluster]:
    c = secured_cluster(tmp_path, zk_connect, ["broker-secret"] * 3).start()
    try:
        yield c
    finally:
        c.kill()


def test_replicates_over_sasl_ssl_and_a_killed_leader_loses_nothing_acknowledged(
    cluster: ProcessCluster,
) -> None:
    admin = cluster.admin()
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[
        TOPIC
    ].result(30)
    cluster.wait_for_full_isr(TOPIC, PARTITIONS, 3)
    with BackgroundProducer(cluster.bootstrap) as producer:
        producer.wait_for_more(300)
        # Followers fetch over SASL_SSL: the ISR stays full under acks=all load.
        cluster.wait_for_full_isr(TOPIC, PARTITIONS, 3)
        victim = cluster.leader_of(TOPIC, 0)
        cluster.brokers[victim].kill()
        producer.wait_for_more(300)
    assert not producer.errors, producer.errors[:3]
    log = read_log(cluster)
    for partition, acked in producer.acked.items():
        kept = {value for _, value in log[partition]}
        lost = set(acked) - kept
        assert not lost, f"partition {partition}: {len(lost)} acknowledged records lost"
    # The killed broker comes back, logs in again and catches up.
    cluster.brokers[victim].start(timeout=60)
    cluster.wait_for_full_isr(TOPIC, PARTITIONS, 3, timeout=60)


def test_transactions_commit_across_brokers_over_sasl_ssl(cluster: ProcessCluster) -> None:
    # The transaction coordinator sends WriteTxnMarkers to the partitions' leaders over
    # INTERNAL: a commit that spans leaders completes only if it logs in to each.
    admin = cluster.admin()
    admin.create_topics([NewTopic("txn", 3, 3)])["txn"].result(30)
    cluster.wait_for_full_isr("txn", 3, 3)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "t1"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for n in range(30):
        producer.produce("txn", b"%d" % n, partition=n % 3)
    producer.commit_transaction(60)
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "reader",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition("txn", p, 0) for p in range(3)])
        got: list[int] = []
        deadline = time.monotonic() + 60
        while len(got) < 30 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(int(message.value()))
    finally:
        consumer.close()
    assert sorted(got) == list(range(30))


def test_a_broker_with_a_wrong_password_never_joins_the_isr(
    tmp_path: Path, zk_connect: str
) -> None:
    cluster = secured_cluster(tmp_path, zk_connect, ["broker-secret", "broker-secret", "nope"])
    cluster.start()
    try:
        admin = cluster.admin()
        # Broker 0 leads; broker 2 follows but cannot log in to fetch.
        admin.create_topics([NewTopic("t", num_partitions=1, replica_assignment=[[0, 1, 2]])])[
            "t"
        ].result(30)
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        errors: list[KafkaError] = []
        for n in range(50):
            producer.produce("t", b"%d" % n, on_delivery=lambda e, _m: e and errors.append(e))
        assert producer.flush(60) == 0 and not errors

        def isr() -> list[int]:
            return sorted(cluster.partitions("t")[0].isrs)

        cluster.wait_until(lambda: isr() == [0, 1], "broker 2 to leave the ISR", timeout=60)
        bad = cluster.brokers[2]
        first = len(REFUSED.findall(bad.log_text()))
        assert first >= 1, bad.log_text()[-3000:]
        started = time.monotonic()
        cluster.wait_until(
            lambda: len(REFUSED.findall(bad.log_text())) >= first + 3, "more refused logins"
        )
        elapsed = time.monotonic() - started
        logged = len(REFUSED.findall(bad.log_text())) - first
        # One line per attempt, attempts a backoff apart: not a flood.
        assert logged <= elapsed / (BACKOFF_MS / 1000) + 3, (logged, elapsed)
        line = REFUSED.search(bad.log_text())
        assert line is not None and "nope" not in bad.log_text()
        # Still out: the leader never saw it fetch.
        assert isr() == [0, 1]
    finally:
        cluster.kill()


def test_mutual_tls_between_brokers(tmp_path: Path, zk_connect: str) -> None:
    # The inter-broker listener requires client certificates: each broker presents its
    # keystore when it connects to another, as Kafka's brokers do.
    ca = LocalCa.create()
    keystore = ca.issue("localhost", organizational_unit="brokers").write_pem_keystore(
        tmp_path / "broker.pem"
    )
    cluster = ProcessCluster(
        tmp_path,
        zk_connect,
        3,
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SSL",
            "inter.broker.listener.name": "INTERNAL",
            "ssl.keystore.location": str(keystore),
            "ssl.truststore.location": str(ca.write_ca(tmp_path / "ca.pem")),
            "listener.name.internal.ssl.client.auth": "required",
        },
    ).start()
    try:
        admin = cluster.admin()
        admin.create_topics([NewTopic("m", 2, 3)])["m"].result(30)
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        for n in range(100):
            producer.produce("m", b"%d" % n, partition=n % 2)
        assert producer.flush(60) == 0
        cluster.wait_for_full_isr("m", 2, 3)
        assert "Failed authentication" not in cluster.brokers[0].log_text()
    finally:
        cluster.kill()


SESSION_MS = 3000
KILLED = "kafka_server_socket_server_metrics_expired_connections_killed_total"
RENEWALS = "kafka_server_socket_server_metrics_successful_reauthentication_total"
FAILURES = "kafka_server_socket_server_metrics_failed_authentication_total"


def test_brokers_renew_their_sessions_on_the_connections_they_have(
    tmp_path: Path, zk_connect: str
) -> None:
    """Replica fetchers, AlterPartition and the other inter-broker channels log in again on
    the same connection before the session's end: over four sessions of replication under
    load, no broker cuts a connection for an ended session, every one renews, the ISR
    stays full."""
    cluster = secured_cluster(
        tmp_path,
        zk_connect,
        ["broker-secret"] * 3,
        {
            "listener.name.internal.scram-sha-512.connections.max.reauth.ms": str(SESSION_MS),
            "metrics.http.port": "0",
        },
    ).start()
    try:
        admin = cluster.admin()
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(30)
        cluster.wait_for_full_isr(TOPIC, PARTITIONS, 3)
        with BackgroundProducer(cluster.bootstrap) as producer:
            producer.wait_for_more(100)
            renewals = [metric(b, RENEWALS) for b in cluster.brokers]
            time.sleep(4 * SESSION_MS / 1000)
            producer.wait_for_more(100)
            cluster.wait_for_full_isr(TOPIC, PARTITIONS, 3, timeout=10)
            after_renewals = [metric(b, RENEWALS) for b in cluster.brokers]
        assert not producer.errors, producer.errors[:3]
        # No connection was cut for a session that ended un-renewed.
        assert [metric(b, KILLED) for b in cluster.brokers] == [0, 0, 0]
        # Each broker leads some partitions, so the others' fetchers renew with it.
        assert all(a >= b + 3 for a, b in zip(after_renewals, renewals, strict=True)), (
            renewals,
            after_renewals,
        )
        assert [metric(b, FAILURES) for b in cluster.brokers] == [0, 0, 0]
    finally:
        cluster.kill()
