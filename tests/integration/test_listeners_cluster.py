"""A 3-broker cluster (real ZooKeeper) with an extra SASL_SSL client listener while
inter-broker traffic stays on PLAINTEXT (issue 22, stage 3a): it replicates, every broker
registers both endpoints as Kafka's ``/brokers/ids/<id>`` JSON does, Metadata on each
listener names every broker's address on that listener (KIP-103), and SCRAM users stored
in ZooKeeper by ``tierlog users`` log in. A partition whose leader lacks the client's
listener is answered LISTENER_NOT_FOUND, as Kafka answers it."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker.test_admin import metadata
from tests.integration.cluster_harness import ProcessCluster
from tests.raw_client import RawClient
from tierlog.protocol.errors import ErrorCode
from tierlog.security.local_ca import LocalCa
from tierlog.security.password import Password
from tierlog.tools.users import add_user

pytestmark = pytest.mark.timeout(360)

SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"


@pytest.fixture
def secured_cluster(tmp_path: Path, zk_connect: str) -> Iterator[tuple[ProcessCluster, Path]]:
    ca = LocalCa.create()
    ca_path = ca.write_ca(tmp_path / "ca.pem")
    keystore = ca.issue("localhost").write_pem_keystore(tmp_path / "broker.pem")
    add_user("etl", "SCRAM-SHA-512", Password("etl-secret"), io.StringIO(), zookeeper=zk_connect)
    cluster = ProcessCluster(
        tmp_path,
        zk_connect,
        3,
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
            "inter.broker.listener.name": "PLAINTEXT",
            "ssl.keystore.location": str(keystore),
            "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
        },
    ).start()
    try:
        yield cluster, ca_path
    finally:
        cluster.stop()


def test_a_sasl_ssl_client_listener_beside_plaintext_inter_broker_replicates(
    secured_cluster: tuple[ProcessCluster, Path],
) -> None:
    cluster, ca_path = secured_cluster
    secure = {
        "bootstrap.servers": ",".join(f"127.0.0.1:{b.ports['SASL_SSL']}" for b in cluster.brokers),
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "etl",
        "sasl.password": "etl-secret",
        "ssl.ca.location": str(ca_path),
    }
    # Metadata on each listener names every broker's address on that listener.
    sasl_ports = sorted(b.ports["SASL_SSL"] for b in cluster.brokers)
    plain_ports = sorted(b.ports["PLAINTEXT"] for b in cluster.brokers)
    seen = AdminClient(secure).list_topics(timeout=30).brokers.values()
    assert sorted(b.port for b in seen) == sasl_ports
    seen = cluster.admin().list_topics(timeout=30).brokers.values()
    assert sorted(b.port for b in seen) == plain_ports

    admin = AdminClient(secure)
    admin.create_topics([NewTopic("orders", 2, 3)])["orders"].result(30)
    cluster.wait_for_full_isr("orders", 2, 3)
    producer = Producer({**secure, "acks": "all"})
    for n in range(200):
        producer.produce("orders", str(n).encode(), partition=n % 2)
    assert producer.flush(60) == 0
    # Replicated over the PLAINTEXT inter-broker listener: every replica stays in sync.
    cluster.wait_for_full_isr("orders", 2, 3)
    consumer = Consumer(
        {**secure, "group.id": "g", "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )
    consumer.subscribe(["orders"])
    got: list[bytes] = []
    try:
        for _ in range(600):
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message.value())
            if len(got) == 200:
                break
    finally:
        consumer.close()
    assert sorted(int(v) for v in got) == list(range(200))

    # Kafka's /brokers/ids/<id> JSON: every endpoint, the protocol map, and the top-level
    # host/port of the PLAINTEXT endpoint (what Kafka's tools read).
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=cluster.zk_connect)
    zk.start(timeout=15)
    try:
        data, _ = zk.get("/brokers/ids/0")
    finally:
        zk.stop()
        zk.close()
    registered = json.loads(data)
    broker = cluster.brokers[0]
    assert registered["endpoints"] == [
        f"PLAINTEXT://127.0.0.1:{broker.ports['PLAINTEXT']}",
        f"SASL_SSL://127.0.0.1:{broker.ports['SASL_SSL']}",
    ]
    assert registered["listener_security_protocol_map"] == {
        "PLAINTEXT": "PLAINTEXT",
        "SASL_SSL": "SASL_SSL",
    }
    assert (registered["host"], registered["port"]) == ("127.0.0.1", broker.ports["PLAINTEXT"])


@pytest.fixture
def uneven_listeners(tmp_path: Path, zk_connect: str) -> Iterator[ProcessCluster]:
    """Broker 0 has an EXTRA listener that broker 1 lacks (a rolling change of listeners
    half done); inter-broker traffic is on PLAINTEXT, which both have."""
    cluster = ProcessCluster(
        tmp_path,
        zk_connect,
        2,
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,EXTRA://127.0.0.1:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTRA:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "offsets.topic.replication.factor": "1",
        },
    )
    cluster.brokers[1].overrides["listeners"] = "PLAINTEXT://127.0.0.1:0"
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def _metadata(port: int, version: int, topic: str) -> Any:
    client = RawClient(port)
    try:
        return metadata(client, version, [topic], create=False)
    finally:
        client.close()


def test_a_leader_without_the_clients_listener_is_listener_not_found(
    uneven_listeners: ProcessCluster,
) -> None:
    cluster = uneven_listeners
    admin = cluster.admin()
    admin.create_topics([NewTopic("split", 2, replica_assignment=[[1], [0]])])["split"].result(30)
    cluster.wait_for_full_isr("split", 2, 1)
    extra = cluster.brokers[0].ports["EXTRA"]
    answer = _metadata(extra, 12, "split")
    # Only the broker that has the listener is named, and broker 1's partition says why it
    # has no leader instead of naming another listener's address (Kafka, Metadata v6+).
    assert [b.node_id for b in answer.brokers] == [0]
    partitions = {p.partition_index: p for p in answer.topics[0].partitions}
    assert partitions[0].error_code == ErrorCode.listener_not_found
    assert partitions[0].leader_id == -1 and partitions[0].leader_epoch >= 0
    assert (partitions[1].error_code, partitions[1].leader_id) == (0, 0)
    # Before v6, Kafka answers LEADER_NOT_AVAILABLE.
    old = _metadata(extra, 5, "split")
    assert old.topics[0].partitions[0].error_code == ErrorCode.leader_not_available
    # On PLAINTEXT, which both brokers have, both leaders are named.
    plain = _metadata(cluster.brokers[0].ports["PLAINTEXT"], 12, "split")
    assert sorted(b.node_id for b in plain.brokers) == [0, 1]
    assert {p.partition_index: p.leader_id for p in plain.topics[0].partitions} == {0: 1, 1: 0}
    assert all(p.error_code == 0 for p in plain.topics[0].partitions)
