"""Incremental fetch sessions (KIP-227): the cache's rules in isolation, then kafka-python's
session-using consumer and raw Fetch requests against a real broker process."""

from __future__ import annotations

import re
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, TopicPartition

from tests.broker.harness import BrokerProcess
from tests.raw_client import RawClient, fetch_body, request
from tierlog.broker.fetch_sessions import FetchSessionCache, SessionPartition
from tierlog.protocol import ApiKey

FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71


def metric(broker: BrokerProcess, name: str) -> float:
    port = int(re.findall(r"metrics on http://[^:]+:(\d+)/", broker.log_text())[-1])
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as page:
        text = page.read().decode()
    found = re.search(rf"^{name} (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


def part(topic: str, index: int) -> SessionPartition:
    return SessionPartition(topic, None, index, 0, 1 << 20)


def test_a_full_cache_evicts_only_sessions_idle_long_enough() -> None:
    now = [0.0]
    cache = FetchSessionCache(2, min_eviction_ms=1000, clock=lambda: now[0])
    a = cache.open([part("t", 0)])
    b = cache.open([part("t", 1)], privileged=True)
    assert a is not None and b is not None and a.session_id != b.session_id
    assert cache.open([part("t", 2)]) is None  # both in use
    now[0] = 5000
    assert cache.get(a.session_id) is a  # a used again: b is now the least recent
    c = cache.open([part("t", 2)])
    # b is a follower's (privileged): a consumer's session cannot push it out, and a was
    # just used, so there is no room.
    assert c is None
    now[0] = 7000
    follower = cache.open([part("t", 3)], privileged=True)
    assert follower is not None and cache.get(b.session_id) is None and len(cache) == 2


def test_epochs_count_from_one_and_wrap() -> None:
    cache = FetchSessionCache()
    session = cache.open([part("t", 0)])
    assert session is not None and session.epoch == 1
    session.advance()
    assert session.epoch == 2
    session.epoch = 2**31 - 1
    session.advance()
    assert session.epoch == 1


def test_a_partition_is_answered_only_when_something_changed() -> None:
    p = part("t", 0)
    assert p.must_answer(False, 0, 10, 10, 0, False)  # never answered before
    assert not p.must_answer(False, 0, 10, 10, 0, False)
    assert p.must_answer(False, 0, 11, 11, 0, False)  # the high watermark moved
    assert p.must_answer(True, 0, 11, 11, 0, False)  # records
    assert p.must_answer(False, 6, 11, 11, 0, False)  # an error
    assert p.must_answer(False, 0, 11, 11, 0, True)  # a preferred read replica


def answered(response: Any) -> dict[int, int]:
    """partition -> bytes of records, over every topic of a Fetch answer."""
    return {
        int(p.partition_index): len(p.records or b"")
        for t in response.responses
        for p in t.partitions
    }


def test_sessions_on_a_real_broker(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", {"metrics.http.port": "0"}).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("sessions", 4, 1)])["sessions"].result(30)
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(40):
            producer.produce("sessions", value=b"%d" % i, partition=i % 4)
        assert producer.flush(30) == 0
        client = RawClient(broker.port)
        metadata = client.call(
            request(
                ApiKey.METADATA,
                12,
                {
                    "topics": [{"name": "sessions", "topic_id": uuid.UUID(int=0)}],
                    "allow_auto_topic_creation": False,
                    "include_topic_authorized_operations": False,
                },
            )
        )
        topic_uuid = metadata.topics[0].topic_id
        try:

            def fetch(
                partitions: dict[int, int],
                session_id: int,
                epoch: int,
                forget: tuple[int, ...] = (),
            ) -> Any:
                body = fetch_body(
                    topic_uuid,
                    partitions,
                    session_id=session_id,
                    session_epoch=epoch,
                    forget=forget,
                )
                return client.call(request(ApiKey.FETCH, 13, body))

            # A full fetch with epoch 0 opens a session and answers every partition.
            first = fetch({0: 0, 1: 0, 2: 0, 3: 0}, 0, 0)
            assert first.session_id != 0 and first.error_code == 0
            assert all(size > 0 for size in answered(first).values())
            sid = first.session_id
            # The client names the partitions whose offsets moved; nothing new comes back.
            assert answered(fetch({0: 10, 1: 10, 2: 10, 3: 10}, sid, 1)) == {}
            assert answered(fetch({}, sid, 2)) == {}
            # New data in partition 2 only: only it comes back.
            producer.produce("sessions", value=b"more", partition=2)
            assert producer.flush(30) == 0
            assert set(answered(fetch({}, sid, 3))) == {2}
            # Partition 1 from offset 5 again (a rewind), partition 3 forgotten; partition 2
            # (offset 11 now) has nothing new.
            again = fetch({1: 5, 2: 11}, sid, 4, forget=(3,))
            assert set(answered(again)) == {1} and answered(again)[1] > 0
            # A wrong epoch, an unknown session.
            assert fetch({}, sid, 9).error_code == INVALID_FETCH_SESSION_EPOCH
            assert fetch({}, 12345, 1).error_code == FETCH_SESSION_ID_NOT_FOUND
            # Epoch -1 closes it: a full, sessionless fetch.
            closed = fetch({0: 0}, sid, -1)
            assert closed.session_id == 0 and set(answered(closed)) == {0}
            assert fetch({}, sid, 5).error_code == FETCH_SESSION_ID_NOT_FOUND
        finally:
            client.close()

        # kafka-python fetches in sessions (KIP-227): every record, once, in order.
        consumer = KafkaConsumer(
            bootstrap_servers=broker.bootstrap, enable_auto_commit=False, consumer_timeout_ms=5000
        )
        consumer.assign([TopicPartition("sessions", p) for p in range(4)])
        consumer.seek_to_beginning()
        got: dict[int, list[bytes]] = {p: [] for p in range(4)}
        for message in consumer:
            got[message.partition].append(message.value)
            if sum(len(v) for v in got.values()) == 41:
                break
        # The consumer is still open: its session is in the cache.
        assert metric(broker, "kafka_server_fetchsessioncache_numincrementalfetchsessions") >= 1
        consumer.close()
        assert got[0] == [b"%d" % i for i in range(0, 40, 4)]
        assert got[2] == [b"%d" % i for i in range(2, 40, 4)] + [b"more"]
    finally:
        broker.stop()
