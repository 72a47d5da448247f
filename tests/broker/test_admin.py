"""Admin APIs with real clients (confluent-kafka AdminClient and kafka-python
KafkaAdminClient): CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs,
AlterConfigs, IncrementalAlterConfigs and Metadata."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import kafka.errors as kerr
import pytest
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)
from kafka.admin import KafkaAdminClient
from kafka.admin._configs import AlterConfigOp, ConfigResourceType
from kafka.admin._configs import ConfigResource as KConfigResource

from tests.broker.harness import BrokerProcess
from tests.raw_client import RawClient, request
from tierlog.local.config import TOPIC_CONFIG
from tierlog.local.log_manager import parse_log_dir_name
from tierlog.protocol import ApiKey

# Broker overrides some tests start with: non-trivial topic defaults, and a broker-level
# default for one topic key so that STATIC_BROKER_CONFIG shows up.
DEFAULTS = {"num.partitions": "3", "log.retention.ms": "7200000"}


@pytest.fixture
def tuned(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path / "tuned", DEFAULTS).start()
    try:
        yield process
    finally:
        process.stop()


def admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def kadmin(broker: BrokerProcess) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)


def outcome(future: Future[Any]) -> tuple[int, str]:
    """(error code, message) of a confluent admin future; (0, "") on success."""
    try:
        future.result(timeout=10)
    except KafkaException as exc:
        error: KafkaError = exc.args[0]
        return error.code(), error.str()
    return 0, ""


def partition_counts(client: AdminClient) -> dict[str, int]:
    topics = client.list_topics(timeout=10).topics
    return {name: len(t.partitions) for name, t in topics.items()}


def produce(bootstrap: str, topic: str, count: int, partition: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(count):
        producer.produce(topic, value=b"%d" % i, partition=partition)
    assert producer.flush(10) == 0


# -- CreateTopics ---------------------------------------------------------------------------


def test_create_topics_confluent(tuned: BrokerProcess) -> None:
    client = admin(tuned)
    # -1 partitions / replication factor take the broker's defaults.
    assert outcome(client.create_topics([NewTopic("dflt")])["dflt"]) == (0, "")
    assert outcome(
        client.create_topics([NewTopic("placed", 2, replica_assignment=[[0], [0]])])["placed"]
    ) == (0, "")
    code, message = outcome(
        client.create_topics([NewTopic("elsewhere", 2, replica_assignment=[[0], [7]])])["elsewhere"]
    )
    assert code == KafkaError.INVALID_REPLICA_ASSIGNMENT and "7" in message
    code, message = outcome(
        client.create_topics([NewTopic("badcfg", 1, 1, config={"retention.ms": "soon"})])["badcfg"]
    )
    assert code == KafkaError.INVALID_CONFIG and "retention.ms" in message
    code, message = outcome(
        client.create_topics([NewTopic("unknowncfg", 1, 1, config={"retention.mss": "1"})])[
            "unknowncfg"
        ]
    )
    assert code == KafkaError.INVALID_CONFIG and "retention.mss" in message
    assert outcome(client.create_topics([NewTopic("dry", 5, 1)], validate_only=True)["dry"]) == (
        0,
        "",
    )
    # validate_only checks everything, too.
    code, _ = outcome(
        client.create_topics(
            [NewTopic("dry", 5, 1, config={"segment.bytes": "1"})], validate_only=True
        )["dry"]
    )
    assert code == KafkaError.INVALID_CONFIG
    code, _ = outcome(client.create_topics([NewTopic("dflt", 1, 1)])["dflt"])
    assert code == KafkaError.TOPIC_ALREADY_EXISTS
    code, _ = outcome(client.create_topics([NewTopic("bad/name", 1, 1)])["bad/name"])
    assert code == KafkaError.TOPIC_EXCEPTION  # INVALID_TOPIC_EXCEPTION, 17
    code, message = outcome(client.create_topics([NewTopic("wide", 1, 3)])["wide"])
    assert code == KafkaError.INVALID_REPLICATION_FACTOR and "3" in message

    counts = partition_counts(client)
    assert counts["dflt"] == 3 and counts["placed"] == 2
    for name in ("elsewhere", "badcfg", "unknowncfg", "dry", "bad/name", "wide"):
        assert name not in counts
    placed = client.list_topics("placed", timeout=10).topics["placed"]
    assert {p: m.replicas for p, m in placed.partitions.items()} == {0: [0], 1: [0]}
    # Nothing of the refused topics reached the data dir.
    assert sorted(
        d.name for d in tuned.data_dir.iterdir() if d.is_dir() and parse_log_dir_name(d.name)
    ) == sorted([f"dflt-{p}" for p in range(3)] + ["placed-0", "placed-1"])


def test_create_topics_kafka_python(tuned: BrokerProcess) -> None:
    client = kadmin(tuned)
    try:
        created = client.create_topics({"kdflt": {}})["topics"][0]
        assert (created["error_code"], created["num_partitions"]) == (0, 3)
        assert created["replication_factor"] == 1
        assert uuid.UUID(str(created["topic_id"])).int != 0  # v7: the new topic's id
        # v5+: the answer carries every topic config with its source.
        configs = created["configs"]
        assert set(configs) == set(TOPIC_CONFIG.keys)
        assert configs["retention.ms"]["value"] == "7200000"
        assert configs["retention.ms"]["config_source"] == "STATIC_BROKER_CONFIG"
        assert configs["segment.bytes"]["config_source"] == "DEFAULT_CONFIG"

        with_configs = client.create_topics(
            {"kcfg": {"num_partitions": 2, "configs": {"cleanup.policy": "compact"}}}
        )["topics"][0]
        assert with_configs["num_partitions"] == 2
        assert with_configs["configs"]["cleanup.policy"]["value"] == "compact"
        assert with_configs["configs"]["cleanup.policy"]["config_source"] == (
            "DYNAMIC_TOPIC_CONFIG"
        )
        placed = client.create_topics({"kplaced": {"assignments": {0: [0], 1: [0], 2: [0]}}})
        assert placed["topics"][0]["num_partitions"] == 3

        dry = client.create_topics({"kdry": {"num_partitions": 4}}, validate_only=True)
        assert dry["topics"][0]["num_partitions"] == 4
        with pytest.raises(kerr.InvalidConfigurationError, match=r"max\.message\.bytes"):
            client.create_topics({"kbad": {"configs": {"max.message.bytes": "-5"}}})
        with pytest.raises(kerr.InvalidConfigurationError, match=r"no\.such\.key"):
            client.create_topics({"kbad": {"configs": {"no.such.key": "1"}}})
        with pytest.raises(kerr.TopicAlreadyExistsError):
            client.create_topics({"kdflt": {}})
        with pytest.raises(kerr.InvalidTopicError):
            client.create_topics({"a" * 250: {}})
        with pytest.raises(kerr.InvalidTopicError):
            client.create_topics({"..": {}})
        with pytest.raises(kerr.InvalidReplicationFactorError):
            client.create_topics({"kwide": {"replication_factor": 2}})
        with pytest.raises(kerr.InvalidPartitionsError):
            client.create_topics({"knone": {"num_partitions": 0}})
        assert sorted(t for t in client.list_topics() if t.startswith("k")) == [
            "kcfg",
            "kdflt",
            "kplaced",
        ]
    finally:
        client.close()


def test_create_topics_explicit_assignment_rules(broker: BrokerProcess) -> None:
    """Kafka's checks of a replica assignment, sent raw: each case refused, none created."""
    raw = RawClient(broker.port)

    def create(name: str, assignment: dict[int, list[int]], partitions: int = -1) -> int:
        topic = {
            "name": name,
            "num_partitions": partitions,
            "replication_factor": -1,
            "assignments": [
                {"partition_index": p, "broker_ids": ids} for p, ids in assignment.items()
            ],
            "configs": [],
        }
        answer = raw.call(
            request(
                ApiKey.CREATE_TOPICS,
                7,
                {"topics": [topic], "timeout": 5000, "validate_only": False},
            )
        )
        return int(answer.topics[0].error_code)

    try:
        assert create("gap", {0: [0], 5: [0]}) == 39  # INVALID_REPLICA_ASSIGNMENT
        assert create("nozero", {1: [0]}) == 39
        assert create("empty", {0: []}) == 39
        assert create("twice", {0: [0, 0]}) == 39
        assert create("both", {0: [0]}, partitions=1) == 42  # INVALID_REQUEST
        assert create("fine", {0: [0], 1: [0]}) == 0
    finally:
        raw.close()
    assert sorted(t for t in partition_counts(admin(broker)) if not t.startswith("__")) == ["fine"]


