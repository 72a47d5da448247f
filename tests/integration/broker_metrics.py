"""Kafka's metrics as a broker process serves them on its Prometheus endpoint
(``metrics.http.port=0``: the port it took is in its log), for the cluster tests."""

from __future__ import annotations

import re
import time
import urllib.request

from tests.integration.cluster_harness import ProcessCluster

UNDER_REPLICATED = "kafka_server_replicamanager_underreplicatedpartitions"
ISR_SHRINKS = "kafka_server_replicamanager_isrshrinks_total"
ISR_EXPANDS = "kafka_server_replicamanager_isrexpands_total"
OFFLINE = "kafka_controller_kafkacontroller_offlinepartitionscount"
ACTIVE_CONTROLLER = "kafka_controller_kafkacontroller_activecontrollercount"
UNCLEAN_ELECTIONS = "kafka_controller_controllerstats_uncleanleaderelections_total"
REMOTE_CYCLES = "tierlog_remote_cycles_total"
RETENTION_PASSES = "tierlog_log_retention_passes_total"


def sample(port: int, name: str) -> float:
    """The unlabelled sample ``name`` of the endpoint on ``port``; a missing metric fails
    the test."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    found = re.search(rf"^{name} (\S+)$", text, re.M)
    assert found, f"no {name} on the endpoint at port {port}"
    return float(found.group(1))


def metric(cluster: ProcessCluster, broker: int, name: str) -> float:
    """One unlabelled sample of broker ``broker``."""
    return sample(cluster.brokers[broker].metrics_port(), name)


def live(cluster: ProcessCluster) -> list[int]:
    return [n for n, b in enumerate(cluster.brokers) if b.proc is not None]


def cluster_sum(cluster: ProcessCluster, name: str) -> float:
    """``name`` summed over the running brokers."""
    return sum(metric(cluster, n, name) for n in live(cluster))


def wait_for_more(port: int, name: str, more: int, timeout: float = 30.0) -> None:
    """Until the counter ``name`` on the endpoint at ``port`` has grown by ``more`` from
    now: the positive sign that periodic work (remote cycles, retention passes) ran that
    many times since, for tests that then check it did no harm."""
    start = sample(port, name)
    deadline = time.monotonic() + timeout
    while sample(port, name) < start + more:
        assert time.monotonic() < deadline, f"{name} did not grow by {more} in {timeout}s"
        time.sleep(0.05)
