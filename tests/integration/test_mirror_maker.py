"""MirrorMaker 2 (Kafka 4.x's ``connect-mirror`` from Maven Central, dedicated mode, as
``bench/mirror_maker.py`` runs it) mirroring tierlog -> tierlog and Apache Kafka -> tierlog
(issue 23 item 6). For each: every record arrives in ``source.<topic>``, partition by
partition and in order (the checksums of both sides match); the topic's config overrides
are synced, ``compression.type=zstd`` among them (the mirror's batches are stored in zstd,
recompressed by the target's leader as Kafka does); and a consumer group's committed offsets
are translated onto the mirror, so the group can resume there without skipping a record.
MirrorMaker 2's own state (Connect's internal topics, compacted) lives on the tierlog target.

Between two tierlog brokers with the ACL authorizer (MirrorMaker 2's ANONYMOUS a super
user), the topic's ACLs are synced too (``sync.topic.acls.enabled``): MirrorMaker 2 reads
them with DescribeAcls and writes them onto the mirror with CreateAcls, its rules applied
(ALL becomes READ; ALLOW WRITE is not mirrored: only the mirror writes there).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from tests.broker.harness import BrokerProcess
from tests.integration import kafka_tools
from tierlog.records.header import Attr, Compression, iter_batches

kafka_ref = kafka_tools.kafka_ref
import mirror_maker  # noqa: E402 - bench/ is on the path once kafka_tools is imported
from procs import ManagedProcess, wait_ready  # noqa: E402

pytestmark = pytest.mark.timeout(
    420 if mirror_maker.cached_mirror_maker(kafka_tools.WORK) else kafka_ref.MVN_TIMEOUT + 420
)

TOPIC = "orders"
PARTITIONS = 3
RECORDS = 6000
GROUP = "billing"
COMMITTED = {0: 700, 1: 1200, 2: 1999}
OVERRIDES = {
    "retention.ms": "123456789",
    "max.message.bytes": "2000000",
    # MirrorMaker 2 creates the mirror with it; tierlog refused it before issue 23 item 5.
    "compression.type": "zstd",
}


@pytest.fixture(scope="module")
def mm2_dist() -> Any:
    try:
        return mirror_maker.fetch_mirror_maker(kafka_tools.WORK)
    except kafka_ref.KafkaUnavailable as exc:
        pytest.fail(f"MirrorMaker 2 is unavailable ({exc}): run `make kafka-tools`", False)


# ACLs decide, and MirrorMaker 2 (connecting as ANONYMOUS) may do anything.
AUTHORIZED = {
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "super.users": "User:ANONYMOUS",
}
SOURCE_ACLS = [
    ("User:alice", AclOperation.ALL),  # mirrored as READ
    ("User:bob", AclOperation.READ),  # mirrored as it is
    ("User:carol", AclOperation.WRITE),  # not mirrored
]
MIRRORED_ACLS = {("User:alice", AclOperation.READ), ("User:bob", AclOperation.READ)}


@pytest.fixture
def target(tmp_path: Path) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path / "target", AUTHORIZED).start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def tierlog_source(tmp_path: Path) -> Iterator[str]:
    broker = BrokerProcess(tmp_path / "source", AUTHORIZED).start()
    try:
        yield broker.bootstrap
    finally:
        broker.stop()


@pytest.fixture
def kafka_source(tmp_path: Path) -> Iterator[str]:
    try:
        dist = kafka_ref.fetch_kafka(kafka_tools.WORK.resolve())
        proc, bootstrap = kafka_ref.start_kafka(dist, tmp_path / "kafka")
    except kafka_ref.KafkaUnavailable as exc:
        pytest.fail(f"Kafka is unavailable ({exc}): run `make kafka-tools`", False)
    try:
        wait_ready(proc, bootstrap, 120)
        yield bootstrap
    finally:
        proc.stop()


def fill_source(bootstrap: str) -> dict[int, str]:
    """The topic with its overrides, RECORDS keyed records, and GROUP's committed offsets;
    returns each partition's checksum."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(TOPIC, PARTITIONS, 1, config=OVERRIDES)
    admin.create_topics([topic])[TOPIC].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(RECORDS):
        producer.produce(TOPIC, key=b"key-%d" % i, value=b"value-%d-" % i + bytes(i % 50))
    assert producer.flush(60) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP})
    offsets = [TopicPartition(TOPIC, p, o) for p, o in COMMITTED.items()]
    deadline = time.monotonic() + 60
    while True:  # a fresh broker's group coordinator loads first (NOT_COORDINATOR meanwhile)
        try:
            consumer.commit(offsets=offsets, asynchronous=False)
            break
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)
    consumer.close()
    return checksums(bootstrap, TOPIC)


