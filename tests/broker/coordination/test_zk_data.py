"""zk_data: Kafka's znode JSON, byte for byte where Kafka fixes it, and strict decoding."""

from __future__ import annotations

import ast
import contextlib
import json
import uuid
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tierlog.broker.coordination import zk_data
from tierlog.broker.coordination.zk_data import (
    BrokerInfo,
    ControllerInfo,
    EndPoint,
    LeaderAndIsr,
    ProducerIdBlock,
    TopicAssignment,
    ZkDataError,
)

TOPIC_ID = uuid.UUID("6f1c9f5e-0d1b-4c35-9a3f-1d2e3f405162")


def test_zk_data_is_sans_io() -> None:
    source = Path(zk_data.__file__).read_text()
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert not imported & {"kazoo", "asyncio", "socket", "selectors", "threading"}


# -- paths -------------------------------------------------------------------------------------


def test_paths_are_kafkas() -> None:
    assert zk_data.broker_path(3) == "/brokers/ids/3"
    assert zk_data.topic_path("orders") == "/brokers/topics/orders"
    assert zk_data.partition_state_path("orders", 2) == "/brokers/topics/orders/partitions/2/state"
    assert zk_data.topic_config_path("orders") == "/config/topics/orders"
    assert zk_data.config_change_prefix_path() == "/config/changes/config_change_"
    assert zk_data.delete_topic_path("orders") == "/admin/delete_topics/orders"
    assert zk_data.CONTROLLER == "/controller"
    assert zk_data.CONTROLLER_EPOCH == "/controller_epoch"
    assert zk_data.REASSIGN_PARTITIONS == "/admin/reassign_partitions"
    assert zk_data.PREFERRED_REPLICA_ELECTION == "/admin/preferred_replica_election"
    assert zk_data.ISR_CHANGE_NOTIFICATION == "/isr_change_notification"
    assert zk_data.PRODUCER_ID_BLOCK == "/latest_producer_id_block"
    assert zk_data.CLUSTER_ID == "/cluster/id"
    assert zk_data.BROKER_SEQUENCE_ID == "/brokers/seqid"
    assert "/config/topics" in zk_data.PERSISTENT_PATHS
    assert "/brokers/ids" in zk_data.PERSISTENT_PATHS


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "../x", "a\x00b"])
def test_names_cannot_escape_their_znode(name: str) -> None:
    with pytest.raises(ValueError):
        zk_data.topic_path(name)
    with pytest.raises(ValueError):
        zk_data.topic_config_path(name)


# -- topic ids -------------------------------------------------------------------------------


def test_topic_id_is_kafkas_uuid_string() -> None:
    # Kafka's Uuid.toString: URL-safe base64, no padding.
    text = zk_data.topic_id_to_str(TOPIC_ID)
    assert len(text) == 22 and "=" not in text
    assert text == "bxyfXg0bTDWaPx0uP0BRYg"
    assert zk_data.topic_id_from_str(text) == TOPIC_ID


@given(st.uuids())
def test_topic_id_round_trip(topic_id: uuid.UUID) -> None:
    assert zk_data.topic_id_from_str(zk_data.topic_id_to_str(topic_id)) == topic_id


# -- literal samples of what Kafka writes -------------------------------------------------------


def test_kafka_broker_registration_v5_decodes() -> None:
    sample = (
        b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT",'
        b'"SSL":"SSL"},"endpoints":["PLAINTEXT://kafka-1:9092","SSL://kafka-1:9093"],'
        b'"jmx_port":-1,"port":9092,"host":"kafka-1","version":5,"timestamp":"1700000000123",'
        b'"rack":"eu-1a"}'
    )
    info = zk_data.decode_broker(1, sample)
    assert info.broker_id == 1
    assert info.host == "kafka-1" and info.port == 9092
    assert info.rack == "eu-1a" and info.jmx_port == -1
    assert info.timestamp_ms == 1_700_000_000_123
    assert info.endpoints == (
        EndPoint("kafka-1", 9092),
        EndPoint("kafka-1", 9093, "SSL", "SSL"),
    )


