"""docs/operations.md, tried: the Prometheus rules and the Grafana dashboard shipped in
deploy/ parse and name only metrics a broker in a cluster really exports; and the backup and
restore procedure brings a broker back whole from a copy of its data dir (issue 25 item 9).
Real broker processes and a real ZooKeeper."""

from __future__ import annotations

import json
import re
import shutil
import urllib.request
from pathlib import Path

import yaml
from confluent_kafka.admin import AdminClient

from tests.broker.harness import BrokerProcess
from tests.tiered_data import (
    FAST,
    TieredTopic,
    create_tiered_topic,
    produce_activity,
    topic_rows,
    wait_offloaded,
)

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "deploy" / "prometheus" / "tierlog-rules.yml"
DASHBOARD = REPO / "deploy" / "grafana" / "tierlog-dashboard.json"
# A metric name in PromQL: ours all start so; `up` is Prometheus's own.
METRIC = re.compile(r"\b((?:kafka|tierlog)_[a-z0-9_]+)")


def exported(port: int) -> set[str]:
    """The sample names a broker's /metrics serves."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return {
        re.split(r"[{ ]", line, maxsplit=1)[0]
        for line in text.splitlines()
        if line and not line.startswith("#")
    }


def rule_expressions() -> list[str]:
    doc = yaml.safe_load(RULES.read_text())
    rules = [rule for group in doc["groups"] for rule in group["rules"]]
    assert len(rules) >= 10
    for rule in rules:
        assert set(rule) == {"alert", "expr", "for", "labels", "annotations"}, rule
        assert rule["labels"]["severity"] in ("warning", "critical")
        assert rule["expr"].count("(") == rule["expr"].count(")"), rule["expr"]
    return [rule["expr"] for rule in rules]


def dashboard_expressions() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    targets = [t for panel in dashboard["panels"] for t in panel["targets"]]
    assert dashboard["uid"] and len(dashboard["panels"]) >= 8
    return [t["expr"] for t in targets]


def test_the_rules_and_the_dashboard_name_metrics_a_broker_exports(
    tmp_path: Path, zk_connect: str, brokers: list[BrokerProcess]
) -> None:
    broker = BrokerProcess(
        tmp_path / "b0", {"zookeeper.connect": zk_connect, "metrics.http.port": "0"}
    )
    brokers.append(broker)
    broker.start()
    # Request metrics are labelled by request type: they appear once requests arrived.
    AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=30)
    names = exported(broker.metrics_port())
    for source, expressions in (
        ("rules", rule_expressions()),
        ("dashboard", dashboard_expressions()),
    ):
        named = {m for e in expressions for m in METRIC.findall(e)}
        assert named, source
        missing = sorted(named - names)
        assert missing == [], f"{source} name metrics no broker exports: {missing}"


def test_a_broker_restored_from_its_backup_serves_everything(tmp_path: Path) -> None:
    """The procedure of docs/operations.md for one broker: stop it (a clean shutdown), copy
    its log dirs (the file:// remote tier is inside), lose the disk, copy them back, start."""
    data = tmp_path / "broker"
    broker = BrokerProcess(data, dict(FAST)).start()
    try:
        create_tiered_topic(broker.bootstrap, "orders", 2)
        produce_activity(broker.bootstrap, "orders", 3000)
        tiered = TieredTopic(broker, "orders", 2, 3000)
        wait_offloaded(tiered)  # part of it lives only in the remote tier
        before = topic_rows(tiered)
    finally:
        assert broker.stop() == 0
    backup = tmp_path / "backup"
    shutil.copytree(data, backup, symlinks=True)
    shutil.rmtree(data)  # the disk is gone
    shutil.copytree(backup, data, symlinks=True)
    restored = BrokerProcess(data, dict(FAST), port=broker.port).start()
    try:
        after = topic_rows(TieredTopic(restored, "orders", 2, 3000))
        assert len(after) == 3000 and after == before
    finally:
        restored.stop()
