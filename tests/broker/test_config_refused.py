"""Every Kafka 4.4 broker key is honoured (BROKER_CONFIG) or refused with a reason
(config_refused.py); a refused key's error names the reason (issue 23 item 5)."""

from __future__ import annotations

import pytest

from tierlog.broker.config import BROKER_CONFIG, BrokerConfig
from tierlog.broker.config_refused import BROKER_REFUSED, KAFKA_BROKER_KEYS, refusal
from tierlog.util.configdef import ConfigError


def test_every_kafka_broker_key_is_honoured_or_refused_never_both() -> None:
    unresolved = sorted(
        k for k in KAFKA_BROKER_KEYS if k not in BROKER_CONFIG.keys and not refusal(k)
    )
    assert unresolved == []
    both = sorted(k for k in KAFKA_BROKER_KEYS if k in BROKER_CONFIG.keys and refusal(k))
    assert both == [], "a key tierlog honours must not have a refusal"


def test_every_rule_names_a_kafka_key() -> None:
    for rule in BROKER_REFUSED:
        if rule.endswith("."):
            assert any(k.startswith(rule) for k in KAFKA_BROKER_KEYS), rule
        else:
            assert rule in KAFKA_BROKER_KEYS, rule


def test_a_rule_names_a_key_or_a_prefix() -> None:
    assert refusal("group.coordinator.threads") == BROKER_REFUSED["group.coordinator.threads"]
    assert refusal("sasl.kerberos.service.name") == BROKER_REFUSED["sasl.kerberos."]
    assert refusal("ssl.keystore.location") is None  # honoured (issue 22, listeners)
    assert refusal("group.coordinator.rebalance.protocols") is None  # honoured (KIP-848)
    assert refusal("no.such.key") is None


@pytest.mark.parametrize(
    ("key", "words"),
    [
        ("num.network.threads", "event loop"),
        ("ssl.provider", "JSSE"),
        ("sasl.login.refresh.window.factor", "JAAS entry"),
        ("process.roles", "KRaft"),
        ("group.share.max.size", "KIP-932"),
        ("replication.quota.window.num", "token bucket"),
    ],
)
def test_a_refused_key_in_server_properties_names_its_reason(key: str, words: str) -> None:
    with pytest.raises(ConfigError) as refused:
        BrokerConfig({key: "1"})
    assert refused.value.key == key
    assert "not supported by tierlog" in refused.value.reason and words in refused.value.reason


def test_an_unknown_key_is_still_unknown() -> None:
    with pytest.raises(ConfigError, match="unknown configuration key"):
        BrokerConfig({"num.netwrok.threads": "3"})


def test_keys_honoured_for_the_audit() -> None:
    config = BrokerConfig(
        {
            "log.local.retention.ms": "60000",
            "log.local.retention.bytes": "1048576",
            "producer.id.expiration.check.interval.ms": "1000",
            "max.request.partition.size.limit": "10",
        }
    )
    # The broker defaults of topics' local.retention.* (Kafka's LogConfig mapping).
    assert config.log_config.local_retention_ms == 60_000
    assert config.log_config.local_retention_bytes == 1_048_576
    assert config.topic_default_source("local.retention.ms")
    assert config["producer.id.expiration.check.interval.ms"] == 1000
    assert config["max.request.partition.size.limit"] == 10


def test_the_config_reference_lists_every_refusal_with_its_reason() -> None:
    from tierlog.tools import config_reference

    page = config_reference.render()
    refused = sorted(k for k in KAFKA_BROKER_KEYS if k not in BROKER_CONFIG.keys)
    for key in refused:
        assert f"| `{key}` |" in page, key
    assert "| `num.io.threads` | one asyncio event loop serves a broker" in page
    assert "| `preallocate` | segment files are not preallocated" in page
