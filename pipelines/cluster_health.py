"""A running cluster at a glance, for ``notebooks/cluster_health.ipynb``: one ``Snapshot``
taken from the brokers' own answers, and the plots and tables made from it.

Where each figure comes from:

- brokers, the controller, partitions, leaders, replicas and ISRs: Metadata and
  DescribeCluster (confluent-kafka's AdminClient, as ``tierlog topics`` asks);
- local bytes: each broker's DescribeLogDirs (the sizes of the partitions it holds), asked
  through tierlog's own client (``tierlog.client.BrokerConnection``);
- remote bytes: the segments committed in each partition's manifest in the remote tier
  (``remote.log.storage.url``, asked of the broker as the explore notebook does), the one
  source of truth for what is remote;
- consumer lag: each group's committed offsets (OffsetFetch) against the partitions' log
  end offsets (ListOffsets), as ``tierlog groups describe`` computes LAG;
- the cleaner: each broker's ``tierlog.log.cleaner.state`` (``tierlog.tools.cleaner_report``,
  which the notebook passes in) and, where a broker serves them, its Prometheus metrics
  (``metrics.http.port``, found through DescribeConfigs; Kafka's names, e.g.
  ``kafka_server_replicamanager_underreplicatedpartitions``).

A secured cluster: every client here takes ``TIERLOG_CLIENT_CONFIG``'s settings
(``pipelines.client_security``), the cleaner's states included.

Bytes per tier over time: each run appends its totals to a small CSV (``history_path``), so
a scheduled run (configs/pipelines.toml) draws the history of every run before it.
"""

from __future__ import annotations

import csv
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# librdkafka's info lines (at close) are noise in a report: warnings and up only.
LOG_LEVEL = 4
HISTORY_FIELDS = ["time", "local_bytes", "remote_bytes"]


@dataclass
class Broker:
    id: int
    host: str
    port: int
    rack: str | None
    metrics_url: str | None  # None: metrics.http.port is off (-1) or a random port (0)


@dataclass
class PartitionState:
    topic: str
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)


@dataclass
class Snapshot:
    """What the cluster said at ``time`` (seconds since the epoch)."""

    time: float
    brokers: list[Broker]
    controller: int | None
    partitions: list[PartitionState]
    local_bytes: dict[int, int]  # broker -> bytes in its log dirs
    remote_bytes: int | None  # None: no remote tier
    lag: dict[str, int]  # group -> sum of (log end - committed) over its partitions
    cleaner: dict[tuple[str, int], dict[str, Any]]  # compacted partition -> its state
    metrics: dict[int, dict[str, float]] = field(default_factory=dict)  # broker -> samples


def _admin(bootstrap_servers: str) -> Any:
    from confluent_kafka.admin import AdminClient

    from pipelines import client_security

    # TIERLOG_CLIENT_CONFIG's TLS/SASL settings, as every pipeline's clients take them.
    return AdminClient(
        {
            "bootstrap.servers": bootstrap_servers,
            "log_level": LOG_LEVEL,
            **client_security.librdkafka(),
        }
    )


def _metrics_urls(admin: Any, brokers: list[Any], timeout_s: float) -> dict[int, str | None]:
    """Each broker's metrics endpoint, from its ``metrics.http.host``/``.port`` configs."""
    from confluent_kafka.admin import ConfigResource, ResourceType

    urls: dict[int, str | None] = {}
    for broker in brokers:
        resource = ConfigResource(ResourceType.BROKER, str(broker.id))
        try:
            entries = admin.describe_configs([resource])[resource].result(timeout_s)
            port = int(entries["metrics.http.port"].value)
            host = entries["metrics.http.host"].value or broker.host
        except Exception:  # not tierlog, or not allowed: no metrics, not a failure
            urls[broker.id] = None
            continue
        host = broker.host if host in ("0.0.0.0", "::") else host
        urls[broker.id] = f"http://{host}:{port}/metrics" if port > 0 else None
    return urls