def test_kafka_broker_registration_v1_decodes() -> None:
    info = zk_data.decode_broker(
        0, b'{"version":1,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666"}'
    )
    assert info.endpoints == (EndPoint("localhost", 9092),) and info.jmx_port == 9999


def test_broker_registration_encodes_kafkas_v5_keys() -> None:
    info = BrokerInfo.plaintext(7, "10.0.0.7", 9092, rack="r1")
    obj = json.loads(zk_data.encode_broker(info))
    assert obj == {
        "version": 5,
        "host": "10.0.0.7",
        "port": 9092,
        "endpoints": ["PLAINTEXT://10.0.0.7:9092"],
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
        "jmx_port": -1,
        "timestamp": "0",
        "features": {},
        "rack": "r1",
    }
    no_rack = json.loads(zk_data.encode_broker(BrokerInfo.plaintext(7, "h", 1)))
    assert "rack" not in no_rack


def test_ipv6_endpoint_is_bracketed() -> None:
    info = BrokerInfo.plaintext(1, "::1", 9092)
    assert json.loads(zk_data.encode_broker(info))["endpoints"] == ["PLAINTEXT://[::1]:9092"]
    assert zk_data.decode_broker(1, zk_data.encode_broker(info)) == info


def test_controller_json() -> None:
    data = zk_data.encode_controller(ControllerInfo(2, 1_700_000_000_000))
    assert json.loads(data) == {"version": 1, "brokerid": 2, "timestamp": "1700000000000"}
    assert zk_data.decode_controller(b'{"version":1,"brokerid":2,"timestamp":"17"}') == (
        ControllerInfo(2, 17)
    )
    assert zk_data.encode_controller_epoch(12) == b"12"
    assert zk_data.decode_controller_epoch(b"12") == 12


def test_kafka_topic_assignment_decodes() -> None:
    # Kafka 2.8 wrote version 2 with a topic id; 3.x writes version 3.
    for version in (2, 3):
        sample = (
            f'{{"version":{version},"partitions":{{"0":[1,2],"1":[2,3]}},'
            f'"adding_replicas":{{"1":[3]}},"removing_replicas":{{}},'
            f'"topic_id":"bxyfXg0bTDWaPx0uP0BRYg"}}'
        ).encode()
        assignment = zk_data.decode_topic("orders", sample)
        assert assignment.partitions == {0: [1, 2], 1: [2, 3]}
        assert assignment.adding_replicas == {1: [3]}
        assert assignment.removing_replicas == {}
        assert assignment.topic_id == TOPIC_ID
    old = zk_data.decode_topic("t", b'{"version":1,"partitions":{"0":[0]}}')
    assert old == TopicAssignment({0: [0]})


def test_topic_assignment_encodes_kafkas_keys() -> None:
    data = zk_data.encode_topic(TopicAssignment({1: [2, 3], 0: [1, 2]}, TOPIC_ID))
    assert data == (
        b'{"version":3,"partitions":{"0":[1,2],"1":[2,3]},"adding_replicas":{},'
        b'"removing_replicas":{},"topic_id":"bxyfXg0bTDWaPx0uP0BRYg"}'
    )


def test_kafka_partition_state_decodes() -> None:
    sample = b'{"controller_epoch":4,"leader":1,"version":1,"leader_epoch":7,"isr":[1,2,3]}'
    assert zk_data.decode_partition_state("orders", 0, sample) == LeaderAndIsr(1, 7, (1, 2, 3), 4)
    assert json.loads(zk_data.encode_partition_state(LeaderAndIsr(1, 7, (1, 2, 3), 4))) == {
        "version": 1,
        "leader": 1,
        "leader_epoch": 7,
        "controller_epoch": 4,
        "isr": [1, 2, 3],
    }
    recovering = LeaderAndIsr(1, 7, (1,), 4, leader_recovery_state=1)
    assert json.loads(zk_data.encode_partition_state(recovering))["leader_recovery_state"] == 1


