"""``kafka-reassign-partitions --execute --throttle R`` (Apache Kafka's own tool) on three
real tierlog brokers and a real ZooKeeper: the tool sets the replication throttles (the
topic's ``leader/follower.replication.throttled.replicas``, each broker's
``leader/follower.replication.throttled.rate``), the new replica catches up at about R
(measured from its log file's growth on disk) while a partition the throttles do not list
moves to the same broker from the same leader at full speed, the metrics endpoint counts the
throttled bytes, and ``--verify`` removes every throttle (the configs are gone from
ZooKeeper)."""

from __future__ import annotations

import json
import os
import re
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from tests.integration import kafka_tools
from tests.integration.cluster_harness import ProcessCluster
from tests.integration.kafka_tools import REASSIGN, TOPICS, KafkaDist
from tests.integration.test_kafka_tools import tool
from tests.integration.test_reassignment import alter_reassignments
from tests.integration.zk_clients import raw_client

pytestmark = pytest.mark.timeout(
    120 if kafka_tools.cached_tools() else kafka_tools.kafka_ref.MVN_TIMEOUT + 120
)

RATE = 500_000  # bytes per second, the tool's --throttle
DATA = 4_000_000  # bytes produced to the throttled partition: about 8 s of the rate
# The box is shared and loaded: the rate held within a wide band.
MOST, LEAST = 1.5 * RATE, 0.3 * RATE
FOLLOWER_RATE = "follower.replication.throttled.rate"


@pytest.fixture
def cluster3(tmp_path: Path, zk_connect: str) -> Iterator[ProcessCluster]:
    c = ProcessCluster(
        tmp_path,
        zk_connect,
        3,
        {"auto.leader.rebalance.enable": "false", "metrics.http.port": "0"},
    )
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


def produce(bootstrap: str, topic: str, nbytes: int) -> None:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 65536}
    )
    value_size = 10_000
    for _ in range(nbytes // value_size):
        producer.produce(topic, os.urandom(value_size), partition=0)  # incompressible
        producer.poll(0)
    assert producer.flush(30) == 0


def rate_of(samples: list[tuple[float, int]]) -> float:
    """Bytes per second from the last sample without bytes (else the first) to the last."""
    empty = [s for s in samples if s[1] == 0]
    started = empty[-1] if empty else samples[0]
    ended = samples[-1]
    return (ended[1] - started[1]) / (ended[0] - started[0])


def throttle_metrics(c: ProcessCluster, broker: int) -> dict[tuple[str, str], float]:
    port = c.brokers[broker].metrics_port()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    found = re.findall(r'^tierlog_replication_throttled_(\w+)\{side="(\w+)"\} (\S+)$', text, re.M)
    return {(name, side): float(value) for name, side, value in found}


def test_reassign_with_a_throttle_holds_the_rate_and_verify_removes_it(
    tools: KafkaDist,
    cluster3: ProcessCluster,
    tmp_path: Path,
) -> None:
    c = cluster3
    tool(tools, TOPICS, c.bootstrap, "--create --topic slow --replica-assignment 0:1")
    tool(tools, TOPICS, c.bootstrap, "--create --topic fast --replica-assignment 0")
    c.wait_for_full_isr("slow", 1, 2)
    c.wait_for_full_isr("fast", 1, 1)
    produce(c.bootstrap, "slow", DATA)
    produce(c.bootstrap, "fast", DATA // 2)
    slow_total = log_bytes(c.brokers[0].data_dir / "slow-0")
    fast_total = log_bytes(c.brokers[0].data_dir / "fast-0")
    assert slow_total >= DATA and fast_total >= DATA // 2

    plan = tmp_path / "plan.json"
    target = {"topic": "slow", "partition": 0, "replicas": [0, 1, 2]}
    plan.write_text(json.dumps({"version": 1, "partitions": [target]}))
    run = tool(
        tools,
        REASSIGN,
        c.bootstrap,
        f"--execute --reassignment-json-file {plan} --throttle {RATE}",
    )
    assert "Successfully started partition reassignment" in run.stdout, run.output
    assert f"The inter-broker throttle limit was set to {RATE} B/s" in run.stdout, run.output
    # A partition the throttles do not list, from the same leader to the same broker.
    fast: list[tuple[float, int]] = [(time.monotonic(), 0)]
    assert alter_reassignments(c, "fast", {0: [0, 2]}) == {0: 0}

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

        # Both moves, watched on broker 2's disk: (time, bytes) until it has everything.
        slow: list[tuple[float, int]] = []
        deadline = time.monotonic() + 60
        while not slow or slow[-1][1] < slow_total:
            assert time.monotonic() < deadline, f"the move stalled: {slow[-5:]}"
            now = time.monotonic()
            slow.append((now, log_bytes(c.brokers[2].data_dir / "slow-0")))
            if not fast or fast[-1][1] < fast_total:
                fast.append((now, log_bytes(c.brokers[2].data_dir / "fast-0")))
            time.sleep(0.05)
        assert fast[-1][1] == fast_total, "the unthrottled move ended after the throttled one"
        slow_rate, fast_rate = rate_of(slow), rate_of(fast)
        print(f"throttled: {slow_rate:.0f} B/s against {RATE}; unthrottled: {fast_rate:.0f} B/s")
        assert LEAST <= slow_rate <= MOST, f"{slow_rate:.0f} B/s against a throttle of {RATE}"
        assert fast_rate > 4 * RATE, f"the unthrottled partition moved at {fast_rate:.0f} B/s"

        # The metrics endpoint: the throttled bytes each side moved, and the rates.
        leader, follower = throttle_metrics(c, 0), throttle_metrics(c, 2)
        assert leader[("rate", "leader")] == RATE and follower[("rate", "follower")] == RATE
        assert leader[("bytes_total", "leader")] >= slow_total - slow[0][1]
        assert follower[("bytes_total", "follower")] >= slow_total - slow[0][1]

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
        c.wait_until(
            lambda: ("rate", "leader") not in throttle_metrics(c, 0),
            "broker 0 to apply the removal (no leader rate in force)",
        )

        # kafka-configs sets one broker's rate (sent to that broker, stored for it) and has
        # a malformed replica list refused with Kafka's message, naming the key.
        configs = kafka_tools.CONFIGS
        one = "--entity-type brokers --entity-name 2"
        tool(tools, configs, c.bootstrap, f"--alter {one} --add-config {FOLLOWER_RATE}=123456")
        assert zk_config(zk, "/config/brokers/2") == {FOLLOWER_RATE: "123456"}
        c.wait_until(
            lambda: throttle_metrics(c, 2).get(("rate", "follower")) == 123456,
            "broker 2 to apply its new follower rate",
        )
        refused = tool(
            tools,
            configs,
            c.bootstrap,
            "--alter --entity-type topics --entity-name slow "
            "--add-config leader.replication.throttled.replicas=0-1",
            ok=False,
        )
        assert refused.returncode != 0
        assert "InvalidConfigurationException: config 'leader.replication.throttled." in (
            refused.output
        ), refused.output
        assert "must be the literal '*' or a list of replicas" in refused.output
    finally:
        zk.stop()
        zk.close()
