"""Client-metrics subscriptions: Kafka's keys and bounds, matching, and subscription ids."""

from __future__ import annotations

import uuid

import pytest

from tierlog.broker.client_metrics.subscriptions import (
    ClientInfo,
    parse_subscription,
    subscription_id,
    target_for,
)
from tierlog.util.configdef import ConfigError

JAVA = ClientInfo("perf-1", "apache-kafka-java", "4.4.0", "127.0.0.1", 50123)
RDKAFKA = ClientInfo("rd-1", "librdkafka", "2.16.0", "10.0.0.9", 40000)
ID = uuid.UUID("9d7423db-7c3c-4a00-b889-631bdd19e19f")


def test_defaults_are_kafkas() -> None:
    sub = parse_subscription("all", {"metrics": "*"})
    assert sub.interval_ms == 300_000
    assert sub.metrics == frozenset({"*"}) and sub.match == ()


@pytest.mark.parametrize(
    ("configs", "key"),
    [
        ({"interval.ms": "99"}, "interval.ms"),
        ({"interval.ms": "3600001"}, "interval.ms"),
        ({"match": "client_id"}, "match"),
        ({"match": "client_colour=blue"}, "match"),
        ({"match": "client_id=(unclosed"}, "match"),
        ({"colour": "blue"}, "colour"),
    ],
)
def test_bad_configs_name_the_key(configs: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_subscription("s", configs)
    assert err.value.key == key


def test_a_client_matches_only_if_every_pattern_matches_whole() -> None:
    subs = {
        "java": parse_subscription(
            "java",
            {
                "metrics": "org.apache.kafka.producer.",
                "interval.ms": "1000",
                "match": "client_software_name=apache-kafka-java,client_id=perf-.*",
            },
        ),
        "partial": parse_subscription("partial", {"metrics": "x.", "match": "client_id=perf"}),
    }
    java = target_for(subs, ID, JAVA)
    assert java.metrics == frozenset({"org.apache.kafka.producer."})
    assert java.interval_ms == 1000
    other = target_for(subs, ID, RDKAFKA)
    assert other.metrics == frozenset() and other.interval_ms == 300_000


def test_several_subscriptions_give_the_union_at_the_shortest_interval() -> None:
    subs = {
        "a": parse_subscription(
            "a", {"metrics": "org.apache.kafka.producer.", "interval.ms": "5000"}
        ),
        "b": parse_subscription(
            "b", {"metrics": "org.apache.kafka.consumer.", "interval.ms": "2000"}
        ),
    }
    target = target_for(subs, ID, JAVA)
    assert target.metrics == {"org.apache.kafka.producer.", "org.apache.kafka.consumer."}
    assert target.interval_ms == 2000
    subs["all"] = parse_subscription("all", {"metrics": "*", "interval.ms": "60000"})
    assert target_for(subs, ID, JAVA).metrics == {"*"}  # all means all, nothing else


def test_the_subscription_id_changes_exactly_with_what_the_client_must_send() -> None:
    one = subscription_id(frozenset({"a.", "b."}), 1000, ID)
    assert one == subscription_id(frozenset({"b.", "a."}), 1000, ID)
    assert one != subscription_id(frozenset({"a."}), 1000, ID)
    assert one != subscription_id(frozenset({"a.", "b."}), 2000, ID)
    assert one != subscription_id(frozenset({"a.", "b."}), 1000, uuid.uuid4())
    assert -(2**31) <= one < 2**31
