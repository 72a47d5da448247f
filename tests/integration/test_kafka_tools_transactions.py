"""Apache Kafka's own Java transactional clients and tools against a real 3-broker tierlog
cluster (ZooKeeper, ``__transaction_state`` with 3 replicas and min ISR 2; topics RF 3,
``min.insync.replicas`` 2).

``TransactionalMessageCopier`` (the exactly-once copier of Kafka's system tests: a
read_committed KafkaConsumer, a transactional KafkaProducer, offsets sent to each
transaction, a third of the transactions aborted on purpose) copies records a plain producer
wrote; read_committed readers (confluent-kafka and Kafka's ConsoleConsumer) then see every
input value exactly once, in order per partition, and a read_uncommitted reader sees the
aborted copies too. Two copiers subscribed in one group (``--group-mode``) hand partitions
over in a rebalance, and still copy each input once (KIP-447 generation fencing); copiers
whose transaction coordinator is SIGKILLed mid-copy and restarted copy each input once too.

``kafka-transactions`` (TransactionsCommand): ``list``, ``describe``, ``describe-producers``
(leader and each replica) and ``find-hanging`` on a transaction a confluent-kafka producer
leaves open, then ``abort`` by start offset (DescribeProducers, then WriteTxnMarkers sent by
the admin client to the partition leader); ``list --duration-filter`` and
``forceTerminateTransaction`` (an epoch bump that aborts and fences). Checked on the tools'
printed tables and on the partitions' LSO; ``list --transactional-id-pattern``
(ListTransactions v2, KIP-1152: whole ids, and an expression RE2 refuses is an error).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from tests.integration import kafka_tools
from tests.integration.cluster_harness import ProcessCluster
from tests.integration.kafka_tools import (
    CONSOLE_CONSUMER,
    MESSAGE_COPIER,
    TRANSACTIONS,
    KafkaDist,
    ToolRun,
)
from tierlog.broker.group.placement import partition_for

# Each test takes under a minute once the jars are cached (the file ~2 min on 2 cores);
# a cold fetch (mvn) comes first.
pytestmark = pytest.mark.timeout(
    180 if kafka_tools.cached_tools() else kafka_tools.kafka_ref.MVN_TIMEOUT + 180
)

TXN_PARTITIONS_KEY = "transaction.state.log.num.partitions"
TXN_OVERRIDES = {
    TXN_PARTITIONS_KEY: "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
}
PARTITIONS = 2  # one copier per input partition, as Kafka's system test runs them
PER_PARTITION = 1500
TRANSACTION_SIZE = 100  # the copier's max.poll.records: at most this many per transaction


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, zookeeper_server: Any
) -> Iterator[ProcessCluster]:
    connect = f"{zookeeper_server.connect}/tierlog-kafka-txn-{uuid.uuid4().hex}"
    c = ProcessCluster(tmp_path_factory.mktemp("kafka-txn"), connect, 3, TXN_OVERRIDES)
    try:
        yield c.start()
    finally:
        c.kill()


def create_topic(cluster: ProcessCluster, name: str, partitions: int) -> None:
    topic = NewTopic(name, partitions, 3, config={"min.insync.replicas": "2"})
    admin = cluster.admin()  # kept alive until the answer: a destroyed client fails it
    admin.create_topics([topic])[name].result(30)
    cluster.wait_for_full_isr(name, partitions, 3)


def read_topic(
    cluster: ProcessCluster, topic: str, partitions: int, isolation: str
) -> dict[int, list[str]]:
    """Every value of each partition from offset 0 up to where the reader stops (the LSO
    for read_committed, the high watermark otherwise), in offset order."""
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
            "log_level": 2,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: dict[int, list[str]] = {p: [] for p in range(partitions)}
    at_end: set[int] = set()
    deadline = time.monotonic() + 60
    try:
        while len(at_end) < partitions:
            assert time.monotonic() < deadline, f"{isolation} read of {topic} stuck: {at_end}"
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                at_end.add(msg.partition())
                continue
            at_end.discard(msg.partition())
            values[msg.partition()].append(msg.value().decode())
    finally:
        consumer.close()
    return values


def committed_offsets(cluster: ProcessCluster, group: str, topic: str, partition: int) -> int:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
    try:
        [tp] = consumer.committed([TopicPartition(topic, partition)], timeout=15)
        return int(tp.offset)
    finally:
        consumer.close()


def status_lines(run: ToolRun) -> list[dict[str, Any]]:
    """The copier's JSON status lines (one per poll loop, one at shutdown)."""
    return [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]


