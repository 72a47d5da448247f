"""KIP-848's consumer protocol with a real client: librdkafka (confluent-kafka) with
``group.protocol=consumer`` against a real broker. Members join and leave and the
coordinator's assignor splits the partitions incrementally, commits carry member epochs,
a regex subscription picks up a topic created later, and a classic group upgrades online
when a consumer-protocol member joins it (and downgrades when it leaves)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.broker.harness import BrokerProcess
from tests.broker.test_consumer_groups import assigned, create_topic, produce

pytestmark = pytest.mark.timeout(240)

# Heartbeats every half second, so that rebalances take a few of them, not minutes.
FAST_GROUPS = {
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.session.timeout.ms": "6000",
}


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path / "data", FAST_GROUPS).start()
    try:
        yield process
    finally:
        process.stop()


def consumer(bootstrap: str, group: str, protocol: str = "consumer", **extra: object) -> Consumer:
    settings: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "group.protocol": protocol,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        **extra,
    }
    if protocol == "classic":  # the consumer protocol takes these from the broker
        settings.setdefault("session.timeout.ms", 6000)
        settings.setdefault("heartbeat.interval.ms", 500)
    return Consumer(settings)


def poll_until(
    consumers: list[Consumer],
    done: Callable[[], bool],
    what: str,
    timeout: float = 60.0,
    sink: dict[tuple[int, int], bytes] | None = None,
) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"not reached in {timeout:.0f} s: {what}"
        for c in consumers:
            msg = c.poll(0.05)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            if sink is not None:
                sink[(msg.partition(), msg.offset())] = msg.value()


def split_evenly(consumers: list[Consumer], partitions: int) -> Callable[[], bool]:
    def check() -> bool:
        owned = [assigned(c) for c in consumers]
        union = set().union(*owned)
        disjoint = sum(len(o) for o in owned) == len(union)
        sizes = {len(o) for o in owned}
        return union == set(range(partitions)) and disjoint and max(sizes) - min(sizes) <= 1

    return check


def test_members_join_and_leave_and_every_record_is_read(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "kip848", 6)
    produce(broker.bootstrap, "kip848", 600)
    seen: dict[tuple[int, int], bytes] = {}
    a = consumer(broker.bootstrap, "joiners")
    a.subscribe(["kip848"])
    poll_until([a], lambda: assigned(a) == set(range(6)), "a owns all six", sink=seen)
    b = consumer(broker.bootstrap, "joiners")
    b.subscribe(["kip848"])
    poll_until([a, b], split_evenly([a, b], 6), "a and b split six", sink=seen)
    c = consumer(broker.bootstrap, "joiners")
    c.subscribe(["kip848"])
    poll_until([a, b, c], split_evenly([a, b, c], 6), "three members, two each", sink=seen)
    poll_until([a, b, c], lambda: len(seen) == 600, "every record", sink=seen)
    for member in (a, b, c):
        member.commit(asynchronous=False)  # OffsetCommit v9 with the member epoch
    b.close()  # leaves with epoch -1: its partitions go to the others
    c.close()
    poll_until([a], lambda: assigned(a) == set(range(6)), "a owns all six again")
    committed = a.committed([TopicPartition("kip848", p) for p in range(6)], timeout=10)
    assert sum(tp.offset for tp in committed) == 600
    a.close()
    assert sorted(int(v) for v in seen.values()) == list(range(600))

    # A restarted member resumes from the committed offsets: nothing is read again.
    produce(broker.bootstrap, "kip848", 60, start=600)
    again = consumer(broker.bootstrap, "joiners")
    again.subscribe(["kip848"])
    later: dict[tuple[int, int], bytes] = {}
    poll_until([again], lambda: len(later) >= 60, "the 60 new records", sink=later)
    assert sorted(int(v) for v in later.values()) == list(range(600, 660))
    again.close()


def test_a_regex_subscription_picks_up_a_topic_created_later(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "metrics-a", 2)
    reader = consumer(broker.bootstrap, "by-pattern")
    reader.subscribe(["^metrics-.*"])  # sent to the coordinator as SubscribedTopicRegex
    poll_until([reader], lambda: len(reader.assignment()) == 2, "metrics-a's partitions")
    create_topic(broker.bootstrap, "metrics-b", 3)
    create_topic(broker.bootstrap, "other", 1)
    produce(broker.bootstrap, "metrics-b", 30)
    seen: dict[tuple[int, int], bytes] = {}
    poll_until(
        [reader],
        lambda: {tp.topic for tp in reader.assignment()} == {"metrics-a", "metrics-b"},
        "metrics-b assigned too",
        sink=seen,
    )
    poll_until([reader], lambda: len(seen) == 30, "metrics-b's records", sink=seen)
    assert len(reader.assignment()) == 5
    reader.close()


def test_a_classic_group_upgrades_online_and_downgrades_back(broker: BrokerProcess) -> None:
    """Two classic members own the partitions; a consumer-protocol member joins and the
    group converts (upgrade, ``group.consumer.migration.policy=bidirectional``), the
    classic members keep consuming through JoinGroup/SyncGroup/Heartbeat served by the
    consumer group and give up their share incrementally; when the consumer-protocol
    member leaves the group becomes classic again. No record is lost meanwhile."""
    create_topic(broker.bootstrap, "mixed", 6)
    produce(broker.bootstrap, "mixed", 300)
    seen: dict[tuple[int, int], bytes] = {}
    classic = [
        consumer(
            broker.bootstrap,
            "migrating",
            "classic",
            **{"partition.assignment.strategy": "cooperative-sticky"},
        )
        for _ in range(2)
    ]
    for member in classic:
        member.subscribe(["mixed"])
    poll_until(classic, split_evenly(classic, 6), "the classic members split six", sink=seen)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})

    def group_type() -> str:
        found = admin.describe_consumer_groups(["migrating"])["migrating"].result(10)
        return str(found.type).rsplit(".", 1)[-1].lower()

    assert group_type() == "classic"
    modern = consumer(broker.bootstrap, "migrating")
    modern.subscribe(["mixed"])
    everyone = [*classic, modern]
    poll_until(everyone, split_evenly(everyone, 6), "three members, two each", sink=seen)
    assert group_type() == "consumer"
    produce(broker.bootstrap, "mixed", 300, start=300)
    poll_until(everyone, lambda: len(seen) == 600, "every record while mixed", sink=seen)

    modern.close()  # the last consumer-protocol member leaves: back to classic
    poll_until(classic, split_evenly(classic, 6), "the classic members split six again")
    poll_until(classic, lambda: group_type() == "classic", "a classic group again")
    for member in classic:
        member.close()
    assert sorted(int(v) for v in seen.values()) == list(range(600))
