"""Restart after a crash (issue 20 item 11), with real broker processes and a real
ZooKeeper: a broker SIGKILLed and started again within its ZooKeeper session timeout waits
for its old registration to expire, says so in one log line, and serves; a second live
broker with the same id is still refused, after the bound, with one line and no traceback."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.broker.harness import BrokerProcess
from tierlog.broker.coordination import zk_data
from tierlog.broker.coordination.zk_brokers import stale_registration_bound_s
from tierlog.broker.coordination.zk_client import ZkClient

pytestmark = pytest.mark.timeout(120)

# A restarted broker registers after a few seconds of start-up (more on a shared box): the
# crashed one's session must outlive that for the restart to land inside it.
SESSION_TIMEOUT_MS = 15_000
# A second broker that is refused: its own session timeout sets how long it waits.
SHORT_SESSION_TIMEOUT_MS = 4_000
# Start-up besides the wait: interpreter, log recovery, ZooKeeper session (slow when the
# box is shared).
START_SLACK_S = 30.0
WAITING = "is still registered by ZooKeeper session"


@pytest.fixture
def observer(zk_connect: str) -> Iterator[ZkClient]:
    client = ZkClient(zk_connect)
    client.start()
    try:
        yield client
    finally:
        client.stop()


def broker(
    base: Path, name: str, zk_connect: str, session_timeout_ms: int = SESSION_TIMEOUT_MS
) -> BrokerProcess:
    return BrokerProcess(
        base / name,
        {
            "broker.id": "1",
            "zookeeper.connect": zk_connect,
            "zookeeper.session.timeout.ms": str(session_timeout_ms),
            "offsets.topic.replication.factor": "1",
            "default.replication.factor": "1",
        },
    )


def owner(observer: ZkClient) -> int | None:
    """The session holding ``/brokers/ids/1``, None when nobody does."""
    stat = observer.kazoo.exists(zk_data.broker_path(1))
    return None if stat is None else int(stat.ephemeralOwner)


def test_a_broker_killed_and_started_again_at_once_waits_for_its_old_registration(
    tmp_path: Path, zk_connect: str, brokers: list[BrokerProcess], observer: ZkClient
) -> None:
    b = broker(tmp_path, "b1", zk_connect)
    brokers.append(b)
    b.start(timeout=60)
    producer = Producer({"bootstrap.servers": b.bootstrap, "acks": "all"})
    for i in range(10):
        producer.produce("restarted", b"%d" % i)
    assert producer.flush(30) == 0
    old_session = owner(observer)
    assert old_session is not None

    b.kill()
    assert owner(observer) == old_session  # the crash left the registration behind
    began = time.monotonic()
    bound = stale_registration_bound_s(SESSION_TIMEOUT_MS / 1000)  # 20 s
    b.start(timeout=bound + START_SLACK_S)
    took = time.monotonic() - began

    log = b.log_text()
    assert "Traceback" not in log, log[-3000:]
    waiting = [line for line in log.splitlines() if WAITING in line]
    assert len(waiting) == 1 and f"0x{old_session:x}" in waiting[0], waiting
    assert "stale registration of broker 1 expired" in log
    new_session = owner(observer)
    assert new_session is not None and new_session != old_session
    assert took < bound + START_SLACK_S

    # It serves what it acknowledged before the crash.
    consumer = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "after-restart"})
    try:
        consumer.assign([TopicPartition("restarted", 0, 0)])
        seen: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(seen) < 10 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                seen.append(msg.value())
        assert seen == [b"%d" % i for i in range(10)]
    finally:
        consumer.close()


def test_a_live_broker_with_the_same_id_is_refused_after_the_bound_with_one_line(
    tmp_path: Path, zk_connect: str, brokers: list[BrokerProcess], observer: ZkClient
) -> None:
    first = broker(tmp_path, "first", zk_connect)
    brokers.append(first)
    first.start(timeout=60)
    holder = owner(observer)

    second = broker(tmp_path, "second", zk_connect, SHORT_SESSION_TIMEOUT_MS)
    brokers.append(second)
    bound = stale_registration_bound_s(SHORT_SESSION_TIMEOUT_MS / 1000)  # 7 s
    began = time.monotonic()
    with pytest.raises(RuntimeError, match="broker exited early"):
        second.start(timeout=bound + START_SLACK_S)
    assert second.proc is not None
    assert second.proc.wait(10) == 1
    took = time.monotonic() - began

    lines = second.log_text().splitlines()
    assert not [line for line in lines if "Traceback" in line], lines[-30:]
    assert lines[-1].startswith("tierlog: broker id 1 is registered by another live session")
    assert "stop it, or give this one another broker.id" in lines[-1]
    assert len([line for line in lines if WAITING in line]) == 1
    assert took >= bound  # it waited before refusing
    assert took < bound + START_SLACK_S
    # The first broker is untouched: still registered on its session, still serving.
    assert owner(observer) == holder
    assert first.proc is not None and first.proc.poll() is None
    producer = Producer({"bootstrap.servers": first.bootstrap})
    producer.produce("still-served", b"x")
    assert producer.flush(30) == 0