def produce_inputs(cluster: ProcessCluster, topic: str, per_partition: int) -> dict[int, list[str]]:
    """Distinct values, ``p<partition>-<index>``, written by a plain (non-transactional)
    producer to each partition of ``topic``."""
    inputs = {p: [f"p{p}-{i:05d}" for i in range(per_partition)] for p in range(PARTITIONS)}
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 20})
    for p, values in inputs.items():
        for value in values:
            producer.produce(topic, value.encode(), key=value[:2].encode(), partition=p)
            producer.poll(0)
    assert producer.flush(30) == 0
    return inputs


def copier(
    tools: KafkaDist,
    cluster: ProcessCluster,
    source: str,
    target: str,
    name: str,
    *extra: str,
    group: str = "",
) -> ToolRun:
    """One TransactionalMessageCopier run, transactional id ``name``, consumer group
    ``group`` (default ``<name>-group``), aborting a third of its transactions; each record
    goes to the output partition of its input partition's number."""
    args = [
        "--broker-list", cluster.bootstrap,
        "--input-topic", source,
        "--output-topic", target,
        "--transactional-id", name,
        "--consumer-group", group or f"{name}-group",
        "--transaction-size", str(TRANSACTION_SIZE),
        "--enable-random-aborts",
        *extra,
    ]  # fmt: skip
    return kafka_tools.run_tool(tools, MESSAGE_COPIER, args, timeout=120)


def shutdown_status(run: ToolRun, name: str) -> dict[str, Any]:
    """The copier's last status line, after a clean exit."""
    assert run.returncode == 0, run.output
    assert "] ERROR " not in run.stderr, run.output
    done = status_lines(run)[-1]
    assert done["stage"] == "ShutdownComplete", run.output
    assert done["transactionalId"] == name, run.output
    return done


# -- TransactionalMessageCopier + read_committed readers -------------------------------------