# -- DeleteTopics ---------------------------------------------------------------------------


def test_delete_topics_by_name_and_id_then_recreate_empty(broker: BrokerProcess) -> None:
    client = admin(broker)
    for name in ("gone", "byid"):
        assert outcome(client.create_topics([NewTopic(name, 2, 1)])[name]) == (0, "")
        produce(broker.bootstrap, name, 20)
    kclient = kadmin(broker)
    try:
        assert {f"gone-{p}" for p in range(2)} <= {d.name for d in broker.data_dir.iterdir()}
        old_id = client.describe_topics(TopicCollection(["byid"]))["byid"].result(10).topic_id

        assert outcome(client.delete_topics(["gone"])["gone"]) == (0, "")
        code, _ = outcome(client.delete_topics(["never-was"])["never-was"])
        assert code == KafkaError.UNKNOWN_TOPIC_OR_PART

        described = kclient.describe_topics(["byid"])[0]
        topic_id = uuid.UUID(str(described["topic_id"]))
        answer = kclient.delete_topics([topic_id])["topics"][0]
        assert (answer["name"], answer["error_code"]) == ("byid", 0)
        with pytest.raises(kerr.UnknownTopicIdError):
            kclient.delete_topics([uuid.uuid4()])
        with pytest.raises(kerr.UnknownTopicOrPartitionError):
            kclient.delete_topics(["gone"])  # already deleted
    finally:
        kclient.close()

    names = {d.name for d in broker.data_dir.iterdir()}
    assert not any(n.startswith(("gone-", "byid-")) for n in names), names
    assert {"gone", "byid"}.isdisjoint(partition_counts(client))

    # Re-created under the same name: empty, with a new id.
    assert outcome(client.create_topics([NewTopic("byid", 1, 1)])["byid"]) == (0, "")
    new = client.describe_topics(TopicCollection(["byid"]))["byid"].result(10)
    assert new.topic_id != old_id and len(new.partitions) == 1
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "wm"})
    try:
        assert consumer.get_watermark_offsets(TopicPartition("byid", 0), timeout=10) == (0, 0)
    finally:
        consumer.close()


