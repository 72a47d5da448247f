"""Kafka 4.x's own tools against a tierlog broker process, for the APIs issue 23 item 4
added: ``kafka-broker-api-versions`` (every key of Kafka's ``ApiKeys``, checked against
``tierlog.protocol.api_catalog``), ``kafka-configs``/``kafka-client-metrics`` on
client-metrics resources (IncrementalAlterConfigs, DescribeConfigs and ListConfigResources
of type 16), a Java producer pushing its metrics (GetTelemetrySubscriptions, PushTelemetry,
KIP-714) that the broker's Prometheus endpoint then shows with the client's id, and
``kafka-cluster cluster-id`` / ``kafka-topics --describe`` (DescribeCluster,
DescribeTopicPartitions: the broker's request counters prove the tools used them rather
than falling back to Metadata), and ``kafka-reassign-partitions`` with ``log_dirs`` plus
``kafka-log-dirs`` (AlterReplicaLogDirs, DescribeLogDirs)."""

from __future__ import annotations

import json
import re
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.broker.harness import BrokerProcess
from tests.integration import kafka_tools
from tests.integration.kafka_tools import (
    CONFIGS,
    REASSIGN,
    TOPICS,
    KafkaDist,
)
from tierlog.protocol.api_catalog import CATALOG, ApiStatus

pytestmark = pytest.mark.timeout(
    240 if kafka_tools.cached_tools() else kafka_tools.kafka_ref.MVN_TIMEOUT + 240
)

API_VERSIONS = "org.apache.kafka.tools.BrokerApiVersionsCommand"
CLIENT_METRICS = "org.apache.kafka.tools.ClientMetricsCommand"
CLUSTER_TOOL = "org.apache.kafka.tools.ClusterTool"
PRODUCER_PERF = "org.apache.kafka.tools.ProducerPerformance"
LOG_DIRS = "org.apache.kafka.tools.LogDirsCommand"
LISTED_API = re.compile(r"^\s*(\w+)\((\d+)\): (UNSUPPORTED|[\d to]+ \[usable: \d+\])", re.M)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path / "data", {"metrics.http.port": "0"}).start()
    try:
        yield process
    finally:
        process.stop()


def run(tools: KafkaDist, main_class: str, args: list[str], timeout: float = 90) -> str:
    done = kafka_tools.run_tool(tools, main_class, args, timeout=timeout)
    assert done.returncode == 0, done.output
    return done.stdout


def scrape(broker: BrokerProcess) -> str:
    url = f"http://127.0.0.1:{broker.metrics_port()}/metrics"
    with urllib.request.urlopen(url, timeout=10) as answer:
        return answer.read().decode()


def requests_of(broker: BrokerProcess, name: str) -> float:
    found = re.search(
        rf'^kafka_network_requestmetrics_requests_total{{request="{name}"}} (\S+)$',
        scrape(broker),
        re.M,
    )
    return float(found.group(1)) if found else 0.0


def test_broker_api_versions_lists_what_the_catalog_says(
    tools: KafkaDist, broker: BrokerProcess
) -> None:
    out = run(tools, API_VERSIONS, ["--bootstrap-server", broker.bootstrap])
    listed = {int(key): (name, answer) for name, key, answer in LISTED_API.findall(out)}
    # The tool lists every API a Kafka 4.x broker serves (not the controller-only ones).
    assert len(listed) > 60, out
    for key, (name, answer) in listed.items():
        assert key in CATALOG, f"{name}({key}) is not in api_catalog"
        assert CATALOG[key].name == name
        implemented = CATALOG[key].status is ApiStatus.IMPLEMENTED
        assert (answer != "UNSUPPORTED") == implemented, f"{name}: {answer}"
    for key in (60, 71, 72, 74, 75, 34):
        assert listed[key][1] != "UNSUPPORTED"


def test_java_clients_push_their_metrics_to_the_prometheus_endpoint(
    tools: KafkaDist, broker: BrokerProcess
) -> None:
    bootstrap = ["--bootstrap-server", broker.bootstrap]
    run(
        tools,
        CONFIGS,
        [
            *bootstrap,
            "--entity-type",
            "client-metrics",
            "--entity-name",
            "producers",
            "--alter",
            "--add-config",
            "metrics=[org.apache.kafka.producer.],interval.ms=1000,match=[client_id=perf-.*]",
        ],
    )
    assert run(tools, CLIENT_METRICS, [*bootstrap, "--list"]).split() == ["producers"]
    described = run(tools, CLIENT_METRICS, [*bootstrap, "--describe", "--name", "producers"])
    assert "interval.ms=1000" in described and "metrics=org.apache.kafka.producer." in described

    records = 1500
    run(
        tools,
        PRODUCER_PERF,
        [
            "--topic",
            "telemetry",
            "--num-records",
            str(records),
            "--record-size",
            "100",
            "--throughput",
            "300",
            "--command-property",  # takes several key=value
            f"bootstrap.servers={broker.bootstrap}",
            "client.id=perf-1",
        ],
    )
    text = scrape(broker)
    sent = re.search(r"^org_apache_kafka_producer_record_send_total\{([^}]*)\} (\S+)$", text, re.M)
    assert sent, "the producer's record.send.total was not exported"
    labels = dict(re.findall(r'(\w+)="([^"]*)"', sent.group(1)))
    assert labels["client_id"] == "perf-1"
    assert labels["client_software_name"] == "apache-kafka-java"
    assert re.fullmatch(r"[0-9a-f-]{36}", labels["client_instance_id"])
    # Counters come as running totals (delta_temporality=false). The push sent as the
    # producer closes carries every record, but the Java client makes it best effort: on a
    # loaded machine a run exported 1,295 of 1,500, from the last periodic push.
    assert 0 < float(sent.group(2)) <= records
    assert requests_of(broker, "PushTelemetry") >= 2