def test_copier_with_random_aborts_then_read_committed_sees_each_input_once(
    tools: KafkaDist, cluster: ProcessCluster
) -> None:
    c = cluster
    create_topic(c, "copy-in", PARTITIONS)
    create_topic(c, "copy-out", PARTITIONS)
    inputs = produce_inputs(c, "copy-in", PER_PARTITION)

    def copy(partition: int) -> ToolRun:
        # Both ways of sending offsets: by group id, and with the consumer's group metadata.
        extra = ["--use-group-metadata"] if partition % 2 else []
        return copier(
            tools,
            c,
            "copy-in",
            "copy-out",
            f"copier-{partition}",
            *["--input-partition", str(partition), "--max-messages", str(PER_PARTITION)],
            *extra,
        )

    with ThreadPoolExecutor(PARTITIONS) as pool:
        runs = list(pool.map(copy, range(PARTITIONS)))
    for partition, run in enumerate(runs):
        done = shutdown_status(run, f"copier-{partition}")
        assert (done["totalProcessed"], done["remaining"]) == (PER_PARTITION, 0), done
        # The offsets went with the transactions: the group resumes after the last input.
        assert committed_offsets(c, f"copier-{partition}-group", "copy-in", partition) == (
            PER_PARTITION
        )

    committed = read_topic(c, "copy-out", PARTITIONS, "read_committed")
    for p in range(PARTITIONS):
        assert len(committed[p]) == len(inputs[p]), (p, len(committed[p]))
        assert committed[p] == inputs[p], p
    # The aborted copies are in the log: a reader that ignores the markers sees them too.
    # (A third of ~15 transactions per copier aborts: none in both runs has odds < 1e-5.)
    uncommitted = read_topic(c, "copy-out", PARTITIONS, "read_uncommitted")
    for p in range(PARTITIONS):
        assert set(uncommitted[p]) == set(inputs[p]), p
    total = PARTITIONS * PER_PARTITION
    assert sum(map(len, uncommitted.values())) > total

    # Kafka's own read_committed consumer: asks for one more than there is, so an aborted
    # record leaking through would be printed; it stops after --timeout-ms with none left.
    console_args = [
        "--bootstrap-server", c.bootstrap,
        "--topic", "copy-out",
        "--isolation-level", "read_committed",
        "--from-beginning",
        "--max-messages", str(total + 1),
        "--timeout-ms", "10000",
    ]  # fmt: skip
    console = kafka_tools.run_tool(tools, CONSOLE_CONSUMER, console_args, timeout=90)
    assert console.returncode == 0, console.output
    printed = console.stdout.splitlines()
    assert f"Processed a total of {total} messages" in console.stderr, console.output
    for p in range(PARTITIONS):
        assert [v for v in printed if v.startswith(f"p{p}-")] == inputs[p], console.output
    assert len(printed) == total, console.output


def test_copiers_sharing_a_group_fence_each_other_across_rebalances(
    tools: KafkaDist, cluster: ProcessCluster
) -> None:
    """Two copiers subscribed in one group (``--group-mode --use-group-metadata``, KIP-447):
    partitions move between them as each joins and leaves, and a transaction whose offsets
    carry a stale generation is refused and aborted, so every input is still copied once."""
    c = cluster
    per_partition = PER_PARTITION // 2
    create_topic(c, "group-in", PARTITIONS)
    create_topic(c, "group-out", PARTITIONS)
    inputs = produce_inputs(c, "group-in", per_partition)

    def copy(n: int) -> ToolRun:
        # In group mode --input-partition is required but ignored.
        return copier(
            tools,
            c,
            "group-in",
            "group-out",
            f"group-copier-{n}",
            *["--input-partition", "0", "--group-mode", "--use-group-metadata"],
            group="shared-group",
        )

    with ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(copy, range(2)))
    done = [shutdown_status(run, f"group-copier-{n}") for n, run in enumerate(runs)]
    assert [d["remaining"] for d in done] == [0, 0], done
    # Only committed transactions count: between them, each input once.
    assert sum(d["totalProcessed"] for d in done) == PARTITIONS * per_partition, done
    for p in range(PARTITIONS):
        assert committed_offsets(c, "shared-group", "group-in", p) == per_partition
    assert read_topic(c, "group-out", PARTITIONS, "read_committed") == inputs


# -- kafka-transactions -----------------------------------------------------------------------


def transactions(tools: KafkaDist, bootstrap: str, command: str) -> ToolRun:
    run = kafka_tools.run_tool(
        tools, TRANSACTIONS, ["--bootstrap-server", bootstrap, *command.split()]
    )
    assert run.returncode == 0, run.output
    return run


def table(run: ToolRun) -> list[dict[str, str]]:
    """The rows of the table a TransactionsCommand printed, keyed by its header (no cell
    holds whitespace here; only the last, a list, may be empty)."""
    lines = [line.split() for line in run.stdout.splitlines() if line.strip()]
    assert lines, run.output
    header, *rows = lines
    assert all(len(header) - 1 <= len(row) <= len(header) for row in rows), run.output
    return [dict(zip(header, [*row, ""][: len(header)], strict=True)) for row in rows]