def scrape(url: str, timeout_s: float = 10.0) -> dict[str, float]:
    """A Prometheus text page as ``name{labels} -> value`` (labels sorted, as the text shows
    them); counters keep their ``_total`` name."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(url, timeout=timeout_s) as response:
        text = response.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            samples[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return samples


def _local_bytes(brokers: list[Broker], timeout_s: float) -> dict[int, int]:
    from kio.schema.describe_log_dirs.v1.request import DescribeLogDirsRequest

    from pipelines import client_security
    from tierlog.client import BrokerConnection

    security = client_security.client_security()
    sizes = {}
    for broker in brokers:
        connection = BrokerConnection(
            broker.host,
            broker.port,
            timeout=timeout_s,
            client_id="tierlog-cluster-health",
            security=security,
        )
        try:
            response: Any = connection.call(DescribeLogDirsRequest(topics=None))
            sizes[broker.id] = sum(
                p.partition_size
                for result in response.results
                if result.error_code == 0
                for topic in result.topics
                for p in topic.partitions
            )
        finally:
            connection.close()
    return sizes


def _remote_bytes(bootstrap_servers: str, storage_options: dict[str, Any]) -> int | None:
    from pipelines.common import broker_remote_url
    from tierlog.remote import open_store
    from tierlog.remote.manifest import committed_segments

    url = broker_remote_url(bootstrap_servers)
    if url is None:
        return None
    store = open_store(url, storage_options)
    return sum(
        segment.size_bytes
        for topic, partition in store.list_partitions()
        for segment in committed_segments(store.read_manifest(topic, partition))
    )


def _lag(admin: Any, timeout_s: float) -> dict[str, int]:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import OffsetSpec

    groups = admin.list_consumer_groups(request_timeout=timeout_s).result(timeout_s)
    lag = {}
    for listing in sorted(groups.valid, key=lambda g: g.group_id):
        group = listing.group_id
        request = [ConsumerGroupTopicPartitions(group)]
        found = admin.list_consumer_group_offsets(request, request_timeout=timeout_s)
        committed = {
            (tp.topic, tp.partition): tp.offset
            for tp in found[group].result(timeout_s).topic_partitions or []
            if tp.error is None and tp.offset >= 0
        }
        if not committed:
            lag[group] = 0
            continue
        wanted = {TopicPartition(t, p): OffsetSpec.latest() for t, p in committed}
        ends = admin.list_offsets(wanted, request_timeout=timeout_s)
        lag[group] = sum(
            max(0, ends[tp].result(timeout_s).offset - committed[(tp.topic, tp.partition)])
            for tp in wanted
        )
    return lag


# tierlog.tools.cleaner_report.broker_states: broker id -> (host, port), a timeout, the
# client's TLS and SASL settings (a ClientSecurity, None: PLAINTEXT) -> broker id ->
# {(topic, partition): state} (None: that broker's cleaner is off). Passed in: the
# pipelines do not import the tools (docs/architecture.md).
CleanerStates = Callable[
    [Mapping[int, tuple[str, int]], float, Any],
    Mapping[int, Mapping[tuple[str, int], Any] | None],
]


def snapshot(
    bootstrap_servers: str,
    *,
    cleaner_states: CleanerStates | None = None,
    metrics_urls: dict[int, str] | None = None,
    storage_options: dict[str, Any] | None = None,
    timeout_s: float = 10.0,
) -> Snapshot:
    """Ask the cluster behind ``bootstrap_servers`` everything the report shows.

    Args:
        cleaner_states: asks the brokers for their cleaners' states (None: not shown).
        metrics_urls: broker id -> its ``/metrics`` URL; None: found through each broker's
            configs (a broker whose ``metrics.http.port`` is -1 or 0 has none).
    """
    from pipelines import client_security

    admin = _admin(bootstrap_servers)
    cluster = admin.describe_cluster(request_timeout=timeout_s).result(timeout_s)
    nodes = sorted(cluster.nodes, key=lambda n: n.id)
    urls = metrics_urls if metrics_urls is not None else _metrics_urls(admin, nodes, timeout_s)
    brokers = [Broker(n.id, n.host, n.port, n.rack, urls.get(n.id)) for n in nodes]
    metadata = admin.list_topics(timeout=timeout_s)
    partitions = [
        PartitionState(topic, p.id, p.leader, list(p.replicas), list(p.isrs))
        for topic, described in sorted(metadata.topics.items())
        for p in sorted(described.partitions.values(), key=lambda p: p.id)
    ]
    states = (
        cleaner_states(
            {b.id: (b.host, b.port) for b in brokers}, timeout_s, client_security.client_security()
        )
        if cleaner_states is not None
        else {}
    )
    cleaner = {tp: dict(state) for found in states.values() for tp, state in (found or {}).items()}
    return Snapshot(
        time=time.time(),
        brokers=brokers,
        controller=cluster.controller.id if cluster.controller is not None else None,
        partitions=partitions,
        local_bytes=_local_bytes(brokers, timeout_s),
        remote_bytes=_remote_bytes(bootstrap_servers, storage_options or {}),
        lag=_lag(admin, timeout_s),
        cleaner=cleaner,
        metrics={b.id: scrape(b.metrics_url, timeout_s) for b in brokers if b.metrics_url},
    )


def brokers_table(snap: Snapshot) -> Any:
    """One row per broker: where it is, whether it is the controller, what it holds."""
    import pandas as pd

    leaders = Counter(p.leader for p in snap.partitions)
    replicas = Counter(r for p in snap.partitions for r in p.replicas)
    lagging = Counter(p.leader for p in snap.partitions if p.under_replicated)
    rows = [
        {
            "broker": b.id,
            "address": f"{b.host}:{b.port}",
            "rack": b.rack or "—",
            "controller": "yes" if b.id == snap.controller else "",
            "replicas": replicas[b.id],
            "leaders": leaders[b.id],
            "under-replicated (led here)": lagging[b.id],
            "local bytes": snap.local_bytes.get(b.id, 0),
            "metrics": b.metrics_url or "off",
        }
        for b in snap.brokers
    ]
    return pd.DataFrame(rows).set_index("broker")


def under_replicated_table(snap: Snapshot) -> Any:
    import pandas as pd

    rows = [
        {
            "topic": p.topic,
            "partition": p.partition,
            "leader": p.leader,
            "replicas": p.replicas,
            "isr": p.isr,
        }
        for p in snap.partitions
        if p.under_replicated
    ]
    return pd.DataFrame(rows, columns=["topic", "partition", "leader", "replicas", "isr"])


# What the metrics table shows of each broker's /metrics (Kafka's names), and its labels.
METRICS_SHOWN = {
    "kafka_controller_kafkacontroller_activecontrollercount": "active controller",
    "kafka_controller_kafkacontroller_offlinepartitionscount": "offline partitions",
    "kafka_server_replicamanager_underreplicatedpartitions": "under-replicated",
    "kafka_server_replicamanager_partitioncount": "partitions",
    "kafka_server_replicamanager_leadercount": "leaders",
    "kafka_server_brokertopicmetrics_remotecopybytes_total": "bytes offloaded",
    "kafka_server_brokertopicmetrics_remotefetchbytes_total": "bytes read remote",
    "kafka_log_logcleaner_max_dirty_percent": "cleaner max dirty %",
    "kafka_log_logcleanermanager_time_since_last_run_ms": "cleaner last run (ms ago)",
    "kafka_log_logcleanermanager_uncleanable_partitions_count": "uncleanable",
}


def metrics_table(snap: Snapshot) -> Any:
    """The brokers' own view (their /metrics), one row per broker that serves it."""
    import pandas as pd

    rows = {
        broker: {label: samples.get(name) for name, label in METRICS_SHOWN.items()}
        for broker, samples in sorted(snap.metrics.items())
    }
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("broker")