def test_config_and_change_notification() -> None:
    data = zk_data.encode_config({"retention.ms": "1000", "cleanup.policy": "compact"})
    assert data == b'{"version":1,"config":{"cleanup.policy":"compact","retention.ms":"1000"}}'
    assert zk_data.decode_config("topics", "t", data) == {
        "retention.ms": "1000",
        "cleanup.policy": "compact",
    }
    assert zk_data.decode_config("topics", "t", b"") == {}
    entity = zk_data.config_change_entity_path("topics", "orders")
    assert zk_data.encode_config_change(entity) == b'{"version":2,"entity_path":"topics/orders"}'
    path = "/config/changes/config_change_0000000003"
    assert zk_data.decode_config_change(path, zk_data.encode_config_change(entity)) == entity


def test_kafka_producer_id_block_uses_strings() -> None:
    # ProducerIdBlockZNode.generateProducerIdBlockJson: start and end as strings, inclusive.
    sample = b'{"version":1,"broker":3,"block_start":"1000","block_end":"1999"}'
    block = zk_data.decode_producer_id_block(sample)
    assert block == ProducerIdBlock(3, 1000, 1999) and block.size == 1000
    assert zk_data.encode_producer_id_block(ProducerIdBlock(3, 1000, 1999)) == sample
    assert zk_data.decode_producer_id_block(b"") is None


def test_producer_id_blocks_follow_each_other() -> None:
    first = zk_data.next_producer_id_block(None, 1, 1000)
    assert (first.block_start, first.block_end) == (0, 999)
    second = zk_data.next_producer_id_block(first, 2, 10)
    assert (second.broker_id, second.block_start, second.block_end) == (2, 1000, 1009)
    with pytest.raises(ValueError):
        zk_data.next_producer_id_block(ProducerIdBlock(1, 0, zk_data.MAX_PRODUCER_ID - 5), 1, 10)


def test_cluster_id_version_is_a_string() -> None:
    assert zk_data.encode_cluster_id("abc") == b'{"version":"1","id":"abc"}'
    assert zk_data.decode_cluster_id(b'{"version":"1","id":"abc"}') == "abc"


def test_admin_partition_lists() -> None:
    data = zk_data.encode_reassignment({("t", 0): [1, 2]})
    assert json.loads(data) == {
        "version": 1,
        "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2]}],
    }
    assert zk_data.decode_reassignment(data) == {("t", 0): [1, 2]}
    election = zk_data.encode_partition_set({("t", 1), ("u", 0)})
    decoded = zk_data.decode_partition_set(zk_data.PREFERRED_REPLICA_ELECTION, election)
    assert decoded == {("t", 1), ("u", 0)}


# -- round trips -------------------------------------------------------------------------------

names = st.text("abcdefghijklmnopqrstuvwxyz0123456789._-", min_size=1, max_size=30).filter(
    lambda s: s not in (".", "..")
)
ids = st.integers(0, 2**31 - 1)
replica_lists = st.lists(ids, min_size=1, max_size=5)
partition_maps = st.dictionaries(st.integers(0, 1000), replica_lists, max_size=8)


@given(
    ids,
    st.lists(
        st.builds(EndPoint, names, st.integers(0, 65535), names.map(str.upper)),
        min_size=1,
        max_size=3,
        unique_by=lambda e: e.listener,
    ),
    st.none() | names,
    st.integers(0, 2**62),
)
def test_broker_round_trip(
    broker_id: int, endpoints: list[EndPoint], rack: str | None, ts: int
) -> None:
    info = BrokerInfo(broker_id, tuple(endpoints), rack, timestamp_ms=ts)
    assert zk_data.decode_broker(broker_id, zk_data.encode_broker(info)) == info


