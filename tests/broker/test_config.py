from __future__ import annotations

from pathlib import Path

import pytest

from tierlog.broker.config import BrokerConfig
from tierlog.util.configdef import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def test_example_server_properties_parses() -> None:
    config = BrokerConfig.load(ROOT / "configs" / "server.properties")
    assert config.broker_id == 0
    assert config.single_node
    assert config.listeners[0].port == 9092
    assert config.log_config.segment_ms == 168 * 3600 * 1000


def test_log_keys_become_topic_defaults() -> None:
    config = BrokerConfig(
        {
            "log.segment.bytes": "1048576",
            "log.retention.minutes": "5",
            "log.flush.interval.messages": "100",
            "log.flush.interval.ms": "250",
            "message.max.bytes": "2000",
            "log.roll.ms": "60000",
        }
    )
    log = config.log_config
    assert (log.segment_bytes, log.retention_ms, log.flush_messages, log.flush_ms) == (
        1 << 20,
        300_000,
        100,
        250,
    )
    assert (log.max_message_bytes, log.segment_ms) == (2000, 60_000)
    assert config.topic_default_source("retention.ms")
    assert not config.topic_default_source("retention.bytes")


def test_retention_ms_wins_over_minutes_and_hours() -> None:
    config = BrokerConfig(
        {"log.retention.ms": "10", "log.retention.minutes": "1", "log.retention.hours": "1"}
    )
    assert config.log_config.retention_ms == 10
    assert BrokerConfig({"log.retention.hours": "-1"}).log_config.retention_ms == -1


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        ("log.dirz", "/tmp", "unknown configuration key"),
        ("num.partitions", "0", "must be >= 1"),
        ("auto.create.topics.enable", "yes", "expected bool"),
        ("listeners", "SSL:/127.0.0.1:9093", "expected NAME://host:port"),
        ("listeners", "PLAINTEXT://nohost", "expected NAME://host:port"),
        ("log.segment.bytes", "10", "must be >= 14"),
        ("replica.selector.class", "com.example.Nearest", "must be one of"),
        ("log.scrubber.pass.interval.ms", "0", "must be >= 1"),
    ],
)
def test_bad_config_names_the_key_and_the_reason(key: str, value: str, reason: str) -> None:
    with pytest.raises(ConfigError) as exc:
        BrokerConfig({key: value})
    assert exc.value.key == key
    assert reason in str(exc.value)


def test_node_id_is_an_alias_of_broker_id() -> None:
    assert BrokerConfig({"node.id": "7"}).broker_id == 7


def test_transaction_keys_parse_and_bad_values_name_the_key() -> None:
    config = BrokerConfig(
        {"transactional.id.expiration.ms": "1000", "transaction.max.timeout.ms": "60000"}
    )
    assert config["transactional.id.expiration.ms"] == 1000
    assert config["transaction.state.log.num.partitions"] == 50
    with pytest.raises(ConfigError) as exc:
        BrokerConfig({"transaction.state.log.min.isr": "0"})
    assert exc.value.key == "transaction.state.log.min.isr"


def test_cluster_example_configs_parse_and_differ_where_they_must() -> None:
    configs = [
        BrokerConfig.load(path)
        for path in sorted((ROOT / "configs" / "cluster").glob("*.properties"))
    ]
    assert len(configs) == 3
    assert [c.broker_id for c in configs] == [0, 1, 2]
    assert len({c.listeners[0].port for c in configs}) == 3
    assert len({str(c.log_dirs) for c in configs}) == 3
    assert len({c.remote_storage_url for c in configs}) == 1  # one remote root for all
    assert all(not c.single_node and c["default.replication.factor"] == 3 for c in configs)
