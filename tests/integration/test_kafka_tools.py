"""Apache Kafka's own command-line tools against real tierlog broker processes on a real
ZooKeeper: ``kafka-topics`` (create; describe with ``--under-replicated-partitions`` and
``--unavailable-partitions`` before and after SIGKILL), ``kafka-leader-election`` (PREFERRED
after a leader bounce) and ``kafka-reassign-partitions`` (``--generate``, ``--execute``,
``--verify``, ``--list``). The tools are the Java classes of ``org.apache.kafka:kafka-tools``
fetched by ``tests/integration/kafka_tools.py`` (``make kafka-tools``); results are checked
with confluent-kafka's AdminClient, not with the tools' own word.

``kafka-dump-log --files`` (DumpLogSegments) reads a segment tierlog's log cleaner rewrote,
with an empty batch and a delete horizon, and prints the same batch lines as ``tierlog
dump-log`` (same byte format).

``kafka-configs --entity-type topics`` sets, describes and refuses compression.type and its
KIP-390 levels; DumpLogSegments reads the zstd batches the leader recompressed.

``--generate``/``--execute`` need DescribeLogDirs (API 35); ``--verify`` clears the
replication throttles with an IncrementalAlterConfigs DELETE on every broker resource.
"""

from __future__ import annotations

import io
import json
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_INVALID, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker.harness import BrokerProcess
from tests.cleaned_log import PRODUCER_ID, clean_a_log
from tests.integration import kafka_tools
from tests.integration.cluster_harness import ProcessCluster
from tests.integration.kafka_tools import (
    DUMP_LOG,
    LEADER_ELECTION,
    REASSIGN,
    TOPICS,
    KafkaDist,
    ToolRun,
)
from tests.integration.test_reassignment import alter_reassignments, freeze, thaw
from tierlog.tools.dump_log import dump

# Each test is well under 60 s once the jars are cached; a cold fetch (mvn) comes first.
pytestmark = pytest.mark.timeout(
    90 if kafka_tools.cached_tools() else kafka_tools.kafka_ref.MVN_TIMEOUT + 90
)

LISTED = re.compile(r"^\s*Topic: (\S+)\s+Partition: (\d+)\s", re.MULTILINE)


@pytest.fixture
def cluster3(tmp_path: Path, zk_connect: str) -> Iterator[ProcessCluster]:
    # No automatic rebalance: the election test wants leadership to stay off the preferred
    # replica until the tool asks for it.
    c = ProcessCluster(tmp_path, zk_connect, 3, {"auto.leader.rebalance.enable": "false"})
    try:
        yield c.start()
    finally:
        c.kill()


@pytest.fixture(scope="module")
def cluster4(tmp_path_factory: pytest.TempPathFactory, zookeeper_server: Any) -> Iterator[Any]:
    """Four brokers for the reassignment tests, each on topics of its own."""
    connect = f"{zookeeper_server.connect}/tierlog-kafka-tools-{uuid.uuid4().hex}"
    c = ProcessCluster(tmp_path_factory.mktemp("kafka-tools"), connect, 4)
    try:
        yield c.start()
    finally:
        c.kill()


def tool(
    tools: KafkaDist, main_class: str, bootstrap: str, command: str, ok: bool = True
) -> ToolRun:
    """Run a tool against ``bootstrap`` with ``command``'s words (paths here have no spaces);
    with ``ok`` its exit status must be 0."""
    run = kafka_tools.run_tool(
        tools, main_class, ["--bootstrap-server", bootstrap, *command.split()]
    )
    if ok:
        assert run.returncode == 0, run.output
    return run


def listed(run: ToolRun) -> set[tuple[str, int]]:
    """The partitions a ``kafka-topics --describe`` printed."""
    return {(t, int(p)) for t, p in LISTED.findall(run.stdout)}


def controller_id(cluster: ProcessCluster) -> int:
    admin = cluster.admin()  # kept alive until the answer: a destroyed client fails it
    return int(admin.describe_cluster().result(10).controller.id)