def test_transactions_tool_lists_describes_and_aborts_an_open_transaction(
    tools: KafkaDist, cluster: ProcessCluster
) -> None:
    c = cluster
    create_topic(c, "open-txn", 2)
    producer = Producer(
        {
            "bootstrap.servers": c.bootstrap,
            "transactional.id": "left-open",
            "transaction.timeout.ms": 120_000,  # the coordinator must not abort it itself
            "linger.ms": 5,
            "log_level": 2,
        }
    )
    producer.init_transactions(60)
    producer.begin_transaction()  # one committed transaction: offsets 0, 1 and a marker at 2
    for i in range(2):
        producer.produce("open-txn", b"committed-%d" % i, partition=0)
    producer.commit_transaction(60)
    producer.begin_transaction()  # the open one: partition 0 from offset 3, and partition 1
    for i in range(3):
        producer.produce("open-txn", b"open-%d" % i, partition=0)
    producer.produce("open-txn", b"open-p1", partition=1)
    assert producer.flush(30) == 0

    [listed] = [r for r in table(transactions(tools, c.bootstrap, "list"))
                if r["TransactionalId"] == "left-open"]  # fmt: skip
    assert listed["TransactionState"] == "Ongoing", listed
    producer_id = listed["ProducerId"]

    described = table(transactions(tools, c.bootstrap, "describe --transactional-id left-open"))
    assert len(described) == 1, described
    [row] = described
    assert row["TransactionState"] == "Ongoing", row
    assert row["ProducerId"] == producer_id, row
    assert row["CoordinatorId"] == listed["Coordinator"], (row, listed)
    assert row["TransactionTimeoutMs"] == "120000", row
    assert sorted(row["TopicPartitions"].split(",")) == ["open-txn-0", "open-txn-1"], row
    assert int(row["TransactionDurationMs"]) >= 0, row

    def producers(partition: int, on: str = "") -> dict[str, dict[str, str]]:
        command = f"describe-producers --topic open-txn --partition {partition} {on}"
        return {r["ProducerId"]: r for r in table(transactions(tools, c.bootstrap, command))}

    state = producers(0)[producer_id]
    assert state["CurrentTransactionStartOffset"] == "3", state
    assert state["LastSequence"] == "4", state  # five records, sequences 0..4
    assert state["ProducerEpoch"] == row["ProducerEpoch"], (state, row)
    assert producers(1)[producer_id]["CurrentTransactionStartOffset"] == "0"
    # --broker-id asks that replica, leader or follower, for its own producer state.
    replicas = sorted(c.partitions("open-txn")[0].replicas)
    for broker in replicas:
        on_replica = producers(0, f"--broker-id {broker}")[producer_id]
        assert on_replica["CurrentTransactionStartOffset"] == "3", (broker, on_replica)
        assert on_replica["ProducerEpoch"] == row["ProducerEpoch"], (broker, on_replica)

    # Open for longer than a zero timeout, so a candidate: its transactional id is looked
    # up (ListTransactions by producer id) and described, and the coordinator still holds
    # both partitions of the transaction: not hanging. Also broker by broker (every
    # partition it hosts, followers included).
    hanging = transactions(
        tools, c.bootstrap, "find-hanging --topic open-txn --max-transaction-timeout 0"
    )
    assert table(hanging) == [], hanging.output
    follower = next(b for b in replicas if b != c.leader_of("open-txn", 0))
    hanging = transactions(
        tools, c.bootstrap, f"find-hanging --broker-id {follower} --max-transaction-timeout 0"
    )
    assert table(hanging) == [], hanging.output

    # An operator's abort of partition 0's transaction, found by its start offset.
    aborted = transactions(
        tools, c.bootstrap, "abort --topic open-txn --partition 0 --start-offset 3"
    )
    assert aborted.stdout.strip() == "", aborted.output
    assert producers(0)[producer_id]["CurrentTransactionStartOffset"] == "None"
    # Partition 0 is stable again (LSO = high watermark, past the admin's ABORT marker);
    # its read_committed reader sees the committed records only. Partition 1 stays open.
    assert read_topic(c, "open-txn", 1, "read_committed") == {0: ["committed-0", "committed-1"]}
    lso, high = stable_and_high(c, "open-txn", 0)
    assert lso == high == 7, (lso, high)
    lso, high = stable_and_high(c, "open-txn", 1)
    assert (lso, high) == (0, 1)

    # EndTxn answers once the abort is prepared; the markers follow.
    producer.abort_transaction(60)
    c.wait_until(
        lambda: stable_and_high(c, "open-txn", 1) == (2, 2),
        "the coordinator's ABORT marker on open-txn-1 (LSO = high watermark = 2)",
        timeout=15,
    )
    [after] = table(transactions(tools, c.bootstrap, "describe --transactional-id left-open"))
    assert after["TransactionState"] == "CompleteAbort", after
    assert after["TopicPartitions"] == "", after