def checksums(bootstrap: str, topic: str, timeout: float = 120) -> dict[int, str]:
    """Per partition: sha256 over its records' keys and values in offset order, once every
    partition holds its share of RECORDS (the records of a partition, not their offsets,
    are what MirrorMaker 2 promises)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"checksum-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    seen: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    deadline = time.monotonic() + timeout
    try:
        while sum(len(v) for v in seen.values()) < RECORDS:
            assert time.monotonic() < deadline, {p: len(v) for p, v in seen.items()}
            msg = consumer.poll(0.5)
            if msg is None or msg.error() is not None:
                continue
            seen[msg.partition()].append((msg.key() or b"") + b"\x00" + (msg.value() or b""))
    finally:
        consumer.close()
    assert sum(len(v) for v in seen.values()) == RECORDS
    return {p: hashlib.sha256(b"\x01".join(v)).hexdigest() for p, v in seen.items()}


def wait_until(what: str, check: Callable[[], Any], timeout: float = 90) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(1)


def topic_configs(bootstrap: str, topic: str) -> dict[str, str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    described = admin.describe_configs([resource])[resource].result(30)
    return {name: entry.value for name, entry in described.items()}


def group_offsets(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    from confluent_kafka import ConsumerGroupTopicPartitions

    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = ConsumerGroupTopicPartitions(
        group, [TopicPartition(topic, p) for p in range(PARTITIONS)]
    )
    try:
        answer = admin.list_consumer_group_offsets([request])[group].result(30)
    except Exception:
        return {}
    return {tp.partition: tp.offset for tp in answer.topic_partitions if tp.offset >= 0}


def topic_acls(bootstrap: str, topic: str) -> set[tuple[str, AclOperation]]:
    """(principal, operation) of the ALLOW ACLs on the literal ``topic``."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    pattern = AclBindingFilter(
        ResourceType.TOPIC,
        topic,
        ResourcePatternType.LITERAL,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ALLOW,
    )
    return {(b.principal, b.operation) for b in admin.describe_acls(pattern).result(30)}


def mirror_and_check(
    mm2_dist: Any, source: str, target: BrokerProcess, run_dir: Path, *, acls: bool = False
) -> None:
    expected = fill_source(source)
    extra = {}
    if acls:
        admin = AdminClient({"bootstrap.servers": source})
        bindings = [
            AclBinding(
                ResourceType.TOPIC,
                TOPIC,
                ResourcePatternType.LITERAL,
                principal,
                "*",
                operation,
                AclPermissionType.ALLOW,
            )
            for principal, operation in SOURCE_ACLS
        ]
        for future in admin.create_acls(bindings).values():
            future.result(30)
        extra = {"sync.topic.acls.enabled": "true", "sync.topic.acls.interval.seconds": "2"}
    mm2: ManagedProcess = mirror_maker.start_mirror_maker(
        mm2_dist,
        run_dir,
        mirror_maker.mm2_properties(source, target.bootstrap, topics=TOPIC, extra=extra),
    )
    try:
        mirrored = f"source.{TOPIC}"
        wait_until(
            "the mirrored topic",
            lambda: (
                mirrored
                in AdminClient({"bootstrap.servers": target.bootstrap})
                .list_topics(timeout=10)
                .topics
            ),
            timeout=180,
        )
        # Counts and checksums: every record, partition by partition, in order.
        assert checksums(target.bootstrap, mirrored) == expected
        # The topic's config overrides are synced.
        wait_until(
            "the synced configs",
            lambda: all(
                topic_configs(target.bootstrap, mirrored).get(k) == v for k, v in OVERRIDES.items()
            ),
        )
        # The group's offsets, translated: it can resume on the mirror without skipping a
        # record. MirrorMaker 2 translates through a sparse set of offset syncs
        # (KAFKA-14666), so an offset may come out a little below the committed one (some
        # records read again), never above it. The mirror's offsets equal the source's
        # here (the checksums above compare the records in offset order from 0).
        try:
            translated = wait_until(
                "the translated group offsets",
                lambda: (
                    (found := group_offsets(target.bootstrap, GROUP, mirrored)).keys()
                    == COMMITTED.keys()
                    and found
                ),
                timeout=240,
            )
        except AssertionError as exc:
            # Once, in a loaded full run (Kafka -> tierlog), they never came, with no trace.
            raise AssertionError(f"{exc}; MirrorMaker's log ends: {mm2.log_tail(60)}") from None
        for partition, committed in COMMITTED.items():
            assert 0 < translated[partition] <= committed, (partition, translated)
        # What MirrorMaker produced (its producer's codec) is stored in the topic's zstd.
        codecs = {
            header.attributes & Attr.COMPRESSION_MASK
            for segment in target.data_dir.glob(f"{mirrored}-*/*.log")
            for _, header in iter_batches(segment.read_bytes())
        }
        assert codecs == {Compression.ZSTD}, codecs
        if acls:
            wait_until(
                "the synced ACLs",
                lambda: topic_acls(target.bootstrap, mirrored) == MIRRORED_ACLS,
            )
        assert mm2.alive(), mm2.log_tail(40)
        # What it logged while it ran: its own shutdown races its scheduled tasks ("Cannot
        # accept new calls when AdminClient is closing", whatever the clusters are).
        log = mm2.log_path.read_text(errors="replace")
    finally:
        mm2.stop()
    assert " ERROR " not in log, [line for line in log.splitlines() if " ERROR " in line][:5]


def test_tierlog_to_tierlog(
    mm2_dist: Any, tierlog_source: str, target: BrokerProcess, tmp_path: Path
) -> None:
    mirror_and_check(mm2_dist, tierlog_source, target, tmp_path / "mm2", acls=True)


def test_apache_kafka_to_tierlog(
    mm2_dist: Any, kafka_source: str, target: BrokerProcess, tmp_path: Path
) -> None:
    mirror_and_check(mm2_dist, kafka_source, target, tmp_path / "mm2")