def assignment(cluster: ProcessCluster, topic: str) -> dict[int, tuple[list[int], list[int]]]:
    return {p: (list(m.replicas), sorted(m.isrs)) for p, m in cluster.partitions(topic).items()}


# -- kafka-topics -----------------------------------------------------------------------------


def test_topics_describe_under_replicated_and_unavailable(
    tools: KafkaDist, cluster3: ProcessCluster
) -> None:
    c = cluster3
    created = tool(
        tools, TOPICS, c.bootstrap, "--create --topic urp --partitions 3 --replication-factor 3"
    )
    assert "Created topic urp." in created.stdout
    c.wait_for_full_isr("urp", 3, 3)
    victim = next(b for b in (2, 1) if b != controller_id(c))
    tool(tools, TOPICS, c.bootstrap, f"--create --topic lonely --replica-assignment {victim}")
    c.wait_for_full_isr("lonely", 1, 1)

    healthy = tool(tools, TOPICS, c.bootstrap, "--describe --under-replicated-partitions")
    assert healthy.stdout.strip() == "", healthy.output
    available = tool(tools, TOPICS, c.bootstrap, "--describe --unavailable-partitions")
    assert available.stdout.strip() == "", available.output

    c.brokers[victim].kill()  # SIGKILL: its session ends, the controller shrinks the ISRs
    c.wait_until(
        lambda: (
            all(len(isr) == 2 for _, isr in assignment(c, "urp").values())
            and c.leader_of("lonely", 0) == -1
        ),
        f"the controller to drop broker {victim} from every ISR",
    )
    under = tool(tools, TOPICS, c.bootstrap, "--describe --under-replicated-partitions")
    assert listed(under) == {("urp", 0), ("urp", 1), ("urp", 2)}, under.output
    unavailable = tool(tools, TOPICS, c.bootstrap, "--describe --unavailable-partitions")
    assert listed(unavailable) == {("lonely", 0)}, unavailable.output
    assert "Leader: none" in unavailable.stdout, unavailable.output


# -- kafka-leader-election --------------------------------------------------------------------


def test_leader_election_preferred_after_a_bounce(
    tools: KafkaDist, cluster3: ProcessCluster
) -> None:
    c = cluster3
    tool(
        tools, TOPICS, c.bootstrap, "--create --topic elect --replica-assignment 0:1:2,1:2:0,2:0:1"
    )
    c.wait_for_full_isr("elect", 3, 3)
    victim = next(b for b in (1, 2) if b != controller_id(c))
    preferred = {p: replicas[0] for p, (replicas, _) in assignment(c, "elect").items()}
    moved = next(p for p, leader in preferred.items() if leader == victim)

    c.brokers[victim].kill()
    c.wait_until(lambda: c.leader_of("elect", moved) not in (-1, victim), "a new leader")
    c.brokers[victim].start(timeout=60)
    c.wait_for_full_isr("elect", 3, 3)
    assert c.leader_of("elect", moved) != victim  # no automatic rebalance in this cluster

    run = tool(
        tools, LEADER_ELECTION, c.bootstrap, "--election-type PREFERRED --all-topic-partitions"
    )
    assert f"Successfully completed leader election (PREFERRED) for partitions elect-{moved}" in (
        run.stdout
    ), run.output
    c.wait_until(
        lambda: {p: c.leader_of("elect", p) for p in preferred} == preferred,
        "every partition led by its preferred replica",
        timeout=15,
    )


# -- kafka-reassign-partitions ----------------------------------------------------------------


def test_reassign_generate(tools: KafkaDist, cluster4: ProcessCluster, tmp_path: Path) -> None:
    c = cluster4
    tool(tools, TOPICS, c.bootstrap, "--create --topic generated --replica-assignment 0:1:2,1:2:0")
    c.wait_for_full_isr("generated", 2, 3)
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": "generated"}]}))
    run = tool(
        tools,
        REASSIGN,
        c.bootstrap,
        f"--generate --topics-to-move-json-file {topics} --broker-list 1,2,3",
    )
    proposed = run.stdout.split("Proposed partition reassignment configuration")[1]
    plan = json.loads(proposed.strip().splitlines()[0])
    moves = {m["partition"]: m["replicas"] for m in plan["partitions"]}
    assert sorted(moves) == [0, 1]
    assert all(len(r) == 3 and set(r) <= {1, 2, 3} for r in moves.values()), run.output


