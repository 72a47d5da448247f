"""Dynamic broker configs in a cluster, on real broker processes and a real ZooKeeper: a
cluster default set through one broker reaches every broker, a per-broker override only
its broker, both kept where Kafka's ZooKeeper mode keeps them (``/config/brokers/<default>``
and ``/config/brokers/<id>``, announced under ``/config/changes``), and both survive a
broker's restart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import NewTopic
from kazoo.client import KazooClient

from tests.integration.cluster_harness import ProcessCluster
from tests.raw_client import RawClient, request
from tierlog.protocol import ApiKey

pytestmark = pytest.mark.timeout(180)

DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC = 2, 3, 4


def call(port: int, api: ApiKey, version: int, data: dict[str, Any]) -> Any:
    client = RawClient(port)
    try:
        return client.call(request(api, version, data))
    finally:
        client.close()


def set_config(port: int, name: str, key: str, value: str) -> tuple[int, str | None]:
    """IncrementalAlterConfigs SET on broker resource ``name`` ("": the cluster default)."""
    answer = call(
        port,
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        1,
        {
            "resources": [
                {
                    "resource_type": 4,
                    "resource_name": name,
                    "configs": [{"name": key, "config_operation": 0, "value": value}],
                }
            ],
            "validate_only": False,
        },
    ).responses[0]
    return answer.error_code, answer.error_message


def described(port: int, resource_type: int, name: str, key: str) -> tuple[str | None, int]:
    """(value, source) of ``key`` as the broker at ``port`` describes it."""
    result = call(
        port,
        ApiKey.DESCRIBE_CONFIGS,
        4,
        {
            "resources": [
                {"resource_type": resource_type, "resource_name": name, "configuration_keys": [key]}
            ],
            "include_synonyms": False,
            "include_documentation": False,
        },
    ).results[0]
    assert result.error_code == 0, result.error_message
    (entry,) = result.configs
    return entry.value, entry.config_source


def test_cluster_default_reaches_every_broker_and_an_override_only_its_own(
    tmp_path: Path, zk_connect: str
) -> None:
    cluster = ProcessCluster(tmp_path, zk_connect, 2, {"log.retention.ms": "7200000"}).start()
    try:
        admin = cluster.admin()
        assert admin.create_topics([NewTopic("shared", 1, 2)])["shared"].result(30) is None
        cluster.wait_for_full_isr("shared", 1, 2)
        ports = [b.port for b in cluster.brokers]

        def everywhere(key: str, topic_key: str) -> list[tuple[Any, ...]]:
            return [
                (
                    *described(port, 4, str(n), key),
                    described(port, 2, "shared", topic_key)[0],
                )
                for n, port in enumerate(ports)
            ]

        assert set_config(ports[0], "", "log.retention.ms", "60000") == (0, None)
        cluster.wait_until(
            lambda: (
                everywhere("log.retention.ms", "retention.ms")
                == [("60000", DYNAMIC_DEFAULT, "60000")] * 2
            ),
            "the cluster default on every broker",
        )
        # A per-broker override goes to that broker, and stays there.
        code, message = set_config(ports[0], "1", "log.retention.ms", "30000")
        assert code == 42 and "Unexpected broker id" in (message or "")
        assert set_config(ports[1], "1", "log.retention.ms", "30000") == (0, None)
        assert everywhere("log.retention.ms", "retention.ms") == [
            ("60000", DYNAMIC_DEFAULT, "60000"),
            ("30000", DYNAMIC_BROKER, "30000"),
        ]

        chroot = zk_connect.split("/", 1)[1]
        zk = KazooClient(hosts=zk_connect.split("/", 1)[0])
        zk.start(timeout=10)
        try:
            default, _ = zk.get(f"/{chroot}/config/brokers/<default>")
            assert json.loads(default) == {"version": 1, "config": {"log.retention.ms": "60000"}}
            own, _ = zk.get(f"/{chroot}/config/brokers/1")
            assert json.loads(own) == {"version": 1, "config": {"log.retention.ms": "30000"}}
            changes = sorted(zk.get_children(f"/{chroot}/config/changes"))
            notes = [json.loads(zk.get(f"/{chroot}/config/changes/{c}")[0]) for c in changes]
            entities = [n["entity_path"] for n in notes if n["entity_path"].startswith("brokers")]
            assert entities == ["brokers/<default>", "brokers/1"]
            assert all(n["version"] == 2 for n in notes)
        finally:
            zk.stop()
            zk.close()

        # Both layers are read again by a restarted broker.
        cluster.brokers[1].stop()
        cluster.brokers[1].start(timeout=60)
        ports = [b.port for b in cluster.brokers]
        cluster.wait_until(
            lambda: (
                everywhere("log.retention.ms", "retention.ms")
                == [("60000", DYNAMIC_DEFAULT, "60000"), ("30000", DYNAMIC_BROKER, "30000")]
            ),
            "both layers after a restart",
        )
    finally:
        cluster.stop()


def test_unclean_election_turned_on_as_the_cluster_default_elects_an_offline_partition(
    tmp_path: Path, zk_connect: str
) -> None:
    """``unclean.leader.election.enable`` as a dynamic cluster default (Kafka's
    UncleanLeaderElectionEnable): an offline partition whose only live replica is out of
    sync gets it as leader, without a restart."""
    cluster = ProcessCluster(tmp_path, zk_connect, 2).start()
    try:
        admin = cluster.admin()
        admin.create_topics([NewTopic("lossy", num_partitions=1, replica_assignment=[[0, 1]])])[
            "lossy"
        ].result(30)
        cluster.wait_for_full_isr("lossy", 1, 2)
        cluster.brokers[1].kill()
        cluster.wait_until(
            lambda: list(cluster.partitions("lossy")[0].isrs) == [0], "the ISR to shrink"
        )
        cluster.brokers[0].kill()
        cluster.brokers[1].start(timeout=60)
        port = cluster.brokers[1].port
        cluster.wait_until(
            lambda: set(cluster.admin().list_topics(timeout=5).brokers) == {1}, "broker 1 alone"
        )
        # Offline: its last in-sync replica is gone, and unclean election is off.
        admin = cluster.admin()
        admin.create_topics([NewTopic("probe", num_partitions=1, replica_assignment=[[1]])])[
            "probe"
        ].result(30)
        cluster.wait_until(lambda: cluster.leader_of("probe", 0) == 1, "the controller")
        assert cluster.leader_of("lossy", 0) == -1

        assert set_config(port, "", "unclean.leader.election.enable", "true") == (0, None)
        cluster.wait_until(lambda: cluster.leader_of("lossy", 0) == 1, "the unclean election")
        assert described(port, 4, "1", "unclean.leader.election.enable") == (
            "true",
            DYNAMIC_DEFAULT,
        )
    finally:
        cluster.kill()
