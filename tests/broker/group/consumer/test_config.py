"""Tests for tierlog.broker.group.consumer.config: Kafka's defaults, keys, bounds and
messages."""

from __future__ import annotations

import pytest

from tierlog.broker.group.consumer.config import (
    ConsumerGroupConfig,
    GroupTimeouts,
    MigrationPolicy,
)
from tierlog.util.configdef import ConfigError


def test_defaults_are_kafkas() -> None:
    config = ConsumerGroupConfig.from_properties({"unrelated.key": "x"})
    assert config == ConsumerGroupConfig()
    assert (config.session_timeout_ms, config.heartbeat_interval_ms) == (45_000, 5_000)
    assert config.assignors == ("uniform", "range") and config.default_assignor == "uniform"
    assert config.migration_policy is MigrationPolicy.BIDIRECTIONAL
    assert config.timeouts() == GroupTimeouts(45_000, 5_000)


def test_values_parse_from_properties_strings() -> None:
    config = ConsumerGroupConfig.from_properties(
        {
            "group.consumer.session.timeout.ms": "50000",
            "group.consumer.heartbeat.interval.ms": "3000",
            "group.consumer.min.heartbeat.interval.ms": "1000",
            "group.consumer.max.size": "10",
            "group.consumer.assignors": "range, org.apache.kafka.coordinator.group.assignor."
            "UniformAssignor",
            "group.consumer.migration.policy": "UPGRADE",
        }
    )
    assert (config.session_timeout_ms, config.heartbeat_interval_ms, config.max_size) == (
        50_000,
        3_000,
        10,
    )
    assert config.assignors == ("range", "uniform")
    assert config.migration_policy is MigrationPolicy.UPGRADE
    assert config.migration_policy.upgrade_enabled
    assert not config.migration_policy.downgrade_enabled


@pytest.mark.parametrize(
    ("properties", "key", "reason"),
    [
        ({"group.consumer.assignors": "sticky"}, "group.consumer.assignors", "unknown assignor"),
        (
            {"group.consumer.assignors": "com.acme.MyAssignor"},
            "group.consumer.assignors",
            "need a JVM",
        ),
        ({"group.consumer.assignors": "range,range"}, "group.consumer.assignors", "twice"),
        ({"group.consumer.assignors": ""}, "group.consumer.assignors", "at least one"),
        (
            {"group.consumer.migration.policy": "sideways"},
            "group.consumer.migration.policy",
            "must be one of",
        ),
        ({"group.consumer.max.size": "0"}, "group.consumer.max.size", ">= 1"),
        (
            {"group.consumer.session.timeout.ms": "forty"},
            "group.consumer.session.timeout.ms",
            "expected int",
        ),
        (
            {"group.consumer.session.timeout.ms": "30000"},
            "group.consumer.session.timeout.ms",
            "greater than or equal to group.consumer.min.session.timeout.ms",
        ),
        (
            {"group.consumer.session.timeout.ms": "70000"},
            "group.consumer.session.timeout.ms",
            "less than or equal to group.consumer.max.session.timeout.ms",
        ),
        (
            {"group.consumer.heartbeat.interval.ms": "20000"},
            "group.consumer.heartbeat.interval.ms",
            "less than or equal to",
        ),
        (
            {"group.consumer.max.heartbeat.interval.ms": "1000"},
            "group.consumer.max.heartbeat.interval.ms",
            "greater than or equal to",
        ),
        (
            {
                "group.consumer.min.session.timeout.ms": "1000",
                "group.consumer.session.timeout.ms": "4000",
            },
            "group.consumer.heartbeat.interval.ms",
            "less than group.consumer.session.timeout.ms",
        ),
    ],
)
def test_bad_values_name_the_key_and_the_reason(properties: dict, key: str, reason: str) -> None:
    with pytest.raises(ConfigError) as raised:
        ConsumerGroupConfig.from_properties(properties)
    assert raised.value.key == key
    assert reason in raised.value.reason


def test_group_overrides_within_bounds() -> None:
    config = ConsumerGroupConfig()
    assert config.timeouts(
        {"consumer.session.timeout.ms": "60000", "consumer.heartbeat.interval.ms": 15_000}
    ) == GroupTimeouts(60_000, 15_000)
    with pytest.raises(ConfigError, match=r"consumer\.heartbeat\.interval\.ms") as raised:
        config.timeouts({"consumer.heartbeat.interval.ms": 4_000})
    assert "group.consumer.min.heartbeat.interval.ms" in raised.value.reason
    with pytest.raises(ConfigError) as raised:
        config.timeouts({"consumer.session.timeout.ms": 61_000})
    assert raised.value.key == "consumer.session.timeout.ms"