def cleaner_by_topic(snap: Snapshot) -> dict[str, dict[str, Any]]:
    """The cleaner's states per compacted topic: its partitions, the dirtiest one's ratio,
    how many are being cleaned and how many the cleaner gave up on."""
    topics: dict[str, dict[str, Any]] = {}
    for (topic, _), state in sorted(snap.cleaner.items()):
        row = topics.setdefault(
            topic, {"partitions": 0, "max dirty ratio": 0.0, "cleaning": 0, "uncleanable": 0}
        )
        row["partitions"] += 1
        ratio = round(float(state.get("dirty_ratio") or 0), 3)
        row["max dirty ratio"] = max(row["max dirty ratio"], ratio)
        row["cleaning"] += bool(state.get("cleaning"))
        row["uncleanable"] += bool(state.get("uncleanable"))
    return topics


def cleaner_table(snap: Snapshot) -> Any:
    import pandas as pd

    columns = ["partitions", "max dirty ratio", "cleaning", "uncleanable"]
    table = pd.DataFrame.from_dict(cleaner_by_topic(snap), orient="index", columns=columns)
    return table.rename_axis("compacted topic")


def record_history(snap: Snapshot, path: Path) -> list[dict[str, float]]:
    """Append this snapshot's bytes per tier to the CSV at ``path``; returns every row."""
    path.parent.mkdir(parents=True, exist_ok=True)
    new = not path.exists()
    with path.open("a", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=HISTORY_FIELDS)
        if new:
            writer.writeheader()
        writer.writerow(
            {
                "time": round(snap.time, 3),
                "local_bytes": sum(snap.local_bytes.values()),
                "remote_bytes": snap.remote_bytes or 0,
            }
        )
    with path.open(newline="") as rows:
        return [{k: float(v) for k, v in row.items()} for row in csv.DictReader(rows)]


