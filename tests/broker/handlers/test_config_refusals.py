"""A Kafka topic key tierlog refuses is refused by CreateTopics and IncrementalAlterConfigs
with INVALID_CONFIG naming the key and the reason (issue 23 item 5), through librdkafka."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from tierlog.broker.embedded import EmbeddedBroker

pytestmark = pytest.mark.timeout(60)


def test_refused_topic_keys_answer_invalid_config_with_the_reason(tmp_path: Path) -> None:
    with EmbeddedBroker({"log.dirs": str(tmp_path)}) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        created = admin.create_topics(
            [NewTopic("jittery", 1, 1, config={"segment.jitter.ms": "100"})]
        )
        with pytest.raises(KafkaException) as refused:
            created["jittery"].result(10)
        error = refused.value.args[0]
        assert error.code() == 40  # INVALID_CONFIG
        assert "segment.jitter.ms" in error.str() and "without jitter" in error.str()

        admin.create_topics([NewTopic("plain", 1, 1)])["plain"].result(10)
        resource = ConfigResource(
            ConfigResource.Type.TOPIC,
            "plain",
            incremental_configs=[
                ConfigEntry("preallocate", "true", incremental_operation=AlterConfigOpType.SET)
            ],
        )
        altered = admin.incremental_alter_configs([resource])
        with pytest.raises(KafkaException) as refused:
            altered[resource].result(10)
        error = refused.value.args[0]
        assert error.code() == 40
        assert "preallocate" in error.str() and "not preallocated" in error.str()