@given(partition_maps, st.none() | st.uuids(), partition_maps)
def test_topic_round_trip(
    partitions: dict[int, list[int]], topic_id: uuid.UUID | None, adding: dict[int, list[int]]
) -> None:
    assignment = TopicAssignment(partitions, topic_id, adding_replicas=adding)
    assert zk_data.decode_topic("t", zk_data.encode_topic(assignment)) == assignment


@given(st.integers(-1, 2**31 - 1), ids, st.lists(ids, max_size=5), ids, st.integers(0, 1))
def test_partition_state_round_trip(
    leader: int, epoch: int, isr: list[int], controller_epoch: int, recovery: int
) -> None:
    state = LeaderAndIsr(leader, epoch, tuple(isr), controller_epoch, recovery)
    assert zk_data.decode_partition_state("t", 0, zk_data.encode_partition_state(state)) == state


@given(st.dictionaries(names, st.text(max_size=20), max_size=6))
def test_config_round_trip(configs: dict[str, str]) -> None:
    assert zk_data.decode_config("topics", "t", zk_data.encode_config(configs)) == configs


@given(ids, st.integers(0, 2**62), st.integers(1, 10**6))
def test_producer_id_block_round_trip(broker_id: int, start: int, size: int) -> None:
    block = ProducerIdBlock(broker_id, start, start + size - 1)
    assert zk_data.decode_producer_id_block(zk_data.encode_producer_id_block(block)) == block


# -- bad data: one error type, naming the path -------------------------------------------------

BAD_DOCUMENTS = [
    b"not json",
    b"\xff\xfe",
    b"[1,2]",
    b'"text"',
    b"{}",
    b'{"version":1,"leader":"1","leader_epoch":0,"controller_epoch":0,"isr":[]}',
    b'{"version":1,"leader":true,"leader_epoch":0,"controller_epoch":0,"isr":[]}',
    b'{"version":1,"leader":1,"leader_epoch":0,"controller_epoch":0,"isr":[1,"2"]}',
]


@pytest.mark.parametrize("data", BAD_DOCUMENTS)
def test_bad_partition_state_names_the_path(data: bytes) -> None:
    with pytest.raises(ZkDataError, match="/brokers/topics/orders/partitions/4/state") as e:
        zk_data.decode_partition_state("orders", 4, data)
    assert e.value.path == "/brokers/topics/orders/partitions/4/state"


@pytest.mark.parametrize(
    ("decode", "data", "path"),
    [
        (lambda d: zk_data.decode_broker(5, d), b'{"version":9}', "/brokers/ids/5"),
        (lambda d: zk_data.decode_broker(5, d), b'{"version":5,"jmx_port":-1}', "/brokers/ids/5"),
        (
            lambda d: zk_data.decode_broker(5, d),
            b'{"version":5,"jmx_port":-1,"endpoints":["nonsense"]}',
            "/brokers/ids/5",
        ),
        (zk_data.decode_controller, b'{"version":1}', "/controller"),
        (zk_data.decode_controller_epoch, b"twelve", "/controller_epoch"),
        (zk_data.decode_controller_epoch, "\u00b2".encode(), "/controller_epoch"),
        (
            lambda d: zk_data.decode_topic("t", d),
            b'{"version":3,"partitions":[]}',
            "/brokers/topics/t",
        ),
        (
            lambda d: zk_data.decode_topic("t", d),
            b'{"version":3,"partitions":{"x":[1]}}',
            "/brokers/topics/t",
        ),
        (
            lambda d: zk_data.decode_topic("t", d),
            b'{"version":3,"partitions":{},"topic_id":"short"}',
            "/brokers/topics/t",
        ),
        (
            lambda d: zk_data.decode_config("topics", "t", d),
            b'{"config":{"a":1}}',
            "/config/topics/t",
        ),
        (
            zk_data.decode_producer_id_block,
            b'{"version":1,"broker":1,"block_start":0,"block_end":"9"}',
            "/latest_producer_id_block",
        ),
        (
            zk_data.decode_producer_id_block,
            b'{"version":1,"broker":1,"block_start":"9","block_end":"0"}',
            "/latest_producer_id_block",
        ),
        (zk_data.decode_cluster_id, b"{", "/cluster/id"),
        (
            zk_data.decode_reassignment,
            b'{"version":1,"partitions":{}}',
            "/admin/reassign_partitions",
        ),
    ],
)
def test_bad_json_names_the_path(decode: object, data: bytes, path: str) -> None:
    assert callable(decode)
    with pytest.raises(ZkDataError) as e:
        decode(data)
    assert e.value.path == path and path in str(e.value)