def stable_and_high(cluster: ProcessCluster, topic: str, partition: int) -> tuple[int, int]:
    """(last stable offset, high watermark) as ListOffsets answers them."""
    committed = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "lso",
            "isolation.level": "read_committed",
            "log_level": 2,
        }
    )
    plain = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "hw",
            "isolation.level": "read_uncommitted",  # librdkafka's default is read_committed
            "log_level": 2,
        }
    )
    try:
        tp = TopicPartition(topic, partition)
        lso = committed.get_watermark_offsets(tp, timeout=10, cached=False)[1]
        high = plain.get_watermark_offsets(tp, timeout=10, cached=False)[1]
        return int(lso), int(high)
    finally:
        committed.close()
        plain.close()


def test_transactions_tool_force_terminates_an_open_transaction(
    tools: KafkaDist, cluster: ProcessCluster
) -> None:
    """``forceTerminateTransaction`` (Admin.forceTerminateTransaction: an InitProducerId for
    the transactional id, as a new instance of the producer sends) bumps the producer epoch,
    which aborts the open transaction and fences the producer that opened it."""
    c = cluster
    create_topic(c, "doomed", 1)
    producer = Producer(
        {
            "bootstrap.servers": c.bootstrap,
            "transactional.id": "doomed",
            "transaction.timeout.ms": 120_000,
            "linger.ms": 5,
            "log_level": 0,  # its fencing is expected
        }
    )
    producer.init_transactions(60)
    producer.begin_transaction()
    for i in range(3):
        producer.produce("doomed", b"doomed-%d" % i, partition=0)
    assert producer.flush(30) == 0
    time.sleep(1.5)  # open for longer than the one-second duration filter below

    # ListTransactions v1 (KIP-994): only transactions open for longer than the filter.
    def listed(duration_ms: int) -> list[str]:
        run = transactions(tools, c.bootstrap, f"list --duration-filter {duration_ms}")
        return [r["TransactionalId"] for r in table(run)]

    assert "doomed" in listed(1000)
    assert "doomed" not in listed(600_000)

    [before] = table(transactions(tools, c.bootstrap, "describe --transactional-id doomed"))
    assert before["TransactionState"] == "Ongoing", before
    run = transactions(tools, c.bootstrap, "forceTerminateTransaction --transactionalId doomed")
    assert run.stdout.strip() == "", run.output
    [after] = table(transactions(tools, c.bootstrap, "describe --transactional-id doomed"))
    # As Kafka's coordinator: one bump fences the open transaction's producer and aborts it
    # (the admin client is told CONCURRENT_TRANSACTIONS and retries), the retried
    # InitProducerId then bumps again and leaves the id Empty.
    assert after["ProducerId"] == before["ProducerId"], (before, after)
    assert int(after["ProducerEpoch"]) == int(before["ProducerEpoch"]) + 2, (before, after)
    assert after["TransactionState"] == "Empty", after
    assert after["TopicPartitions"] == "", after

    c.wait_until(
        lambda: stable_and_high(c, "doomed", 0) == (4, 4),
        "doomed-0 stable past the ABORT marker (LSO = high watermark = 4)",
        timeout=15,
    )
    assert read_topic(c, "doomed", 1, "read_committed") == {0: []}
    producer.produce("doomed", b"late", partition=0)
    with pytest.raises(KafkaException):
        producer.commit_transaction(30)


