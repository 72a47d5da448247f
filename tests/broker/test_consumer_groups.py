"""Consumer groups with real clients: partitions split among members and rebalanced as they
come and go, commits survive, and the paper's queue vs publish-subscribe semantics."""

from __future__ import annotations

import time
from collections.abc import Callable

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka.admin import KafkaAdminClient

from tests.broker.harness import BrokerProcess


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(timeout=10)


def produce(bootstrap: str, topic: str, count: int, start: int = 0) -> None:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 2, "enable.idempotence": True}
    )
    for i in range(start, start + count):
        producer.produce(topic, key=b"key-%d" % i, value=b"%d" % i)
    assert producer.flush(20) == 0


def consumer(bootstrap: str, group: str, **extra: object) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            **extra,
        }
    )


def poll_until(
    consumers: list[Consumer],
    done: Callable[[], bool],
    timeout: float = 30.0,
    sink: list[bytes] | None = None,
) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "condition not reached in time"
        for c in consumers:
            msg = c.poll(0.1)
            if msg is not None and msg.error() is None and sink is not None:
                sink.append(msg.value())


def assigned(c: Consumer) -> set[int]:
    return {tp.partition for tp in c.assignment()}


def test_members_split_partitions_and_rebalance(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "clicks", 4)
    a = consumer(broker.bootstrap, "splitters")
    a.subscribe(["clicks"])
    poll_until([a], lambda: assigned(a) == {0, 1, 2, 3})
    b = consumer(broker.bootstrap, "splitters")
    b.subscribe(["clicks"])
    poll_until([a, b], lambda: len(assigned(a)) == 2 and len(assigned(b)) == 2)
    assert assigned(a) | assigned(b) == {0, 1, 2, 3}
    assert not assigned(a) & assigned(b)
    b.close()  # LeaveGroup: the survivor takes every partition back
    poll_until([a], lambda: assigned(a) == {0, 1, 2, 3})
    a.close()


def test_commit_stop_and_resume_loses_nothing(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "orders", 3)
    produce(broker.bootstrap, "orders", 900)
    first = consumer(broker.bootstrap, "billing")
    first.subscribe(["orders"])
    seen: list[bytes] = []
    poll_until([first], lambda: len(seen) >= 400, sink=seen)
    first.commit(asynchronous=False)
    committed = {tp.partition: tp.offset for tp in first.committed(first.assignment(), 10)}
    first.close()
    produce(broker.bootstrap, "orders", 100, start=900)

    second = consumer(broker.bootstrap, "billing")
    second.subscribe(["orders"])
    rest: list[bytes] = []
    poll_until([second], lambda: len(set(seen) | set(rest)) >= 1000, sink=rest)
    second.close()
    assert {int(v) for v in seen} | {int(v) for v in rest} == set(range(1000))
    # The second member started at the committed offsets: nothing before them came again.
    assert len(rest) == 1000 - sum(max(0, o) for o in committed.values())  # -1001: none


def test_two_groups_each_receive_every_message(broker: BrokerProcess) -> None:
    """Queue within a group, publish-subscribe across groups (the Kafka paper, 3.2)."""
    create_topic(broker.bootstrap, "pageviews", 2)
    produce(broker.bootstrap, "pageviews", 500)
    got: dict[str, list[bytes]] = {"analytics": [], "search-index": []}
    members = {g: consumer(broker.bootstrap, g) for g in got}
    for c in members.values():
        c.subscribe(["pageviews"])
    for group, c in members.items():
        poll_until([c], lambda g=group: len(got[g]) >= 500, sink=got[group])
        c.close()
    for values in got.values():
        assert sorted(int(v) for v in values) == list(range(500))


def test_kafka_python_group_consumer_commits_and_admin_sees_it(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "kp", 2)
    produce(broker.bootstrap, "kp", 200)
    kc = KafkaConsumer(
        "kp",
        bootstrap_servers=broker.bootstrap,
        group_id="kp-group",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=5000,
    )
    values = [m.value for m in kc]
    kc.commit()
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    listed = admin.list_groups()
    offsets = admin.list_group_offsets("kp-group")["kp-group"]  # {TopicPartition: meta}
    kc.close()
    admin.close()
    assert sorted(int(v) for v in values) == list(range(200))
    assert "kp-group" in repr(listed)
    assert sum(meta.offset for meta in offsets.values()) == 200


def test_static_member_rejoins_with_same_assignment(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "static", 4)
    a = consumer(broker.bootstrap, "statics", **{"group.instance.id": "worker-a"})
    b = consumer(broker.bootstrap, "statics", **{"group.instance.id": "worker-b"})
    a.subscribe(["static"])
    b.subscribe(["static"])
    poll_until([a, b], lambda: len(assigned(a)) == 2 and len(assigned(b)) == 2)
    before = assigned(b)
    b.close()  # a static member does not leave the group on close (KIP-345)
    b2 = consumer(broker.bootstrap, "statics", **{"group.instance.id": "worker-b"})
    b2.subscribe(["static"])
    poll_until([a, b2], lambda: len(assigned(b2)) == 2)
    assert assigned(b2) == before
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    described = admin.describe_consumer_groups(["statics"])["statics"].result(timeout=10)
    assert sorted(m.group_instance_id for m in described.members) == ["worker-a", "worker-b"]
    a.close()
    b2.close()


def test_committed_offsets_survive_a_restart(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "durable", 2)
    produce(broker.bootstrap, "durable", 100)
    c = consumer(broker.bootstrap, "keepers")
    c.assign([TopicPartition("durable", 0, 0), TopicPartition("durable", 1, 0)])
    c.commit(
        offsets=[TopicPartition("durable", 0, 17), TopicPartition("durable", 1, 23)],
        asynchronous=False,
    )
    c.close()
    broker.kill()  # SIGKILL: no clean shutdown
    broker.start()
    c = consumer(broker.bootstrap, "keepers")
    got = c.committed([TopicPartition("durable", 0), TopicPartition("durable", 1)], timeout=10)
    c.close()
    assert [tp.offset for tp in got] == [17, 23]