def test_the_transaction_state_topic_belongs_to_the_broker(broker: BrokerProcess) -> None:
    client = admin(broker)
    made = client.create_topics([NewTopic("__transaction_state", 1, 1)])["__transaction_state"]
    assert outcome(made)[0] == KafkaError.INVALID_REQUEST
    raw = RawClient(broker.port)
    try:
        answer = metadata(raw, 12, ["__transaction_state"], create=True).topics[0]
        assert int(answer.error_code) == 0 and answer.is_internal
        assert len(answer.partitions) == 50  # transaction.state.log.num.partitions
    finally:
        raw.close()
    entries = describe_topic(client, "__transaction_state")
    assert entries["cleanup.policy"].value == "compact"
    code, message = outcome(client.delete_topics(["__transaction_state"])["__transaction_state"])
    assert code == KafkaError.TOPIC_EXCEPTION, message


def test_internal_topic_belongs_to_the_broker(broker: BrokerProcess) -> None:
    client = admin(broker)
    # A client cannot make __consumer_offsets its own way (1 partition, not compacted)...
    made = client.create_topics([NewTopic("__consumer_offsets", 1, 1)])["__consumer_offsets"]
    assert outcome(made)[0] == KafkaError.INVALID_REQUEST
    # ...and naming it in a Metadata request creates it with the broker's settings.
    raw = RawClient(broker.port)
    try:
        answer = metadata(raw, 12, ["__consumer_offsets"], create=True).topics[0]
        assert int(answer.error_code) == 0 and answer.is_internal
        assert len(answer.partitions) == 50  # offsets.topic.num.partitions
    finally:
        raw.close()
    entries = describe_topic(client, "__consumer_offsets")
    assert entries["cleanup.policy"].value == "compact"
    # Consumer groups work on it.
    produce(broker.bootstrap, "after", 1)
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "g", "auto.offset.reset": "earliest"}
    )
    try:
        consumer.subscribe(["after"])
        deadline = time.monotonic() + 15
        msg = None
        while msg is None and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
        assert msg is not None and msg.error() is None and msg.value() == b"0"
    finally:
        consumer.close()

    code, message = outcome(client.delete_topics(["__consumer_offsets"])["__consumer_offsets"])
    assert code == KafkaError.TOPIC_EXCEPTION, message
    kclient = kadmin(broker)
    try:
        with pytest.raises(kerr.InvalidTopicError):
            kclient.delete_topics(["__consumer_offsets"])
        with pytest.raises(kerr.TopicAlreadyExistsError):
            kclient.create_topics({"__consumer_offsets": {}})
    finally:
        kclient.close()
    assert partition_counts(client)["__consumer_offsets"] == 50