def test_clients_not_subscribed_push_nothing(tools: KafkaDist, broker: BrokerProcess) -> None:
    run(
        tools,
        PRODUCER_PERF,
        [
            "--topic",
            "quiet",
            "--num-records",
            "200",
            "--record-size",
            "100",
            "--throughput",
            "-1",
            "--command-property",
            f"bootstrap.servers={broker.bootstrap}",
        ],
    )
    # The client asked (the APIs are announced) and was given no metrics to send.
    assert requests_of(broker, "GetTelemetrySubscriptions") >= 1
    assert requests_of(broker, "PushTelemetry") == 0
    assert "org_apache_kafka" not in scrape(broker)


def test_cluster_id_and_topic_describe_use_the_new_apis(
    tools: KafkaDist, broker: BrokerProcess
) -> None:
    bootstrap = ["--bootstrap-server", broker.bootstrap]
    meta = (Path(broker.overrides["log.dirs"]) / "meta.properties").read_text()
    cluster_id = re.search(r"^cluster\.id=(\S+)$", meta, re.M)
    assert cluster_id
    out = run(tools, CLUSTER_TOOL, ["cluster-id", *bootstrap])
    assert out.strip() == f"Cluster ID: {cluster_id.group(1)}"
    assert requests_of(broker, "DescribeCluster") >= 1

    run(tools, TOPICS, [*bootstrap, "--create", "--topic", "described", "--partitions", "3"])
    before = requests_of(broker, "DescribeTopicPartitions")
    out = run(tools, TOPICS, [*bootstrap, "--describe", "--topic", "described"])
    assert "PartitionCount: 3" in out
    assert re.findall(r"Partition: (\d+)\s+Leader: 0", out) == ["0", "1", "2"]
    assert requests_of(broker, "DescribeTopicPartitions") > before


def test_reassign_partitions_moves_replicas_between_log_dirs(
    tools: KafkaDist, tmp_path: Path
) -> None:
    """kafka-reassign-partitions with ``log_dirs`` in its plan sends AlterReplicaLogDirs
    and its --verify reads DescribeLogDirs; kafka-log-dirs shows the result."""
    a, b = (tmp_path / "a").resolve(), (tmp_path / "b").resolve()
    broker = BrokerProcess(tmp_path / "data", {"log.dirs": f"{a},{b}"}).start()
    try:
        bootstrap = ["--bootstrap-server", broker.bootstrap]
        run(tools, TOPICS, [*bootstrap, "--create", "--topic", "dirs", "--partitions", "2"])
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(2000):
            producer.produce("dirs", value=b"%d" % i, partition=i % 2)
        assert producer.flush(30) == 0
        plan = tmp_path / "plan.json"
        plan.write_text(
            json.dumps(
                {
                    "version": 1,
                    "partitions": [
                        {"topic": "dirs", "partition": p, "replicas": [0], "log_dirs": [str(b)]}
                        for p in (0, 1)
                    ],
                }
            )
        )
        out = run(tools, REASSIGN, [*bootstrap, "--execute", "--reassignment-json-file", str(plan)])
        assert f"Successfully started moving log directory to {b} for replica dirs-0" in out
        verify = [*bootstrap, "--verify", "--reassignment-json-file", str(plan)]
        deadline = time.monotonic() + 60
        while "Reassignment of replica dirs-0-0 completed" not in (
            out := run(tools, REASSIGN, verify)
        ) or ("Reassignment of replica dirs-1-0 completed" not in out):
            assert time.monotonic() < deadline, out
            time.sleep(1)
        described = run(tools, LOG_DIRS, [*bootstrap, "--describe", "--topic-list", "dirs"])
        report = json.loads(described.strip().splitlines()[-1])
        where = {
            p["partition"]: d["logDir"]
            for d in report["brokers"][0]["logDirs"]
            for p in d["partitions"]
        }
        assert where == {"dirs-0": str(b), "dirs-1": str(b)}
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "dirs"})
        consumer.assign([TopicPartition("dirs", p, 0) for p in (0, 1)])
        seen: set[bytes] = set()
        deadline = time.monotonic() + 30
        while len(seen) < 2000 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                seen.add(msg.value())
        consumer.close()
        assert seen == {b"%d" % i for i in range(2000)}
    finally:
        broker.stop()