@given(st.binary(max_size=64))
def test_decoders_raise_only_zk_data_errors(data: bytes) -> None:
    decoders = [
        lambda: zk_data.decode_broker(1, data),
        lambda: zk_data.decode_topic("t", data),
        lambda: zk_data.decode_partition_state("t", 0, data),
        lambda: zk_data.decode_controller(data),
        lambda: zk_data.decode_controller_epoch(data),
        lambda: zk_data.decode_config("topics", "t", data),
        lambda: zk_data.decode_producer_id_block(data),
        lambda: zk_data.decode_cluster_id(data),
        lambda: zk_data.decode_reassignment(data),
    ]
    for decode in decoders:
        with contextlib.suppress(ZkDataError):
            decode()


# Keys of Kafka's znodes, so that generated documents get past the first checks.
KAFKA_KEYS = [
    "version", "host", "port", "endpoints", "listener_security_protocol_map", "rack",
    "jmx_port", "timestamp", "features", "partitions", "adding_replicas",
    "removing_replicas", "topic_id", "leader", "leader_epoch", "controller_epoch", "isr",
    "leader_recovery_state", "broker", "block_start", "block_end", "0", "1",
]  # fmt: skip


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=5),
        lambda children: (
            st.lists(children, max_size=3)
            | st.dictionaries(
                st.sampled_from(KAFKA_KEYS) | st.text(max_size=6), children, max_size=8
            )
        ),
        max_leaves=12,
    )
)
def test_any_json_decodes_or_raises_zk_data_error(value: object) -> None:
    data = json.dumps(value).encode()
    for decode in (
        lambda: zk_data.decode_broker(1, data),
        lambda: zk_data.decode_topic("t", data),
        lambda: zk_data.decode_partition_state("t", 0, data),
        lambda: zk_data.decode_producer_id_block(data),
    ):
        with contextlib.suppress(ZkDataError):
            decode()


# -- paths named by watches ------------------------------------------------------------------


@given(names, st.integers(0, 10**6))
def test_watched_paths_parse_back(topic: str, partition: int) -> None:
    assert zk_data.parse_topic_path(zk_data.topic_path(topic)) == topic
    state = zk_data.partition_state_path(topic, partition)
    assert zk_data.parse_partition_state_path(state) == (topic, partition)
    assert zk_data.parse_topic_path(state) is None
    assert zk_data.parse_partition_state_path(zk_data.topic_path(topic)) is None


@pytest.mark.parametrize(
    "path",
    [
        zk_data.TOPICS,
        f"{zk_data.TOPICS}/",
        f"{zk_data.TOPICS}/t/partitions",
        f"{zk_data.TOPICS}/t/partitions/0",
        f"{zk_data.TOPICS}/t/partitions/x/state",
        f"{zk_data.TOPICS}/t/partitions/-1/state",
        f"{zk_data.TOPICS}/t/partitions/01/state",
        f"{zk_data.TOPICS}/t/other/0/state",
        f"{zk_data.BROKER_IDS}/1",
        zk_data.CONTROLLER,
    ],
)
def test_other_paths_parse_to_none(path: str) -> None:
    assert zk_data.parse_partition_state_path(path) is None
    assert zk_data.parse_topic_path(path) is None


def test_config_change_sequence() -> None:
    assert zk_data.config_change_sequence("config_change_0000000042") == 42
    assert zk_data.config_change_sequence("config_change_") is None
    assert zk_data.config_change_sequence("isr_change_0000000001") is None