def plot(snap: Snapshot, history: list[dict[str, float]]) -> Any:
    """Six panels: replicas and leaders per broker, under-replicated partitions per broker,
    bytes per tier over time, consumer lag per group, the cleaner's dirty ratios, and the
    local bytes per broker."""
    from datetime import datetime

    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(2, 3, figsize=(16, 8.5))
    ids = [b.id for b in snap.brokers]
    names = [f"broker {i}" + (" (controller)" if i == snap.controller else "") for i in ids]
    leaders = Counter(p.leader for p in snap.partitions)
    replicas = Counter(r for p in snap.partitions for r in p.replicas)

    ax = axes[0][0]
    ax.bar(names, [leaders[i] for i in ids], label="leader", color="tab:blue")
    followers = [replicas[i] - leaders[i] for i in ids]
    ax.bar(names, followers, bottom=[leaders[i] for i in ids], label="follower", color="tab:gray")
    ax.set_title("Partitions per broker (leader balance)")
    ax.legend()

    ax = axes[0][1]
    lagging = Counter(p.leader for p in snap.partitions if p.under_replicated)
    ax.bar(names, [lagging[i] for i in ids], color="tab:red")
    ax.set_title(f"Under-replicated partitions: {sum(lagging.values())}")
    ax.set_ylim(bottom=0, top=max([1, *lagging.values()]) * 1.2)

    ax = axes[0][2]
    times = [datetime.fromtimestamp(row["time"]) for row in history]
    ax.plot(times, [row["local_bytes"] / 2**20 for row in history], "o-", label="local")
    ax.plot(times, [row["remote_bytes"] / 2**20 for row in history], "s-", label="remote")
    ax.set_title("Bytes per tier (MiB), one point per run")
    ax.legend()
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%m-%d %H:%M"))
    ax.tick_params(axis="x", labelrotation=30)

    ax = axes[1][0]
    groups = sorted(snap.lag)
    ax.barh(groups or ["(no groups)"], [snap.lag[g] for g in groups] or [0], color="tab:orange")
    ax.set_title("Consumer lag per group (records)")

    ax = axes[1][1]
    cleaned = cleaner_by_topic(snap)
    ratios = [row["max dirty ratio"] for row in cleaned.values()]
    ax.barh(list(cleaned) or ["(no compacted topics)"], ratios or [0], color="tab:green")
    ax.set_xlim(0, 1)
    ax.set_title("Cleaner: dirtiest partition's dirty ratio per topic")

    ax = axes[1][2]
    ax.bar(names, [snap.local_bytes.get(i, 0) / 2**20 for i in ids], color="tab:purple")
    ax.set_title("Local bytes per broker (MiB)")
    figure.tight_layout()
    plt.close(figure)  # shown once, by display(), not again by the inline backend
    return figure


def summary(snap: Snapshot) -> dict[str, Any]:
    """The run's summary (``tierlog.jobs.summary``): counts and totals, JSON-friendly."""
    leaders = Counter(p.leader for p in snap.partitions)
    return {
        "brokers": [b.id for b in snap.brokers],
        "controller": snap.controller,
        "partitions": len(snap.partitions),
        "leaders": {str(b.id): leaders[b.id] for b in snap.brokers},
        "under_replicated": sum(p.under_replicated for p in snap.partitions),
        "offline": sum(p.leader < 0 for p in snap.partitions),
        "local_bytes": sum(snap.local_bytes.values()),
        "remote_bytes": snap.remote_bytes,
        "lag": snap.lag,
        "compacted_partitions": len(snap.cleaner),
        "compacted_topics": sorted(cleaner_by_topic(snap)),
        "metrics_scraped": sorted(snap.metrics),
    }