def verify_until_complete(tools: KafkaDist, bootstrap: str, plan: Path, topic: str) -> ToolRun:
    """``--verify`` again until the tool reports the move complete (bounded). Throttles are
    left alone (``--preserve-throttles``): none were set, and clearing them is pinned
    separately by test_reassign_verify_clears_throttles."""
    deadline = time.monotonic() + 30
    while True:
        run = tool(
            tools,
            REASSIGN,
            bootstrap,
            f"--verify --reassignment-json-file {plan} --preserve-throttles",
        )
        if f"Reassignment of partition {topic}-0 is completed." in run.stdout:
            return run
        assert time.monotonic() < deadline, run.output
        time.sleep(0.5)


def test_reassign_execute_and_verify(
    tools: KafkaDist, cluster4: ProcessCluster, tmp_path: Path
) -> None:
    c = cluster4
    tool(tools, TOPICS, c.bootstrap, "--create --topic executed --replica-assignment 0:1:2")
    c.wait_for_full_isr("executed", 1, 3)
    plan = tmp_path / "plan.json"
    target = {"topic": "executed", "partition": 0, "replicas": [1, 2, 3]}
    plan.write_text(json.dumps({"version": 1, "partitions": [target]}))
    run = tool(tools, REASSIGN, c.bootstrap, f"--execute --reassignment-json-file {plan}")
    assert "Successfully started partition reassignment" in run.stdout, run.output
    verify_until_complete(tools, c.bootstrap, plan, "executed")
    c.wait_until(
        lambda: assignment(c, "executed") == {0: ([1, 2, 3], [1, 2, 3])},
        "replicas [1, 2, 3], all in sync",
    )


def test_reassign_list_and_verify(
    tools: KafkaDist, cluster4: ProcessCluster, tmp_path: Path
) -> None:
    """The move is started with AlterPartitionReassignments directly and held in progress
    by freezing the broker it adds, as test_reassignment does; ``--list`` and ``--verify``
    report it, then its completion."""
    c = cluster4
    tool(tools, TOPICS, c.bootstrap, "--create --topic moved --replica-assignment 0:1:2")
    c.wait_for_full_isr("moved", 1, 3)
    if controller_id(c) == 3:
        pytest.fail("the controller is broker 3, the broker this test freezes")
    others = ",".join(b.bootstrap for b in c.brokers[:3])  # the tools never wait on broker 3
    plan = tmp_path / "plan.json"
    target = {"topic": "moved", "partition": 0, "replicas": [1, 2, 3]}
    plan.write_text(json.dumps({"version": 1, "partitions": [target]}))

    freeze(c, 3)  # registered for ~2 s more, and cannot catch up
    try:
        assert alter_reassignments(c, "moved", {0: [1, 2, 3]}) == {0: 0}
        listing = tool(tools, REASSIGN, others, "--list")
        assert "moved-0: replicas: 1,2,3,0. adding: 3. removing: 0." in listing.stdout, (
            listing.output
        )
        run = tool(
            tools,
            REASSIGN,
            others,
            f"--verify --reassignment-json-file {plan} --preserve-throttles",
        )
        assert "Reassignment of partition moved-0 is still in progress." in run.stdout, run.output
    finally:
        thaw(c, 3)
    verify_until_complete(tools, c.bootstrap, plan, "moved")
    c.wait_until(
        lambda: assignment(c, "moved") == {0: ([1, 2, 3], [1, 2, 3])},
        "replicas [1, 2, 3], all in sync",
    )
    done = tool(tools, REASSIGN, c.bootstrap, "--list")
    assert "No partition reassignments found." in done.stdout, done.output


