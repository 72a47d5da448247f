"""The value format of leader/follower.replication.throttled.replicas (Kafka's
ThrottledReplicaListValidator and TopicConfigHandler.parseThrottledPartitions), as the topic
config table checks it and the replication quotas read it."""

from __future__ import annotations

import pytest

from tierlog.local.config import LogConfig
from tierlog.local.throttled_replicas import is_throttled, throttled_partitions
from tierlog.util.configdef import ConfigError


@pytest.mark.parametrize("value", ["", "*", "0:1", "0:1,1:2, 2:3", "10:100,0:0"])
def test_kafkas_formats_are_accepted(value: str) -> None:
    config = LogConfig.from_props({"leader.replication.throttled.replicas": value})
    assert config.leader_replication_throttled_replicas == tuple(
        v.strip() for v in value.split(",") if v.strip()
    )
    assert config.to_props()["leader.replication.throttled.replicas"] == ",".join(
        config.leader_replication_throttled_replicas
    )


@pytest.mark.parametrize("value", ["0", "a:1", "0:1,*", "*,*", "0:1:2", "-1:2", "0-1"])
def test_other_values_are_refused_naming_the_key_and_the_format(value: str) -> None:
    with pytest.raises(ConfigError) as refused:
        LogConfig.from_props({"follower.replication.throttled.replicas": value})
    assert refused.value.key == "follower.replication.throttled.replicas"
    assert (
        "must be the literal '*' or a list of replicas in the following format: "
        "[partitionId]:[brokerId],[partitionId]:[brokerId],..."
    ) in str(refused.value)


def test_each_broker_reads_the_pairs_naming_it() -> None:
    value = ("0:1", "0:2", "1:2", "3:1")
    assert throttled_partitions(value, 1) == {0, 3}
    assert throttled_partitions(value, 2) == {0, 1}
    assert throttled_partitions(value, 3) == frozenset()
    assert throttled_partitions(("*",), 7) is None
    assert is_throttled(value, 3, 1) and not is_throttled(value, 1, 1)
    assert is_throttled(("*",), 5, 9)
    assert not is_throttled((), 0, 1)
