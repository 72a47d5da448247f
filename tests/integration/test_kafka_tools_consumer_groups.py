"""KIP-848 with Kafka's own Java clients and tools (4.x jars from Maven Central, as
``kafka_tools`` fetches them): console consumers with ``group.protocol=consumer`` share a
topic through the coordinator's assignor as they join and leave, and
``kafka-consumer-groups`` lists, describes (members, state, offsets) and deletes the
consumer groups."""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from tests.broker.harness import BrokerProcess
from tests.broker.test_consumer_groups import create_topic, produce
from tests.integration import kafka_tools
from tests.integration.kafka_tools import (
    CONSOLE_CONSUMER,
    CONSUMER_GROUPS,
    JVM_FLAGS,
    KafkaDist,
)

pytestmark = pytest.mark.timeout(
    300 if kafka_tools.cached_tools() else kafka_tools.kafka_ref.MVN_TIMEOUT + 300
)

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


def console_consumer(
    tools: KafkaDist, bootstrap: str, group: str, topic: str
) -> subprocess.Popen[str]:
    """Kafka's console consumer with the consumer protocol, printing each value on a line
    until it has been idle for 15 s."""
    log_config = tools.libs.parent / "tools-log4j2.properties"
    if not log_config.exists():
        log_config.write_text(kafka_tools.LOG4J2_PROPERTIES)
    argv = [
        "java",
        *JVM_FLAGS,
        f"-Dlog4j2.configurationFile={log_config}",
        "-cp",
        f"{tools.libs}/*",
        CONSOLE_CONSUMER,
        "--bootstrap-server", bootstrap,
        "--topic", topic,
        "--group", group,
        "--consumer-property", "group.protocol=consumer",
        "--consumer-property", "auto.offset.reset=earliest",
        "--timeout-ms", "15000",
    ]  # fmt: skip
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def collect(proc: subprocess.Popen[str], into: list[str]) -> threading.Thread:
    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            into.append(line.strip())

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


def groups_tool(tools: KafkaDist, bootstrap: str, *args: str) -> str:
    run = kafka_tools.run_tool(tools, CONSUMER_GROUPS, ["--bootstrap-server", bootstrap, *args])
    assert run.returncode == 0, run.output
    return run.stdout


def test_java_consumers_share_a_topic_and_the_tool_describes_them(
    tools: KafkaDist, broker: BrokerProcess
) -> None:
    create_topic(broker.bootstrap, "java848", 4)
    produced = [0]
    stop = threading.Event()

    def trickle() -> None:  # keeps both consumers busy until the test has seen them
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
        while not stop.is_set():
            for _ in range(10):
                producer.produce("java848", value=str(produced[0]).encode())
                produced[0] += 1
            producer.flush(10)
            time.sleep(0.1)
        assert producer.flush(20) == 0

    producing = threading.Thread(target=trickle, daemon=True)
    producing.start()
    lines: list[list[str]] = [[], []]
    procs = [console_consumer(tools, broker.bootstrap, "java-group", "java848")]
    readers = [collect(procs[0], lines[0])]
    try:
        wait_until(lambda: len(lines[0]) >= 50, "the first consumer reads", 90)
        procs.append(console_consumer(tools, broker.bootstrap, "java-group", "java848"))
        readers.append(collect(procs[1], lines[1]))

        def members() -> list[list[str]]:
            out = groups_tool(
                tools, broker.bootstrap, "--describe", "--group", "java-group", "--members"
            )
            return [line.split() for line in out.splitlines() if line.startswith("java-group")]

        # The tool shows two members; the coordinator's assignor splits the partitions.
        wait_until(
            lambda: sorted(int(m[-1]) for m in members()) == [2, 2], "two members, two each", 90
        )
        state = groups_tool(
            tools, broker.bootstrap, "--describe", "--group", "java-group", "--state"
        )
        assert "uniform" in state and "Stable" in state, state
        count = len(lines[1])
        wait_until(lambda: len(lines[1]) > count + 20, "the second consumer reads", 60)
    finally:
        stop.set()
        producing.join(30)
    for proc, reader in zip(procs, readers, strict=True):
        proc.wait(timeout=120)  # 15 s idle after the last record
        reader.join(10)
        assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
    values = {int(line) for line in lines[0] + lines[1] if line.isdigit()}
    assert values == set(range(produced[0]))  # every record, across the rebalance

    # Both left: committed offsets at the log end, no members, type Consumer.
    described = groups_tool(tools, broker.bootstrap, "--describe", "--group", "java-group")
    rows = [line.split() for line in described.splitlines() if line.startswith("java-group")]
    assert sorted(int(r[2]) for r in rows) == [0, 1, 2, 3], described
    assert all(r[3] == r[4] for r in rows), described  # CURRENT-OFFSET == LOG-END-OFFSET
    # The empty group's offsets can be reset (an admin commit, no member epoch).
    reset = groups_tool(
        tools,
        broker.bootstrap,
        "--reset-offsets", "--group", "java-group", "--topic", "java848",
        "--to-earliest", "--execute",
    )  # fmt: skip
    assert [line.split()[-1] for line in reset.splitlines() if "java848" in line] == ["0"] * 4
    listed = groups_tool(tools, broker.bootstrap, "--list", "--type")
    assert any(line.split() == ["java-group", "Consumer"] for line in listed.splitlines()), listed
    deleted = groups_tool(tools, broker.bootstrap, "--delete", "--group", "java-group")
    assert "successful" in deleted, deleted
    assert "java-group" not in groups_tool(tools, broker.bootstrap, "--list")


def wait_until(check: Callable[[], bool], what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not in {timeout:.0f} s: {what}"
        time.sleep(0.3)


def test_the_tool_describes_a_librdkafka_member_of_a_consumer_group(
    tools: KafkaDist, broker: BrokerProcess
) -> None:
    create_topic(broker.bootstrap, "described", 3)
    produce(broker.bootstrap, "described", 30)
    member = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "rd-group",
            "group.protocol": "consumer",
            "client.id": "rd-client",
            "auto.offset.reset": "earliest",
        }
    )
    member.subscribe(["described"])
    got = 0
    deadline = time.monotonic() + 60
    while got < 30:
        assert time.monotonic() < deadline, "nothing consumed"
        msg = member.poll(0.2)
        got += msg is not None and msg.error() is None
    member.commit(asynchronous=False)
    stop = threading.Event()

    def keep_polling() -> None:  # heartbeats ride on poll()
        while not stop.is_set():
            member.poll(0.1)

    poller = threading.Thread(target=keep_polling, daemon=True)
    poller.start()
    try:
        out = groups_tool(tools, broker.bootstrap, "--describe", "--group", "rd-group")
        rows = [line.split() for line in out.splitlines() if line.startswith("rd-group")]
        assert len(rows) == 3, out
        # GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID
        assert all(r[5] == "0" and r[7] == "/127.0.0.1" and r[8] == "rd-client" for r in rows), out
        state = groups_tool(tools, broker.bootstrap, "--describe", "--group", "rd-group", "--state")
        assert "Stable" in state, state
        refused = kafka_tools.run_tool(
            tools,
            CONSUMER_GROUPS,
            ["--bootstrap-server", broker.bootstrap, "--delete", "--group", "rd-group"],
        )
        assert "not empty" in refused.output.lower() or "NonEmptyGroup" in refused.output, (
            refused.output
        )
    finally:
        stop.set()
        poller.join(10)
        member.close()