def test_transactions_tool_lists_by_transactional_id_pattern(
    tools: KafkaDist, cluster: ProcessCluster
) -> None:
    c = cluster
    producers = []
    for transactional_id in ("pattern-a", "pattern-b", "other-pattern-c"):
        producer = Producer(
            {"bootstrap.servers": c.bootstrap, "transactional.id": transactional_id, "log_level": 2}
        )
        producer.init_transactions(60)
        producers.append(producer)

    def listed(pattern: str) -> list[str]:
        run = transactions(tools, c.bootstrap, f"list --transactional-id-pattern {pattern}")
        return sorted(r["TransactionalId"] for r in table(run))

    assert listed("pattern-.*") == ["pattern-a", "pattern-b"]
    assert listed("pattern") == []  # the whole id must match
    assert listed(".*-[bc]") == ["other-pattern-c", "pattern-b"]
    # A lookahead: RE2/J has none, so Kafka answers INVALID_REGULAR_EXPRESSION.
    refused = kafka_tools.run_tool(
        tools,
        TRANSACTIONS,
        ["--bootstrap-server", c.bootstrap, "list", "--transactional-id-pattern", "p(?=a)"],
    )
    assert refused.returncode != 0, refused.output
    assert "INVALID_REGULAR_EXPRESSION" in refused.output, refused.output


def test_copiers_survive_the_coordinator_killed_mid_copy(
    tools: KafkaDist, cluster: ProcessCluster
) -> None:
    """As Kafka's transactions system test with a hard bounce: the broker coordinating one
    copier's transactional id is SIGKILLed while both copy, and restarted; the Java clients
    find the new coordinator and leaders, and the output is still each input once."""
    c = cluster
    per_partition = 3000
    create_topic(c, "bounce-in", PARTITIONS)
    create_topic(c, "bounce-out", PARTITIONS)
    inputs = produce_inputs(c, "bounce-in", per_partition)
    state_partition = partition_for("bounce-copier-0", int(TXN_OVERRIDES[TXN_PARTITIONS_KEY]))
    victim = c.leader_of("__transaction_state", state_partition)

    def copy(partition: int) -> ToolRun:
        return copier(
            tools,
            c,
            "bounce-in",
            "bounce-out",
            f"bounce-copier-{partition}",
            *["--input-partition", str(partition), "--max-messages", str(per_partition)],
            *["--transaction-size", "50", "--use-group-metadata"],
        )

    with ThreadPoolExecutor(PARTITIONS) as pool:
        running = [pool.submit(copy, p) for p in range(PARTITIONS)]
        c.wait_until(
            lambda: stable_and_high(c, "bounce-out", 0)[0] > 0,
            "the first copied transaction committed",
        )
        copied, _ = stable_and_high(c, "bounce-out", 0)
        assert not any(f.done() for f in running), "the copiers finished before the kill"
        c.brokers[victim].kill()
        time.sleep(3)
        c.brokers[victim].start(timeout=60)
        runs = [f.result() for f in running]
    assert copied < per_partition  # (plus its markers) killed mid-copy, not after
    for partition, run in enumerate(runs):
        done = shutdown_status(run, f"bounce-copier-{partition}")
        assert (done["totalProcessed"], done["remaining"]) == (per_partition, 0), done
    assert read_topic(c, "bounce-out", PARTITIONS, "read_committed") == inputs
    c.wait_for_full_isr("bounce-out", PARTITIONS, 3)