def test_reassign_verify_clears_throttles(
    tools: KafkaDist, cluster4: ProcessCluster, tmp_path: Path
) -> None:
    c = cluster4
    tool(tools, TOPICS, c.bootstrap, "--create --topic throttled --replica-assignment 1:2:3")
    c.wait_for_full_isr("throttled", 1, 3)
    plan = tmp_path / "plan.json"
    target = {"topic": "throttled", "partition": 0, "replicas": [1, 2, 3]}
    plan.write_text(json.dumps({"version": 1, "partitions": [target]}))
    run = tool(tools, REASSIGN, c.bootstrap, f"--verify --reassignment-json-file {plan}")
    assert "Reassignment of partition throttled-0 is completed." in run.stdout
    assert "Clearing topic-level throttles on topic throttled" in run.stdout, run.output


def test_kafka_dump_log_reads_a_cleaned_segment(tools: KafkaDist, tmp_path: Path) -> None:
    cleaned = clean_a_log(tmp_path)
    segment = str(cleaned.segment)
    run = kafka_tools.run_tool(
        tools, DUMP_LOG, ["--files", segment, "--deep-iteration", "--print-data-log"]
    )
    assert run.returncode == 0, run.output
    assert "Exception" not in run.stderr and "isvalid: false" not in run.stdout, run.output
    lines = run.stdout.splitlines()
    batches = [line for line in lines if line.startswith("baseOffset:")]
    assert [b.split()[1] for b in batches] == ["1", "2", "4"]
    # The emptied batch of the idempotent producer: no records, its sequence kept.
    assert batches[0].startswith("baseOffset: 1 lastOffset: 1 count: 0 baseSequence: 1 ")
    assert f"producerId: {PRODUCER_ID} " in batches[0]
    assert "deleteHorizonMs: OptionalLong.empty " in batches[1]
    assert f"deleteHorizonMs: OptionalLong[{cleaned.delete_horizon_ms}] " in batches[2]
    records = [line for line in lines if line.startswith("| offset:")]
    assert [r.split()[2] for r in records] == ["2", "4"]  # 0, 1 and 3 were cleaned away
    assert records[0].endswith("key: a payload: 3")
    assert "valueSize: -1 " in records[1] and records[1].endswith("key: b")  # a tombstone
    # tierlog's dump prints Kafka's batch lines, only with its notes added at the end.
    ours = io.StringIO()
    assert dump([cleaned.segment], ours) == 0
    ours_batches = [
        line.split(" (empty")[0] for line in ours.getvalue().splitlines()
        if line.startswith("baseOffset:")
    ]  # fmt: skip
    assert ours_batches == batches


# -- kafka-configs and kafka-dump-log: a topic's compression.type ------------------------------


def test_compression_type_with_kafka_configs_and_dump_log(tools: KafkaDist, tmp_path: Path) -> None:
    """``kafka-configs --entity-type topics`` sets compression.type and a KIP-390 level
    (IncrementalAlterConfigs), describes them (DescribeConfigs) and has a bad level refused
    naming the key; Kafka's DumpLogSegments then reads the leader's recompressed batch
    (issue 23 item 5)."""
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        bootstrap = broker.bootstrap
        configs = kafka_tools.CONFIGS
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("zt", 1, 1)])["zt"].result(30)
        topic = "--entity-type topics --entity-name zt"
        tool(
            tools,
            configs,
            bootstrap,
            f"--alter {topic} --add-config compression.type=zstd,compression.zstd.level=7",
        )
        described = tool(tools, configs, bootstrap, f"--describe {topic}").stdout
        assert "compression.type=zstd" in described, described
        assert "compression.zstd.level=7" in described, described
        refused = tool(
            tools, configs, bootstrap, f"--alter {topic} --add-config compression.gzip.level=10",
            ok=False,
        )  # fmt: skip
        assert refused.returncode != 0 and "compression.gzip.level" in refused.output, (
            refused.output
        )
        producer = Producer({"bootstrap.servers": bootstrap, "compression.type": "none"})
        for i in range(10):
            producer.produce("zt", key=b"k%d" % i, value=b"value %d" % i)
        assert producer.flush(30) == 0
        segment = broker.data_dir / "zt-0" / "00000000000000000000.log"
        run = kafka_tools.run_tool(tools, DUMP_LOG, ["--files", str(segment), "--deep-iteration"])
        assert run.returncode == 0, run.output
        assert "isvalid: false" not in run.stdout and "Exception" not in run.stderr, run.output
        batches = [line for line in run.stdout.splitlines() if line.startswith("baseOffset:")]
        assert batches and all("compresscodec: zstd" in b for b in batches), batches
        records = [line for line in run.stdout.splitlines() if line.startswith("| offset:")]
        assert len(records) == 10, run.stdout
    finally:
        broker.stop()


