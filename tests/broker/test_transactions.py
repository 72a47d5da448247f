"""Transactions with real clients (confluent-kafka's and kafka-python's transactional APIs)
against a real broker process: commit and abort, read_committed vs read_uncommitted, zombie
fencing, a producer killed mid-transaction, transaction timeouts, offsets sent to a
transaction."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTopicPartition

from tests.broker.harness import BrokerProcess
from tests.raw_client import RawClient, request
from tierlog.protocol.versions import ApiKey

TXN_OVERRIDES = {
    "transaction.state.log.num.partitions": "4",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "300",
}


@pytest.fixture
def txn_broker(tmp_path: Path):
    process = BrokerProcess(tmp_path / "data", TXN_OVERRIDES).start()
    try:
        yield process
    finally:
        process.stop()


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(timeout=10)


def transactional_producer(bootstrap: str, transactional_id: str, **extra: object) -> Producer:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id,
            "linger.ms": 5,
            "log_level": 4,
            **extra,
        }
    )
    producer.init_transactions(15)
    return producer


def read_values(
    bootstrap: str,
    topic: str,
    partitions: int,
    isolation: str,
    *,
    settle_s: float = 1.5,
    timeout_s: float = 20.0,
) -> list[bytes]:
    """Every value from offset 0, read until nothing new came for ``settle_s``."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "reader",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "log_level": 4,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    quiet_since = time.monotonic()
    try:
        while time.monotonic() < deadline and time.monotonic() - quiet_since < settle_s:
            msg = consumer.poll(0.2)
            if msg is None or msg.error() is not None:
                continue
            values.append(msg.value())
            quiet_since = time.monotonic()
    finally:
        consumer.close()
    return values


def last_stable_offset(bootstrap: str, topic: str, partition: int = 0) -> int:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "lso",
            "isolation.level": "read_committed",
            "log_level": 4,
        }
    )
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        return int(high)
    finally:
        consumer.close()


def test_read_committed_sees_exactly_the_committed_records(txn_broker: BrokerProcess) -> None:
    bootstrap = txn_broker.bootstrap
    create_topic(bootstrap, "orders", partitions=2)
    producer = transactional_producer(bootstrap, "orders-writer")
    committed: list[bytes] = []
    aborted: list[bytes] = []
    for n in range(6):
        producer.begin_transaction()
        batch = [f"txn{n}-{i}".encode() for i in range(5)]
        for i, value in enumerate(batch):
            producer.produce("orders", value, partition=i % 2)
        producer.flush(10)  # so the aborted ones reach the log (abort purges unsent ones)
        if n % 3 == 1:
            producer.abort_transaction(15)
            aborted += batch
        else:
            producer.commit_transaction(15)
            committed += batch
    producer.flush(10)
    seen = read_values(bootstrap, "orders", 2, "read_committed")
    assert sorted(seen) == sorted(committed)
    everything = read_values(bootstrap, "orders", 2, "read_uncommitted")
    assert sorted(everything) == sorted(committed + aborted)


def test_an_open_transaction_holds_read_committed_readers_at_its_start(
    txn_broker: BrokerProcess,
) -> None:
    bootstrap = txn_broker.bootstrap
    create_topic(bootstrap, "held")
    plain = Producer({"bootstrap.servers": bootstrap, "log_level": 4})
    plain.produce("held", b"before", partition=0)
    plain.flush(10)
    producer = transactional_producer(bootstrap, "held-writer")
    producer.begin_transaction()
    producer.produce("held", b"open", partition=0)
    producer.flush(10)
    plain.produce("held", b"after", partition=0)
    plain.flush(10)
    assert last_stable_offset(bootstrap, "held") == 1  # the open transaction's first offset
    assert read_values(bootstrap, "held", 1, "read_committed") == [b"before"]
    producer.commit_transaction(15)
    assert read_values(bootstrap, "held", 1, "read_committed") == [b"before", b"open", b"after"]
    assert last_stable_offset(bootstrap, "held") == 4  # past the COMMIT marker


def fenced(call: Callable[[], object]) -> KafkaError:
    """The error ``call`` raises, asserted to be librdkafka's fatal _FENCED (what it makes
    of PRODUCER_FENCED and of INVALID_PRODUCER_EPOCH for a transactional producer)."""
    with pytest.raises(KafkaException) as caught:
        call()
    error: KafkaError = caught.value.args[0]
    assert (error.code(), error.fatal()) == (KafkaError._FENCED, True), error
    return error


