"""``kafka-reassign-partitions --execute --throttle R`` (Apache Kafka's own tool) on three
real tierlog brokers and a real ZooKeeper: the tool sets the replication throttles (the
topic's ``leader/follower.replication.throttled.replicas``, each broker's
``leader/follower.replication.throttled.rate``), the new replica catches up at about R
(measured from its log file's growth on disk), and ``--verify`` removes every throttle
(the configs are gone from ZooKeeper)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from tests.integration import kafka_tools
from tests.integration.cluster_harness import ProcessCluster
from tests.integration.kafka_tools import REASSIGN, TOPICS, KafkaDist
from tests.integration.test_kafka_tools import tool, tools  # noqa: F401 - the fixture
from tests.integration.zk_clients import raw_client

pytestmark = pytest.mark.timeout(
    120 if kafka_tools.cached_tools() else kafka_tools.kafka_ref.MVN_TIMEOUT + 120
)

RATE = 500_000  # bytes per second, the tool's --throttle
DATA = 4_000_000  # bytes produced: about 8 s of the rate
# The box is shared and loaded: the rate held within a wide band.
MOST, LEAST = 1.5 * RATE, 0.3 * RATE


@pytest.fixture
def cluster3(tmp_path: Path, zk_connect: str) -> Iterator[ProcessCluster]:
    c = ProcessCluster(tmp_path, zk_connect, 3, {"auto.leader.rebalance.enable": "false"})
    try:
        yield c.start()
    finally:
        c.kill()


def log_bytes(directory: Path) -> int:
    try:
        return sum(f.stat().st_size for f in directory.glob("*.log"))
    except FileNotFoundError:  # not created yet, or a segment rolled away mid-walk
        return 0


def zk_config(zk: Any, path: str) -> dict[str, str]:
    if not zk.exists(path):
        return {}
    data, _ = zk.get(path)
    return dict(json.loads(data)["config"])


def test_reassign_with_a_throttle_holds_the_rate_and_verify_removes_it(
    tools: KafkaDist,  # noqa: F811 - the fixture imported above
    cluster3: ProcessCluster,
    tmp_path: Path,
) -> None:
    c = cluster3
    tool(tools, TOPICS, c.bootstrap, "--create --topic slow --replica-assignment 0:1")
    c.wait_for_full_isr("slow", 1, 2)
    producer = Producer(
        {"bootstrap.servers": c.bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 65536}
    )
    value_size = 10_000
    for _ in range(DATA // value_size):
        producer.produce("slow", os.urandom(value_size), partition=0)  # incompressible
        producer.poll(0)
    assert producer.flush(30) == 0
    source = c.brokers[0].data_dir / "slow-0"
    total = log_bytes(source)
    assert total >= DATA

    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {"version": 1, "partitions": [{"topic": "slow", "partition": 0, "replicas": [0, 1, 2]}]}
        )
    )
    moved = c.brokers[2].data_dir / "slow-0"
    run = tool(
        tools,
        REASSIGN,
        c.bootstrap,
        f"--execute --reassignment-json-file {plan} --throttle {RATE}",
    )
    assert "Successfully started partition reassignment" in run.stdout, run.output
    assert f"The inter-broker throttle limit was set to {RATE} B/s" in run.stdout, run.output

    zk = raw_client(c.zk_connect)
    try:
        # The throttles as the tool wrote them, where Kafka's ZooKeeper mode keeps them.
        topic = zk_config(zk, "/config/topics/slow")
        assert sorted(topic["leader.replication.throttled.replicas"].split(",")) == ["0:0", "0:1"]
        assert topic["follower.replication.throttled.replicas"] == "0:2"
        for broker in (0, 1, 2):
            rates = zk_config(zk, f"/config/brokers/{broker}")
            assert rates["leader.replication.throttled.rate"] == str(RATE), rates
            assert rates["follower.replication.throttled.rate"] == str(RATE), rates

        # The move, watched on broker 2's disk: (time, bytes) until it has everything.
        samples: list[tuple[float, int]] = []
        deadline = time.monotonic() + 60
        while not samples or samples[-1][1] < total:
            assert time.monotonic() < deadline, f"the move stalled: {samples[-5:]}"
            samples.append((time.monotonic(), log_bytes(moved)))
            time.sleep(0.05)
        started = next(s for s in samples if s[1] > 0)
        ended = samples[-1]
        rate = (ended[1] - started[1]) / (ended[0] - started[0])
        print(f"moved {ended[1] - started[1]} B in {ended[0] - started[0]:.2f} s: {rate:.0f} B/s")
        assert LEAST <= rate <= MOST, f"{rate:.0f} B/s against a throttle of {RATE} B/s"

        # --verify: complete, and the throttles removed from every broker and the topic.
        deadline = time.monotonic() + 30
        while True:
            verify = tool(tools, REASSIGN, c.bootstrap, f"--verify --reassignment-json-file {plan}")
            if "Reassignment of partition slow-0 is completed." in verify.stdout:
                break
            assert time.monotonic() < deadline, verify.output
            time.sleep(0.5)
        assert "Clearing broker-level throttles on brokers" in verify.stdout, verify.output
        assert "Clearing topic-level throttles on topic slow" in verify.stdout, verify.output
        topic = zk_config(zk, "/config/topics/slow")
        assert not {k for k in topic if "throttled" in k}, topic
        for broker in (0, 1, 2):
            rates = zk_config(zk, f"/config/brokers/{broker}")
            assert not {k for k in rates if "throttled" in k}, rates
    finally:
        zk.stop()
        zk.close()