# -- kafka-configs: dynamic broker configs and broker loggers ---------------------------------


def test_broker_configs_and_loggers_with_kafka_configs(tools: KafkaDist, tmp_path: Path) -> None:
    """``kafka-configs --entity-type brokers`` sets a cluster default (``--entity-default``)
    and a per-broker override, describes them with their sources (``--all``), and has a
    read-only key refused with Kafka's message; ``--entity-type broker-loggers`` reads and
    changes a logger's level (issue 23 item 2)."""
    broker = BrokerProcess(tmp_path / "data", {"log.retention.ms": "7200000"}).start()
    try:
        bootstrap, configs = broker.bootstrap, kafka_tools.CONFIGS
        default = "--entity-type brokers --entity-default"
        tool(tools, configs, bootstrap, f"--alter {default} --add-config log.retention.ms=60000")
        described = tool(tools, configs, bootstrap, f"--describe {default}").stdout
        assert "log.retention.ms=60000 sensitive=false" in described, described
        assert "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=60000" in described, described
        one = "--entity-type brokers --entity-name 0"
        tool(tools, configs, bootstrap, f"--alter {one} --add-config log.cleaner.threads=2")
        every = tool(tools, configs, bootstrap, f"--describe {one} --all").stdout
        lines = {line.split("=", 1)[0].strip(): line for line in every.splitlines() if "=" in line}
        assert "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=60000" in lines["log.retention.ms"]
        assert "STATIC_BROKER_CONFIG:log.retention.ms=7200000" in lines["log.retention.ms"]
        assert "DEFAULT_CONFIG:log.retention.hours=168" in lines["log.retention.ms"]
        assert "DYNAMIC_BROKER_CONFIG:log.cleaner.threads=2" in lines["log.cleaner.threads"]
        assert "reconfigured log cleaner: log.cleaner.threads" in broker.log_text()
        refused = tool(
            tools, configs, bootstrap, f"--alter {one} --add-config log.dirs=/elsewhere", ok=False
        )
        assert refused.returncode != 0
        assert "Cannot update these configs dynamically: Set(log.dirs)" in refused.output

        loggers = "--entity-type broker-loggers --entity-name 0"
        logger = "tierlog.broker.network.server"
        tool(tools, configs, bootstrap, f"--alter {loggers} --add-config {logger}=DEBUG")
        levels = tool(tools, configs, bootstrap, f"--describe {loggers}").stdout
        assert f"{logger}=DEBUG" in levels, levels
        assert "root=" in levels, levels
    finally:
        broker.stop()


# -- kafka-consumer-groups --------------------------------------------------------------------