# -- CreatePartitions -----------------------------------------------------------------------


def test_create_partitions_both_clients(broker: BrokerProcess) -> None:
    client = admin(broker)
    assert outcome(client.create_topics([NewTopic("grow", 1, 1)])["grow"]) == (0, "")
    assert outcome(client.create_partitions([NewPartitions("grow", 3)])["grow"]) == (0, "")
    code, message = outcome(client.create_partitions([NewPartitions("grow", 2)])["grow"])
    assert code == KafkaError.INVALID_PARTITIONS and "3" in message
    code, _ = outcome(client.create_partitions([NewPartitions("grow", 3)])["grow"])
    assert code == KafkaError.INVALID_PARTITIONS  # same count: not a growth
    assert outcome(
        client.create_partitions([NewPartitions("grow", 10)], validate_only=True)["grow"]
    ) == (0, "")
    code, _ = outcome(client.create_partitions([NewPartitions("grow", 5, [[0], [9]])])["grow"])
    assert code == KafkaError.INVALID_REPLICA_ASSIGNMENT  # broker 9 does not exist
    code, _ = outcome(client.create_partitions([NewPartitions("grow", 5, [[0]])])["grow"])
    assert code == KafkaError.INVALID_REPLICA_ASSIGNMENT  # 2 new partitions, 1 assignment
    assert outcome(client.create_partitions([NewPartitions("grow", 5, [[0], [0]])])["grow"]) == (
        0,
        "",
    )
    code, _ = outcome(client.create_partitions([NewPartitions("nope", 5)])["nope"])
    assert code == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert partition_counts(client)["grow"] == 5

    kclient = kadmin(broker)
    try:
        kclient.create_partitions({"grow": 6})
        with pytest.raises(kerr.InvalidPartitionsError):
            kclient.create_partitions({"grow": 4})
        kclient.create_partitions({"grow": 9}, validate_only=True)
        with pytest.raises(kerr.InvalidReplicationAssignmentError):
            kclient.create_partitions({"grow": {"count": 7, "assignments": [[3]]}})
    finally:
        kclient.close()
    assert partition_counts(client)["grow"] == 6
    # The new partitions are real: they take data.
    produce(broker.bootstrap, "grow", 3, partition=5)
    assert (broker.data_dir / "grow-5").is_dir()


# -- DescribeConfigs / AlterConfigs / IncrementalAlterConfigs -------------------------------


def describe_topic(client: AdminClient, topic: str) -> dict[str, ConfigEntry]:
    resource = ConfigResource("topic", topic)
    entries: dict[str, ConfigEntry] = client.describe_configs([resource])[resource].result(10)
    return entries


