"""zk_configs against a real ZooKeeper: entity configs replaced whole and announced by a
change notification naming the entity, for topic overrides and client quotas in Kafka's
layout. Each test runs in its own chroot."""

from __future__ import annotations

import pytest

from tests.integration.zk_clients import TOPIC_ID, ClientFactory
from tierlog.broker.coordination import zk_data
from tierlog.broker.coordination.api import DEFAULT_BROKER_ENTITY, UnknownTopicError
from tierlog.broker.coordination.zk_client import ZkClient

pytestmark = pytest.mark.timeout(20)


def notifications(client: ZkClient) -> list[str]:
    """The entity each change notification names, oldest first."""
    names = sorted(client.kazoo.get_children(zk_data.CONFIG_CHANGES))
    assert all(n.startswith(zk_data.CONFIG_CHANGE_PREFIX) for n in names)
    paths = [zk_data.child_path(zk_data.CONFIG_CHANGES, n) for n in names]
    return [zk_data.decode_config_change(p, client.kazoo.get(p)[0]) for p in paths]


def test_topic_configs_change_and_are_announced(new_client: ClientFactory) -> None:
    a = new_client()
    a.topics.create("orders", {0: [1]}, TOPIC_ID, {})
    a.configs.set_topic("orders", {"cleanup.policy": "compact"})
    assert a.configs.topic("orders") == {"cleanup.policy": "compact"}
    assert notifications(a) == ["topics/orders"]
    with pytest.raises(UnknownTopicError):
        a.configs.set_topic("nope", {})
    assert a.configs.topic("nope") == {}


def test_client_quotas_in_kafkas_layout(new_client: ClientFactory) -> None:
    a, b = new_client(), new_client()
    a.configs.set_client_quotas("clients/app", {"producer_byte_rate": 1048576.0})
    a.configs.set_client_quotas("users/alice", {"consumer_byte_rate": 2048.5})
    a.configs.set_client_quotas("users/alice/clients/etl", {"producer_byte_rate": 10.0})
    # Kafka keeps SCRAM credentials beside a user's quotas: not a quota, left alone.
    b.kazoo.create(
        zk_data.config_entity_path(zk_data.USERS_CONFIG_TYPE, "bob"),
        zk_data.encode_config({"SCRAM-SHA-256": "salt=c2FsdA==,iterations=4096"}),
    )
    assert b.configs.client_quotas() == {
        "clients/app": {"producer_byte_rate": 1048576.0},
        "users/alice": {"consumer_byte_rate": 2048.5},
        "users/alice/clients/etl": {"producer_byte_rate": 10.0},
    }
    data, _ = b.kazoo.get(zk_data.config_entity_path(zk_data.CLIENTS_CONFIG_TYPE, "app"))
    assert zk_data.decode_config_at("/config/clients/app", data) == {
        "producer_byte_rate": "1048576"  # as Kafka writes a whole byte rate
    }
    assert notifications(b) == ["clients/app", "users/alice", "users/alice/clients/etl"]


def test_client_metrics_resources_are_entities_of_their_own(new_client: ClientFactory) -> None:
    a, b = new_client(), new_client()
    assert b.configs.entities(zk_data.CLIENT_METRICS_CONFIG_TYPE) == {}  # no /config/... yet
    a.configs.set_entity(zk_data.CLIENT_METRICS_CONFIG_TYPE, "all", {"metrics": "*"})
    a.configs.set_entity(zk_data.CLIENT_METRICS_CONFIG_TYPE, "none", {})
    assert b.configs.entities(zk_data.CLIENT_METRICS_CONFIG_TYPE) == {"all": {"metrics": "*"}}
    data, _ = b.kazoo.get("/config/client-metrics/all")
    assert zk_data.decode_config_at("/config/client-metrics/all", data) == {"metrics": "*"}
    assert notifications(b) == ["client-metrics/all", "client-metrics/none"]


def test_dynamic_broker_configs_in_kafkas_layout(new_client: ClientFactory) -> None:
    a, b = new_client(), new_client()
    kind, default = zk_data.BROKERS_CONFIG_TYPE, DEFAULT_BROKER_ENTITY
    a.configs.set_entity(kind, default, {"log.retention.ms": "60000"})
    a.configs.set_entity(kind, "1", {"log.cleaner.threads": "2"})
    assert b.configs.entities(kind) == {
        "<default>": {"log.retention.ms": "60000"},
        "1": {"log.cleaner.threads": "2"},
    }
    # Where and how Kafka's ZooKeeper mode keeps them (AdminZkClient.changeBrokerConfig).
    data, _ = b.kazoo.get("/config/brokers/<default>")
    assert data == b'{"version":1,"config":{"log.retention.ms":"60000"}}'
    assert notifications(b) == ["brokers/<default>", "brokers/1"]
