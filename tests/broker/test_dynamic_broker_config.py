"""Dynamic broker configs (KIP-226) and broker loggers (KIP-412) on a real single-node
broker, through real clients: confluent-kafka's AdminClient for BROKER resources,
kafka-python's KafkaAdminClient for BROKER_LOGGER ones (librdkafka has no such resource
type). Overrides are kept in the single node's metadata store and survive a restart."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)
from kafka.admin import KafkaAdminClient
from kafka.admin._configs import ConfigResource as KConfigResource
from kafka.admin._configs import ConfigResourceType

from tests.broker.harness import BrokerProcess
from tests.broker.test_admin import describe_topic, outcome
from tests.raw_client import RawClient, request
from tierlog.protocol import ApiKey

pytestmark = pytest.mark.timeout(120)

STATIC = {"log.retention.ms": "7200000"}
SET, DELETE = AlterConfigOpType.SET, AlterConfigOpType.DELETE


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path / "dyn", STATIC).start()
    try:
        yield process
    finally:
        process.stop()


def alter(broker: BrokerProcess, name: str, *ops: tuple[str, str | None, Any], **kw: Any) -> Any:
    """IncrementalAlterConfigs on broker ``name``: (error code, message). librdkafka takes
    only a broker id, so the cluster default ("", ``kafka-configs --entity-default``) goes
    through kafka-python."""
    if not name:
        return alter_raw(broker, "", *ops, **kw)
    resource = ConfigResource(
        "broker",
        name,
        incremental_configs=[ConfigEntry(k, v, incremental_operation=op) for k, v, op in ops],
    )
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    return outcome(client.incremental_alter_configs([resource], **kw)[resource])


def alter_raw(
    broker: BrokerProcess,
    name: str,
    *ops: tuple[str, str | None, Any],
    validate_only: bool = False,
) -> tuple[int, str]:
    """IncrementalAlterConfigs v1 as Kafka's Java admin sends it (the cluster default is
    resource name "", as ``kafka-configs --entity-default`` sends it)."""
    raw = RawClient(broker.port)
    try:
        body = request(
            ApiKey.INCREMENTAL_ALTER_CONFIGS,
            1,
            {
                "resources": [
                    {
                        "resource_type": 4,
                        "resource_name": name,
                        "configs": [
                            {"name": k, "config_operation": int(op.value), "value": v}
                            for k, v, op in ops
                        ],
                    }
                ],
                "validate_only": validate_only,
            },
        )
        answer = raw.call(body).responses[0]
    finally:
        raw.close()
    return answer.error_code, answer.error_message or ""


def describe_broker(client: AdminClient, name: str = "0") -> dict[str, ConfigEntry]:
    """librdkafka asks for the synonyms too."""
    resource = ConfigResource("broker", name)
    found: dict[str, ConfigEntry] = client.describe_configs([resource])[resource].result(10)
    return found


def describe_raw(broker: BrokerProcess, name: str) -> dict[str, Any]:
    """DescribeConfigs v4 with synonyms as Kafka's Java admin sends it (the cluster default
    "" too, which librdkafka cannot name): config name -> entry."""
    raw = RawClient(broker.port)
    try:
        body = request(
            ApiKey.DESCRIBE_CONFIGS,
            4,
            {
                "resources": [
                    {"resource_type": 4, "resource_name": name, "configuration_keys": None}
                ],
                "include_synonyms": True,
                "include_documentation": False,
            },
        )
        result = raw.call(body).results[0]
    finally:
        raw.close()
    assert result.error_code == 0, result.error_message
    return {c.name: c for c in result.configs}


def describe_default(broker: BrokerProcess) -> dict[str, tuple[str | None, int]]:
    """The cluster default resource, as ``kafka-configs --entity-default --describe``
    asks for it: name -> (value, source)."""
    return {n: (c.value, c.config_source) for n, c in describe_raw(broker, "").items()}


def synonyms(entry: Any) -> list[tuple[str, str | None, str]]:
    """(name, value, source) of a raw entry's synonyms. (confluent-kafka keys them by
    name, so a key set at two levels shows once there.)"""
    return [(s.name, s.value, ConfigSource(s.source).name) for s in entry.synonyms]


def segment_files(broker: BrokerProcess, topic: str) -> list[Path]:
    return sorted((broker.data_dir / f"{topic}-0").glob("*.log"))


def test_cluster_default_and_broker_override_in_kafkas_precedence(broker: BrokerProcess) -> None:
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    topics = [
        NewTopic("follows", 1, 1),
        NewTopic("own", 1, 1, config={"retention.ms": "999999"}),
    ]
    for future in client.create_topics(topics).values():
        assert outcome(future) == (0, "")

    assert alter(broker, "", ("log.retention.ms", "60000", SET)) == (0, "")
    # A topic without its own override follows the new cluster default at once.
    follows = describe_topic(client, "follows")["retention.ms"]
    assert (follows.value, follows.source) == (
        "60000",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value,
    )
    assert describe_topic(client, "own")["retention.ms"].value == "999999"
    entry = describe_broker(client)["log.retention.ms"]
    assert entry.value == "60000" and not entry.is_read_only
    assert entry.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    assert synonyms(describe_raw(broker, "0")["log.retention.ms"]) == [
        ("log.retention.ms", "60000", "DYNAMIC_DEFAULT_BROKER_CONFIG"),
        ("log.retention.ms", "7200000", "STATIC_BROKER_CONFIG"),
        ("log.retention.hours", "168", "DEFAULT_CONFIG"),
    ]

    # This broker's own override wins over the cluster default.
    assert alter(broker, "0", ("log.retention.ms", "30000", SET)) == (0, "")
    entry = describe_broker(client)["log.retention.ms"]
    assert (entry.value, entry.source) == ("30000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    assert [s[2] for s in synonyms(describe_raw(broker, "0")["log.retention.ms"])] == [
        "DYNAMIC_BROKER_CONFIG",
        "DYNAMIC_DEFAULT_BROKER_CONFIG",
        "STATIC_BROKER_CONFIG",
        "DEFAULT_CONFIG",
    ]
    assert describe_topic(client, "follows")["retention.ms"].value == "30000"
    # The cluster default resource lists only what is set at that level.
    assert describe_default(broker) == {
        "log.retention.ms": ("60000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    }

    # Applied to the logs themselves, not only described: smaller segments from now on.
    assert alter(broker, "", ("log.segment.bytes", "16384", SET)) == (0, "")
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for n in range(60):
        producer.produce("follows", value=b"x" * 1000, key=str(n).encode())
        producer.flush(10)
    assert len(segment_files(broker, "follows")) >= 3

    # Deleting the per-broker override falls back to the cluster default; kept over a restart.
    assert alter(broker, "0", ("log.retention.ms", None, DELETE)) == (0, "")
    broker.stop()
    broker.start()
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    entry = describe_broker(client)["log.retention.ms"]
    assert (entry.value, entry.source) == (
        "60000",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value,
    )
    assert describe_topic(client, "follows")["retention.ms"].value == "60000"


def test_message_max_bytes_applies_at_once(broker: BrokerProcess) -> None:
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert outcome(client.create_topics([NewTopic("sized", 1, 1)])["sized"]) == (0, "")
    assert alter(broker, "", ("message.max.bytes", "2000", SET)) == (0, "")
    errors: list[KafkaError | None] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.max.bytes": 100000})
    producer.produce("sized", value=b"y" * 5000, on_delivery=lambda err, _m: errors.append(err))
    producer.flush(10)
    assert errors and errors[0] is not None
    assert errors[0].code() == KafkaError.MSG_SIZE_TOO_LARGE


def test_refused_alterations_store_nothing(broker: BrokerProcess) -> None:
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    code, message = alter(broker, "0", ("log.dirs", "/elsewhere", SET))
    assert code == KafkaError.INVALID_REQUEST
    assert "Cannot update these configs dynamically: Set(log.dirs)" in message
    code, message = alter(broker, "0", ("no.such.key", "1", SET))
    assert code == KafkaError.INVALID_CONFIG and "no.such.key" in message
    code, message = alter(
        broker, "", ("log.cleaner.threads", "2", SET), ("log.retention.ms", "soon", SET)
    )
    assert code == KafkaError.INVALID_CONFIG and "log.retention.ms" in message
    # librdkafka sends a broker resource to that broker: the wire, as to a wrong broker.
    code, message = alter_raw(broker, "7", ("log.retention.ms", "1000", SET))
    assert code == KafkaError.INVALID_REQUEST and "Unexpected broker id" in message
    # validate_only checks and stores nothing.
    assert alter(broker, "", ("log.cleaner.threads", "2", SET), validate_only=True) == (0, "")
    entry = describe_broker(client)["log.cleaner.threads"]
    assert (entry.value, entry.source) == ("1", ConfigSource.DEFAULT_CONFIG.value)
    assert describe_default(broker) == {}
    # The remote tier's upload rate, told to the throttle the store paces uploads with.
    rate = ("remote.log.manager.copy.max.bytes.per.second", "1048576", SET)
    assert alter(broker, "0", rate) == (0, "")
    assert "reconfigured remote copy and fetch rates" in broker.log_text()
    # Deleting what is not set is success whatever the key (Kafka's reassignment tool).
    assert alter(broker, "0", ("replica.alter.log.dirs.io.max.bytes.per.second", None, DELETE)) == (
        0,
        "",
    )
    # The replication throttles' rates (KIP-73), as kafka-configs --entity-name 0 sets them.
    throttle = ("leader.replication.throttled.rate", "1000000", SET)
    assert alter(broker, "0", throttle) == (0, "")
    assert "reconfigured replication throttles: leader.replication.throttled.rate" in (
        broker.log_text()
    )
    entry = describe_broker(client)["leader.replication.throttled.rate"]
    assert (entry.value, entry.source) == ("1000000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    code, message = alter(broker, "0", ("follower.replication.throttled.rate", "-5", SET))
    assert code == KafkaError.INVALID_CONFIG and "follower.replication.throttled.rate" in message
    assert alter(broker, "0", ("leader.replication.throttled.rate", None, DELETE)) == (0, "")
    # And the log-dir move rate the reassignment tool sets beside them.
    moves = ("replica.alter.log.dirs.io.max.bytes.per.second", "2000000", SET)
    assert alter(broker, "", moves) == (0, "")
    assert "replication throttles: replica.alter.log.dirs.io.max.bytes.per.second" in (
        broker.log_text()
    )


def active_producers(broker: BrokerProcess, topic: str) -> int:
    """How many producers DescribeProducers names on partition 0 of ``topic``."""
    raw = RawClient(broker.port)
    try:
        body = {"topics": [{"name": topic, "partition_indexes": [0]}]}
        (answer,) = raw.call(request(ApiKey.DESCRIBE_PRODUCERS, 0, body)).topics[0].partitions
    finally:
        raw.close()
    assert int(answer.error_code) == 0, answer
    return len(answer.active_producers)


def test_producer_expiry_and_remote_read_bound_apply_at_once(tmp_path: Path) -> None:
    # producer.id.expiration.ms (Kafka's DynamicProducerStateManagerConfig): an idle
    # idempotent producer kept under the default (one day) is forgotten at the next check
    # once the bound drops.
    remote = tmp_path / "remote"
    remote.mkdir()
    overrides = {
        "producer.id.expiration.check.interval.ms": "200",
        "remote.log.storage.url": remote.as_uri(),
    }
    process = BrokerProcess(tmp_path / "expiry", overrides).start()
    try:
        client = AdminClient({"bootstrap.servers": process.bootstrap})
        assert outcome(client.create_topics([NewTopic("idem", 1, 1)])["idem"]) == (0, "")
        producer = Producer({"bootstrap.servers": process.bootstrap, "enable.idempotence": True})
        producer.produce("idem", value=b"once")
        assert producer.flush(10) == 0
        time.sleep(1.0)  # five checks
        assert active_producers(process, "idem") == 1
        assert alter(process, "", ("producer.id.expiration.ms", "300", SET)) == (0, "")
        deadline = time.monotonic() + 10
        while active_producers(process, "idem") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert active_producers(process, "idem") == 0
        # remote.fetch.max.wait.ms, told to the remote tier's reads.
        assert alter(process, "0", ("remote.fetch.max.wait.ms", "2000", SET)) == (0, "")
        entry = describe_broker(client)["remote.fetch.max.wait.ms"]
        assert (entry.value, entry.source) == ("2000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
        log_text = process.log_text()
        assert "reconfigured producer state: producer.id.expiration.ms" in log_text
        assert "reconfigured remote copy and fetch rates: remote.fetch.max.wait.ms" in log_text
        assert "reconfiguring" not in log_text  # its line when a part fails
    finally:
        process.stop()


def test_broker_loggers_are_read_and_changed_at_runtime(broker: BrokerProcess) -> None:
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    resource = KConfigResource(ConfigResourceType.BROKER_LOGGER, "0")
    try:
        found = client.describe_configs([resource], config_filter="all")["broker_logger"]["0"]
        assert found["root"]["value"] in ("INFO", "WARN")
        logger = "tierlog.broker.network.server"
        assert logger in found and found[logger]["config_source"] == "DYNAMIC_BROKER_LOGGER_CONFIG"

        def set_level(name: str, level: str | None, op: str = "SET") -> Any:
            change = KConfigResource(ConfigResourceType.BROKER_LOGGER, "0", {name: (op, level)})
            return client.alter_configs([change], incremental=True, raise_on_unknown=False)[
                "broker_logger"
            ]["0"]

        assert set_level(logger, "TRACE") == "OK"
        found = client.describe_configs([resource], config_filter="all")["broker_logger"]["0"]
        assert found[logger]["value"] == "TRACE"
        assert set_level(logger, None, "DELETE") == "OK"
        found = client.describe_configs([resource], config_filter="all")["broker_logger"]["0"]
        assert found[logger]["value"] == found["root"]["value"]
    finally:
        client.close()