def overrides(client: AdminClient, topic: str) -> dict[str, str]:
    return {
        name: str(e.value)
        for name, e in describe_topic(client, topic).items()
        if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    }


def test_describe_configs_topics_and_broker(tuned: BrokerProcess) -> None:
    client = admin(tuned)
    topic = NewTopic("described", 1, 1, config={"segment.bytes": "1048576"})
    assert outcome(client.create_topics([topic])["described"]) == (0, "")
    entries = describe_topic(client, "described")
    assert set(entries) == set(TOPIC_CONFIG.keys)  # every topic key, not only overrides
    assert entries["segment.bytes"].value == "1048576"
    assert entries["segment.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert not entries["segment.bytes"].is_default
    # log.retention.ms in the broker's config sets the topic default.
    assert entries["retention.ms"].value == "7200000"
    assert entries["retention.ms"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert entries["cleanup.policy"].value == "delete"
    assert entries["cleanup.policy"].source == ConfigSource.DEFAULT_CONFIG.value
    assert entries["cleanup.policy"].is_default
    assert not any(e.is_read_only for e in entries.values())

    unknown = ConfigResource("topic", "nosuch")
    with pytest.raises(KafkaException) as info:
        client.describe_configs([unknown])[unknown].result(10)
    assert info.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART

    broker_resource = ConfigResource("broker", "0")
    broker_entries = client.describe_configs([broker_resource])[broker_resource].result(10)
    assert broker_entries["num.partitions"].value == "3"
    assert broker_entries["num.partitions"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert broker_entries["log.retention.ms"].value == "7200000"
    assert broker_entries["delete.topic.enable"].value == "true"
    assert broker_entries["delete.topic.enable"].source == ConfigSource.DEFAULT_CONFIG.value
    # Read-only unless dynamic (tierlog.broker.dynamic_config.DYNAMIC_KEYS).
    assert broker_entries["num.partitions"].is_read_only
    assert broker_entries["log.dirs"].is_read_only
    assert not broker_entries["log.retention.ms"].is_read_only

    kclient = kadmin(tuned)
    try:
        modified = kclient.describe_configs(
            [KConfigResource(ConfigResourceType.TOPIC, "described")]
        )["topic"]["described"]
        assert set(modified) == {"segment.bytes"}  # the default filter: modified only
        every = kclient.describe_configs(
            [KConfigResource(ConfigResourceType.TOPIC, "described")], config_filter="all"
        )["topic"]["described"]
        assert set(every) == set(TOPIC_CONFIG.keys)
        assert every["retention.ms"]["config_source"] == "STATIC_BROKER_CONFIG"
        assert every["retention.ms"]["config_type"] == "LONG"
        assert every["cleanup.policy"]["config_type"] == "LIST"
        picked = kclient.describe_configs(
            [KConfigResource(ConfigResourceType.TOPIC, "described", ["retention.ms"])],
            config_filter="all",
        )["topic"]["described"]
        assert set(picked) == {"retention.ms"}
        broker_all = kclient.describe_configs(
            [KConfigResource(ConfigResourceType.BROKER, "0")], config_filter="all"
        )["broker"]["0"]
        assert broker_all["num.partitions"]["value"] == "3"
        assert broker_all["num.partitions"]["read_only"] is True
    finally:
        kclient.close()


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_alter_configs_replaces_the_overrides(broker: BrokerProcess) -> None:
    client = admin(broker)
    topic = NewTopic("altered", 1, 1, config={"retention.ms": "1000000", "segment.ms": "900000"})
    assert outcome(client.create_topics([topic])["altered"]) == (0, "")
    resource = ConfigResource("topic", "altered", set_config={"max.message.bytes": "50000"})
    assert outcome(client.alter_configs([resource])[resource]) == (0, "")
    # Non-incremental: the old overrides are gone, only the new set remains.
    assert overrides(client, "altered") == {"max.message.bytes": "50000"}

    bad = ConfigResource("topic", "altered", set_config={"retention.ms": "x"})
    code, message = outcome(client.alter_configs([bad])[bad])
    assert code == KafkaError.INVALID_CONFIG and "retention.ms" in message
    dry = ConfigResource("topic", "altered", set_config={"retention.ms": "5"})
    assert outcome(client.alter_configs([dry], validate_only=True)[dry]) == (0, "")
    assert overrides(client, "altered") == {"max.message.bytes": "50000"}
    missing = ConfigResource("topic", "nosuch", set_config={"retention.ms": "5"})
    code, _ = outcome(client.alter_configs([missing])[missing])
    assert code == KafkaError.UNKNOWN_TOPIC_OR_PART
    static = ConfigResource("broker", "0", set_config={"num.partitions": "5"})
    code, _ = outcome(client.alter_configs([static])[static])
    assert code == KafkaError.INVALID_REQUEST  # num.partitions is not a dynamic config

    kclient = kadmin(broker)
    try:
        result = kclient.alter_configs(
            [KConfigResource(ConfigResourceType.TOPIC, "altered", {"retention.ms": "123000"})],
            incremental=False,
        )
        assert result == {"topic": {"altered": "OK"}}
    finally:
        kclient.close()
    # kafka-python's non-incremental path re-sends the other modified keys itself.
    assert overrides(client, "altered") == {
        "max.message.bytes": "50000",
        "retention.ms": "123000",
    }


def test_incremental_alter_configs_set_delete_append_subtract(broker: BrokerProcess) -> None:
    client = admin(broker)
    topic = NewTopic("inc", 1, 1, config={"retention.ms": "1000000"})
    assert outcome(client.create_topics([topic])["inc"]) == (0, "")

    def alter(*entries: tuple[str, str | None, AlterConfigOpType]) -> tuple[int, str]:
        resource = ConfigResource(
            "topic",
            "inc",
            incremental_configs=[
                ConfigEntry(name, value, incremental_operation=op) for name, value, op in entries
            ],
        )
        return outcome(client.incremental_alter_configs([resource])[resource])

    assert alter(("segment.bytes", "2000000", AlterConfigOpType.SET)) == (0, "")
    assert overrides(client, "inc") == {"retention.ms": "1000000", "segment.bytes": "2000000"}
    assert alter(("retention.ms", None, AlterConfigOpType.DELETE)) == (0, "")
    assert overrides(client, "inc") == {"segment.bytes": "2000000"}
    assert describe_topic(client, "inc")["retention.ms"].is_default
    # APPEND starts from the effective value (the default "delete").
    assert alter(("cleanup.policy", "compact", AlterConfigOpType.APPEND)) == (0, "")
    assert overrides(client, "inc")["cleanup.policy"] == "delete,compact"
    assert alter(("cleanup.policy", "compact", AlterConfigOpType.APPEND)) == (0, "")
    assert overrides(client, "inc")["cleanup.policy"] == "delete,compact"  # no duplicate
    assert alter(("cleanup.policy", "delete", AlterConfigOpType.SUBTRACT)) == (0, "")
    assert overrides(client, "inc")["cleanup.policy"] == "compact"

    code, message = alter(("segment.bytes", "1000", AlterConfigOpType.APPEND))
    assert code == KafkaError.INVALID_CONFIG and "segment.bytes" in message
    code, message = alter(("cleanup.policy", "shred", AlterConfigOpType.APPEND))
    assert code == KafkaError.INVALID_CONFIG and "cleanup.policy" in message
    code, message = alter(("not.a.key", "1", AlterConfigOpType.SET))
    assert code == KafkaError.INVALID_CONFIG and "not.a.key" in message
    # A refused request changes nothing, not even its valid entries.
    code, _ = alter(
        ("retention.ms", "5000", AlterConfigOpType.SET),
        ("segment.bytes", "1", AlterConfigOpType.SET),
    )
    assert code == KafkaError.INVALID_CONFIG
    assert overrides(client, "inc") == {"segment.bytes": "2000000", "cleanup.policy": "compact"}
    static = ConfigResource(
        "broker",
        "0",
        incremental_configs=[
            ConfigEntry("log.retention.hours", "1", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    code, _ = outcome(client.incremental_alter_configs([static])[static])
    assert code == KafkaError.INVALID_REQUEST

    kclient = kadmin(broker)
    try:
        resource = KConfigResource(
            ConfigResourceType.TOPIC,
            "inc",
            {
                "cleanup.policy": (AlterConfigOp.APPEND, "delete"),
                "segment.bytes": (AlterConfigOp.DELETE, None),
                "retention.ms": "86400000",
            },
        )
        assert kclient.alter_configs([resource], incremental=True) == {"topic": {"inc": "OK"}}
        kclient.reset_configs([KConfigResource(ConfigResourceType.TOPIC, "inc", ["retention.ms"])])
        missing = kclient.alter_configs(
            [KConfigResource(ConfigResourceType.TOPIC, "nosuch", {"retention.ms": "1"})],
            incremental=True,
            raise_on_unknown=False,  # else kafka-python refuses before asking the broker
        )
        assert "UnknownTopicOrPartitionError" in missing["topic"]["nosuch"]
        bad = kclient.alter_configs(
            [KConfigResource(ConfigResourceType.TOPIC, "inc", {"segment.bytes": "tiny"})],
            incremental=True,
        )
        assert "InvalidConfigurationError" in bad["topic"]["inc"]
        assert "segment.bytes" in bad["topic"]["inc"]
    finally:
        kclient.close()
    assert overrides(client, "inc") == {"cleanup.policy": "compact,delete"}


def test_configs_are_honoured_and_survive_restart(tmp_path: Path) -> None:
    # Retention runs every 200 ms here instead of every 5 minutes.
    broker = BrokerProcess(tmp_path / "d", {"log.retention.check.interval.ms": "200"}).start()
    try:
        client = admin(broker)
        assert outcome(client.create_topics([NewTopic("honoured", 1, 1)])["honoured"]) == (0, "")
        resource = ConfigResource(
            "topic",
            "honoured",
            incremental_configs=[
                ConfigEntry("segment.bytes", "1024", incremental_operation=AlterConfigOpType.SET)
            ],
        )
        assert outcome(client.incremental_alter_configs([resource])[resource]) == (0, "")
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
        old = int(time.time() * 1000) - 3_600_000  # an hour ago: past any short retention
        for i in range(40):
            producer.produce("honoured", value=b"x" * 200, timestamp=old + i)
            producer.flush(5)  # one batch each, so segments roll at 1 KiB
        segments = sorted((broker.data_dir / "honoured-0").glob("*.log"))
        assert len(segments) > 3, segments  # segment.bytes took effect at once

        resource = ConfigResource(
            "topic",
            "honoured",
            incremental_configs=[
                ConfigEntry("retention.ms", "60000", incremental_operation=AlterConfigOpType.SET)
            ],
        )
        assert outcome(client.incremental_alter_configs([resource])[resource]) == (0, "")
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "ret"})
        try:
            deadline = time.monotonic() + 15
            while True:
                low, high = consumer.get_watermark_offsets(TopicPartition("honoured", 0), timeout=5)
                if low > 0:
                    break
                assert time.monotonic() < deadline, "retention.ms was not applied"
                time.sleep(0.2)
            assert high == 40 and low > 30  # all but the active segment went
        finally:
            consumer.close()

        assert broker.stop() == 0
        broker.start()
        client = admin(broker)
        assert overrides(client, "honoured") == {"segment.bytes": "1024", "retention.ms": "60000"}
        entries = describe_topic(client, "honoured")
        assert entries["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
        # And the reloaded log still rolls at the overridden size (fresh timestamps: these
        # segments are not past retention).
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
        for _ in range(10):
            producer.produce("honoured", value=b"y" * 300)
            producer.flush(5)
        bases = [int(f.stem) for f in (broker.data_dir / "honoured-0").glob("*.log")]
        assert len([b for b in bases if b >= 40]) >= 3, sorted(bases)
    finally:
        broker.stop()


# -- Metadata -------------------------------------------------------------------------------


def metadata(raw: RawClient, version: int, topics: list[str] | None, create: bool) -> Any:
    return raw.call(
        request(
            ApiKey.METADATA,
            version,
            {
                "topics": None
                if topics is None
                else [{"name": t, "topic_id": uuid.UUID(int=0)} for t in topics],
                "allow_auto_topic_creation": create,
                "include_cluster_authorized_operations": False,
                "include_topic_authorized_operations": False,
            },
        )
    )


def test_metadata_all_topics_ids_controller_and_auto_create(broker: BrokerProcess) -> None:
    client = admin(broker)
    for name in ("m1", "m2"):
        assert outcome(client.create_topics([NewTopic(name, 2, 1)])[name]) == (0, "")
    raw = RawClient(broker.port)
    try:
        # v0: an empty list means every topic; v1+: null means every topic, [] none.
        assert {t.name for t in metadata(raw, 0, [], create=False).topics} == {"m1", "m2"}
        assert {t.name for t in metadata(raw, 1, None, create=False).topics} == {"m1", "m2"}
        assert metadata(raw, 1, [], create=False).topics == ()
        answer = metadata(raw, 12, None, create=False)
        assert int(answer.controller_id) == 0  # this broker is the controller
        ids = {t.name: t.topic_id for t in answer.topics}
        assert all(i.int != 0 for i in ids.values())
        # v12 with auto-creation not allowed by the request: unknown, nothing created.
        unknown = metadata(raw, 12, ["auto1"], create=False).topics[0]
        assert int(unknown.error_code) == 3
        # Allowed by the request and by the broker: created with the broker defaults.
        created = metadata(raw, 12, ["auto1"], create=True).topics[0]
        assert int(created.error_code) == 0 and len(created.partitions) == 1
        # v3 and older always ask for auto-creation.
        old = metadata(raw, 3, ["auto2"], create=False).topics[0]
        assert int(old.error_code) == 0
        invalid = metadata(raw, 12, ["bad name"], create=True).topics[0]
        assert int(invalid.error_code) == 17  # INVALID_TOPIC_EXCEPTION
    finally:
        raw.close()
    assert client.list_topics(timeout=10).controller_id == 0
    cluster = client.describe_cluster().result(10)
    assert cluster.controller is not None and cluster.controller.id == 0
    kclient = kadmin(broker)
    try:
        assert kclient.describe_cluster()["controller_id"] == 0
    finally:
        kclient.close()

    # Topic ids and leader epochs survive a restart.
    assert broker.stop() == 0
    broker.start()
    raw = RawClient(broker.port)
    try:
        again = metadata(raw, 12, None, create=False)
        assert {t.name: t.topic_id for t in again.topics if t.name in ids} == ids
    finally:
        raw.close()
    client = admin(broker)
    described = client.describe_topics(TopicCollection(["m1"]))["m1"].result(10)
    msb = described.topic_id.get_most_significant_bits() & (2**64 - 1)
    lsb = described.topic_id.get_least_significant_bits() & (2**64 - 1)
    assert uuid.UUID(int=msb << 64 | lsb) == ids["m1"] and len(described.partitions) == 2


def test_metadata_without_auto_create(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "d", {"auto.create.topics.enable": "false"}).start()
    try:
        raw = RawClient(broker.port)
        try:
            for version in (3, 12):
                topic = metadata(raw, version, ["not-made"], create=True).topics[0]
                assert int(topic.error_code) == 3  # UNKNOWN_TOPIC_OR_PARTITION
            # Not the internal topic either: groups create it (FindCoordinator), not Metadata.
            internal = metadata(raw, 12, ["__consumer_offsets"], create=True).topics[0]
            assert int(internal.error_code) == 3
        finally:
            raw.close()
        producer = Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 1000})
        errors: list[KafkaError | None] = []
        producer.produce("not-made", b"x", on_delivery=lambda err, msg: errors.append(err))
        producer.flush(10)
        assert errors and errors[0] is not None
        assert "not-made" not in partition_counts(admin(broker))
    finally:
        broker.stop()