def test_consumer_groups_describe_reset_and_delete_offsets(
    tools: KafkaDist, tmp_path: Path
) -> None:
    """``kafka-consumer-groups``: --list, --describe (committed offsets and lag),
    --reset-offsets --to-earliest --execute, --delete-offsets (OffsetDelete, API 47) and
    --delete, on a single broker; each result checked with confluent-kafka."""
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        bootstrap = broker.bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("cg", 2, 1), NewTopic("cg-other", 1, 1)])["cg"].result(30)
        producer = Producer({"bootstrap.servers": bootstrap})
        for i in range(20):
            producer.produce("cg", value=b"%d" % i, partition=i % 2)
            producer.produce("cg-other", value=b"%d" % i)
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "tools-cg"})
        consumer.commit(
            offsets=[
                TopicPartition("cg", 0, 7),
                TopicPartition("cg", 1, 3),
                TopicPartition("cg-other", 0, 5),
            ],
            asynchronous=False,
        )
        consumer.close()

        def committed() -> dict[tuple[str, int], int]:
            c = Consumer({"bootstrap.servers": bootstrap, "group.id": "tools-cg"})
            try:
                wanted = [
                    TopicPartition("cg", 0),
                    TopicPartition("cg", 1),
                    TopicPartition("cg-other", 0),
                ]
                return {
                    (tp.topic, tp.partition): tp.offset for tp in c.committed(wanted, timeout=10)
                }
            finally:
                c.close()

        group = kafka_tools.CONSUMER_GROUPS
        assert "tools-cg" in tool(tools, group, bootstrap, "--list").stdout
        described = tool(tools, group, bootstrap, "--describe --group tools-cg").stdout
        # GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG ...
        rows = {
            (m[0], int(m[1])): (int(m[2]), int(m[3]), int(m[4]))
            for m in re.findall(r"tools-cg\s+(\S+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)", described)
        }
        assert rows == {
            ("cg", 0): (7, 10, 3),
            ("cg", 1): (3, 10, 7),
            ("cg-other", 0): (5, 20, 15),
        }, described

        tool(
            tools,
            group,
            bootstrap,
            "--reset-offsets --group tools-cg --topic cg:1 --to-earliest --execute",
        )
        assert committed() == {("cg", 0): 7, ("cg", 1): 0, ("cg-other", 0): 5}

        tool(tools, group, bootstrap, "--delete-offsets --group tools-cg --topic cg-other")
        assert committed() == {("cg", 0): 7, ("cg", 1): 0, ("cg-other", 0): OFFSET_INVALID}

        tool(tools, group, bootstrap, "--delete --group tools-cg")
        assert "tools-cg" not in tool(tools, group, bootstrap, "--list").stdout
        assert set(committed().values()) == {OFFSET_INVALID}
    finally:
        broker.stop()


# -- kafka-configs: client quotas --------------------------------------------------------------


def produce_seconds(bootstrap: str, client_id: str, total: int) -> float:
    """Seconds to have ``total`` bytes of 10 KB records acknowledged."""
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5})
    started = time.monotonic()
    for _ in range(total // 10_000):
        producer.produce("quota", value=b"x" * 10_000)
        producer.poll(0)
    assert producer.flush(60) == 0
    return time.monotonic() - started


def test_client_quotas_set_with_kafka_configs_throttle_producers(
    tools: KafkaDist, tmp_path: Path
) -> None:
    """``kafka-configs --alter/--describe --entity-type clients`` (AlterClientQuotas and
    DescribeClientQuotas, API 49/48); the quota survives a restart, slows exactly the
    client it names, and goes with --delete-config."""
    # Two 1 s samples: the rate reacts within a second or two, so the test stays short.
    broker = BrokerProcess(
        tmp_path / "data", {"quota.window.num": "2", "quota.window.size.seconds": "1"}
    ).start()
    try:
        bootstrap = broker.bootstrap
        configs = kafka_tools.CONFIGS
        tool(
            tools,
            configs,
            bootstrap,
            "--alter --entity-type clients --entity-name slow "
            "--add-config producer_byte_rate=500000",
        )
        tool(
            tools,
            configs,
            bootstrap,
            "--alter --entity-type clients --entity-name slow --add-config request_percentage=50",
        )
        broker.stop()
        broker.start()  # the quota is kept in the metadata
        described = tool(
            tools, configs, bootstrap, "--describe --entity-type clients --entity-name slow"
        ).stdout
        assert "producer_byte_rate=500000" in described, described
        assert "request_percentage=50" in described, described
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("quota", 1, 1)])["quota"].result(30)

        fast = produce_seconds(bootstrap, "fast", 3_000_000)
        slow = produce_seconds(bootstrap, "slow", 3_000_000)
        # 3 MB at 500 KB/s takes about 5 s (the first second's burst is free).
        assert slow > 3.0 and slow > 4 * fast, (slow, fast)

        tool(
            tools,
            configs,
            bootstrap,
            "--alter --entity-type clients --entity-name slow --delete-config producer_byte_rate",
        )
        described = tool(tools, configs, bootstrap, "--describe --entity-type clients").stdout
        assert "producer_byte_rate" not in described, described
    finally:
        broker.stop()