def test_a_second_instance_fences_the_first(txn_broker: BrokerProcess) -> None:
    bootstrap = txn_broker.bootstrap
    create_topic(bootstrap, "fenced")
    zombie = transactional_producer(bootstrap, "same-id")
    zombie.begin_transaction()
    zombie.produce("fenced", b"zombie", partition=0)
    zombie.flush(10)
    successor = transactional_producer(bootstrap, "same-id")  # aborts the zombie's
    successor.begin_transaction()
    successor.produce("fenced", b"successor", partition=0)
    successor.commit_transaction(15)
    # The produce path: the partition refuses the old epoch (INVALID_PRODUCER_EPOCH).
    zombie.produce("fenced", b"late", partition=0)
    error = fenced(lambda: zombie.flush(10))
    assert "ProduceRequest" in str(error) and "old epoch" in str(error), error
    fenced(lambda: zombie.commit_transaction(10))  # fatal from now on
    assert read_values(bootstrap, "fenced", 1, "read_committed") == [b"successor"]


def test_a_fenced_instance_cannot_commit(txn_broker: BrokerProcess) -> None:
    """The commit path: EndTxn with the old epoch is PRODUCER_FENCED."""
    bootstrap = txn_broker.bootstrap
    create_topic(bootstrap, "fenced-commit")
    zombie = transactional_producer(bootstrap, "commit-id")
    zombie.begin_transaction()
    zombie.produce("fenced-commit", b"zombie", partition=0)
    zombie.flush(10)
    transactional_producer(bootstrap, "commit-id")  # fences the zombie, aborts its records
    error = fenced(lambda: zombie.commit_transaction(10))
    assert "Failed to end transaction" in str(error), error
    assert read_values(bootstrap, "fenced-commit", 1, "read_committed") == []


KILLED_PRODUCER = textwrap.dedent(
    """
    import sys, time
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": "killed",
                         "transaction.timeout.ms": int(sys.argv[2]), "log_level": 4})
    producer.init_transactions(15)
    producer.begin_transaction()
    for i in range(20):
        producer.produce("victim", f"half-{i}".encode(), partition=0)
    producer.flush(10)
    print("produced", flush=True)
    time.sleep(60)
    """
)


@pytest.mark.parametrize("ended_by", ["successor", "timeout"])
def test_a_producer_killed_mid_transaction_never_shows_its_records(
    txn_broker: BrokerProcess, ended_by: str
) -> None:
    bootstrap = txn_broker.bootstrap
    create_topic(bootstrap, "victim")
    timeout_ms = "60000" if ended_by == "successor" else "1500"
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_PRODUCER, bootstrap, timeout_ms],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "produced"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    assert last_stable_offset(bootstrap, "victim") == 0
    if ended_by == "successor":
        # The next instance aborts the open transaction before it gets its epoch.
        successor = transactional_producer(bootstrap, "killed")
        successor.begin_transaction()
        successor.produce("victim", b"whole", partition=0)
        successor.commit_transaction(15)
        assert read_values(bootstrap, "victim", 1, "read_committed") == [b"whole"]
        assert len(read_values(bootstrap, "victim", 1, "read_uncommitted")) == 21
    else:
        # Nobody comes back: the coordinator aborts it once its timeout has passed.
        deadline = time.monotonic() + 15
        while last_stable_offset(bootstrap, "victim") == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert last_stable_offset(bootstrap, "victim") == 21  # 20 records + ABORT marker
        assert read_values(bootstrap, "victim", 1, "read_committed") == []


def test_a_transaction_past_its_timeout_is_aborted(txn_broker: BrokerProcess) -> None:
    bootstrap = txn_broker.bootstrap
    create_topic(bootstrap, "slow")
    producer = transactional_producer(bootstrap, "slow-writer", **{"transaction.timeout.ms": 1000})
    producer.begin_transaction()
    producer.produce("slow", b"too-late", partition=0)
    producer.flush(10)
    deadline = time.monotonic() + 15
    while last_stable_offset(bootstrap, "slow") == 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert last_stable_offset(bootstrap, "slow") == 2  # record + ABORT marker
    with pytest.raises(KafkaException):
        producer.commit_transaction(10)
    assert read_values(bootstrap, "slow", 1, "read_committed") == []


def offset_for_time(bootstrap: str, topic: str, timestamp: int, isolation: str) -> int:
    """librdkafka's offsets_for_times (ListOffsets with the consumer's isolation level)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "times",
            "isolation.level": isolation,
            "log_level": 4,
        }
    )
    try:
        (found,) = consumer.offsets_for_times([TopicPartition(topic, 0, timestamp)], timeout=10)
        assert found.error is None, found.error
        return int(found.offset)
    finally:
        consumer.close()


def test_a_timestamp_lookup_never_answers_past_the_lso_for_read_committed(
    txn_broker: BrokerProcess,
) -> None:
    """Kafka's fetchOffsetForTimestamp: read_committed is bounded by the LSO, not the
    high watermark, for timestamps as for "latest"."""
    bootstrap = txn_broker.bootstrap
    create_topic(bootstrap, "times")
    t0 = int(time.time() * 1000) - 60_000
    plain = Producer({"bootstrap.servers": bootstrap, "log_level": 4})
    plain.produce("times", b"before", partition=0, timestamp=t0)  # 0
    assert plain.flush(10) == 0
    producer = transactional_producer(bootstrap, "timed-writer")
    producer.begin_transaction()
    producer.produce("times", b"open", partition=0, timestamp=t0 + 1000)  # 1, open
    producer.flush(10)
    assert offset_for_time(bootstrap, "times", t0 + 500, "read_uncommitted") == 1
    # The record is there, but read_committed cannot read it yet: no offset (-1, the end).
    assert offset_for_time(bootstrap, "times", t0 + 500, "read_committed") == -1
    assert offset_for_time(bootstrap, "times", t0, "read_committed") == 0
    producer.commit_transaction(15)
    deadline = time.monotonic() + 10
    while last_stable_offset(bootstrap, "times") < 3 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert offset_for_time(bootstrap, "times", t0 + 500, "read_committed") == 1


def test_offsets_sent_to_a_transaction_count_only_when_it_commits(
    txn_broker: BrokerProcess,
) -> None:
    bootstrap = txn_broker.bootstrap
    create_topic(bootstrap, "source")
    create_topic(bootstrap, "sink")
    plain = Producer({"bootstrap.servers": bootstrap, "log_level": 4})
    for i in range(10):
        plain.produce("source", f"in-{i}".encode(), partition=0)
    plain.flush(10)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "copier",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "log_level": 4,
        }
    )
    producer = transactional_producer(bootstrap, "copier-txn")
    try:
        for commit, wanted_offset in ((False, None), (True, 10)):
            consumer.assign([TopicPartition("source", 0, 0)])
            taken = []
            deadline = time.monotonic() + 15
            while len(taken) < 10 and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is not None and msg.error() is None:
                    taken.append(msg)
            assert len(taken) == 10
            producer.begin_transaction()
            for msg in taken:
                producer.produce("sink", msg.value().replace(b"in", b"out"), partition=0)
            producer.send_offsets_to_transaction(
                [TopicPartition("source", 0, taken[-1].offset() + 1)],
                consumer.consumer_group_metadata(),
                15,
            )
            if commit:
                producer.commit_transaction(15)
            else:
                producer.abort_transaction(15)
            committed = consumer.committed([TopicPartition("source", 0)], timeout=10)[0].offset
            assert committed == (wanted_offset if wanted_offset is not None else -1001)
    finally:
        consumer.close()
    sink = read_values(bootstrap, "sink", 1, "read_committed")
    assert sink == [f"out-{i}".encode() for i in range(10)]


def test_kafka_python_transactions_and_read_committed(txn_broker: BrokerProcess) -> None:
    bootstrap = txn_broker.bootstrap
    create_topic(bootstrap, "kp")
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kp-writer")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("kp", b"one", partition=0)
    producer.commit_transaction()
    producer.begin_transaction()
    producer.send("kp", b"two", partition=0)
    producer.flush()
    producer.abort_transaction()
    producer.close()

    def read(isolation: str) -> list[bytes]:
        consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            isolation_level=isolation,
            consumer_timeout_ms=3000,
            enable_auto_commit=False,
        )
        consumer.assign([KTopicPartition("kp", 0)])
        consumer.seek(KTopicPartition("kp", 0), 0)
        try:
            return [message.value for message in consumer]
        finally:
            consumer.close()

    assert read("read_committed") == [b"one"]
    assert read("read_uncommitted") == [b"one", b"two"]


def list_transactions_by_pattern(port: int, pattern: str) -> tuple[int, list[str], float]:
    """ListTransactions v2 (KIP-1152) with ``pattern``: the error code, the ids listed and
    the seconds the broker took to answer."""
    client = RawClient(port, timeout=30)
    try:
        body = {
            "state_filters": [],
            "producer_id_filters": [],
            "duration_filter": -1,
            "transactional_id_pattern": pattern,
        }
        started = time.monotonic()
        response = client.call(request(ApiKey.LIST_TRANSACTIONS, 2, body))
        took = time.monotonic() - started
    finally:
        client.close()
    ids = sorted(state.transactional_id for state in response.transaction_states)
    return response.error_code, ids, took


def test_a_pathological_id_pattern_answers_at_once(txn_broker: BrokerProcess) -> None:
    # (a+)+b against 32 a's: a backtracking engine tries every split of them (2**32, many
    # minutes with the event loop held: the broker answers nothing else meanwhile); Kafka's
    # RE2/J and tierlog's RE2 read the id once.
    long_id = "a" * 32
    transactional_producer(txn_broker.bootstrap, long_id).close()
    assert list_transactions_by_pattern(txn_broker.port, "(a+)+")[:2] == (0, [long_id])
    code, ids, took = list_transactions_by_pattern(txn_broker.port, "(a+)+b")
    assert (code, ids) == (0, [])
    assert took < 1.0, f"ListTransactions with (a+)+b took {took:.1f} s"
