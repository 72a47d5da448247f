"""The broker's metrics, in Prometheus' text format on ``metrics.http.port`` (off by default).

Names follow Kafka's JMX metrics as the Prometheus JMX exporter renders them
(``kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions`` ->
``kafka_server_replicamanager_underreplicatedpartitions``), so dashboards built for Kafka
read them. Gauges are computed when scraped, from the broker's own state; the only work on
the request path is a few integer additions per request (``BrokerMetrics.record_*``, in
``counters``, which sits below replication so that this module can read it back).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from tierlog.broker.counters import BrokerMetrics
from tierlog.protocol import ApiKey

if TYPE_CHECKING:
    from tierlog.broker.client_metrics.manager import ClientMetricsManager
    from tierlog.broker.controller.stats import ControllerStats
    from tierlog.broker.fetch_sessions import FetchSessionCache
    from tierlog.broker.network.quotas import QuotaStats
    from tierlog.broker.network.server import KafkaServer
    from tierlog.broker.replication.partition import Partition
    from tierlog.broker.replication.replication_quota import ReplicationQuotas
    from tierlog.broker.replication.segment_repair import RepairStats
    from tierlog.compaction.cleaner import LogCleaner
    from tierlog.local.scrubber import Scrubber
    from tierlog.remote.remote_log_manager import RemoteLogManager

log = logging.getLogger(__name__)

# Kafka's request names (RequestMetrics' "request" tag): ApiKey names in CamelCase.
REQUEST_NAMES = {int(k): "".join(w.title() for w in k.name.split("_")) for k in ApiKey}


class HostedPartitions(Protocol):
    """What the collector reads of the replica manager (which builds ``BrokerMetrics``,
    so this module does not import it back)."""

    @property
    def partitions(self) -> Mapping[tuple[str, int], Partition]: ...


class MetricsCollector:
    """A prometheus_client collector over the broker's state.

    Args:
        metrics: the counters.
        replicas: the partitions hosted here (under-replicated partitions).
        offline_partitions: partitions without a leader, as the active controller counts
            them; None on a broker that is not the controller (Kafka reports it there only).
        active_controller: 1 on the active controller.
        controller_stats: the controller's counters (cluster mode); kept across terms, so a
            broker reports what it did while controller, as Kafka's meters do.
        remote: the remote log manager's counters, if the remote tier is on.
        log_retention_passes: how many local retention passes have run.
    """

    def __init__(
        self,
        metrics: BrokerMetrics,
        replicas: HostedPartitions,
        *,
        offline_partitions: Callable[[], int],
        active_controller: Callable[[], bool],
        remote: RemoteLogManager | None,
        scrubber: Scrubber | None = None,
        server: KafkaServer | None = None,
        cleaner: LogCleaner | None = None,
        repairs: RepairStats | None = None,
        quotas: QuotaStats | None = None,
        fetch_sessions: FetchSessionCache | None = None,
        controller_stats: ControllerStats | None = None,
        log_retention_passes: Callable[[], int] | None = None,
        client_metrics: ClientMetricsManager | None = None,
        replication_quotas: ReplicationQuotas | None = None,
    ) -> None:
        self.metrics = metrics
        self.replicas = replicas
        self.replication_quotas = replication_quotas
        self.offline_partitions = offline_partitions
        self.active_controller = active_controller
        self.remote = remote
        self.scrubber = scrubber
        self.server = server
        self.cleaner = cleaner
        self.repairs = repairs
        self.quotas = quotas
        self.fetch_sessions = fetch_sessions
        self.controller_stats = controller_stats
        self.log_retention_passes = log_retention_passes
        self.client_metrics = client_metrics

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        m = self.metrics
        under = sum(
            1
            for p in list(self.replicas.partitions.values())
            if p.is_leader and len(p.state.isr) < len(p.replicas)
        )
        yield GaugeMetricFamily(
            "kafka_server_replicamanager_underreplicatedpartitions",
            "Partitions led here whose ISR is smaller than their replica set",
            value=under,
        )
        yield GaugeMetricFamily(
            "kafka_server_replicamanager_partitioncount",
            "Partitions hosted on this broker",
            value=len(self.replicas.partitions),
        )
        yield GaugeMetricFamily(
            "kafka_server_replicamanager_leadercount",
            "Partitions led by this broker",
            value=sum(1 for p in list(self.replicas.partitions.values()) if p.is_leader),
        )
        active = self.active_controller()
        yield GaugeMetricFamily(
            "kafka_controller_kafkacontroller_activecontrollercount",
            "1 on the active controller",
            value=1 if active else 0,
        )
        yield GaugeMetricFamily(
            "kafka_controller_kafkacontroller_offlinepartitionscount",
            "Partitions without a live leader (reported by the active controller)",
            value=self.offline_partitions() if active else 0,
        )
        if self.controller_stats is not None:
            # kafka.controller:type=ControllerStats,name=UncleanLeaderElectionsPerSec.
            yield CounterMetricFamily(
                "kafka_controller_controllerstats_uncleanleaderelections",
                "Leaders elected from outside the ISR by this broker as controller (each may "
                "have lost acknowledged records)",
                value=self.controller_stats.unclean_leader_elections,
            )
        for name, value, text in (
            ("isrshrinks", m.isr_shrinks, "ISR shrinks of partitions led here"),
            ("isrexpands", m.isr_expands, "ISR expansions of partitions led here"),
        ):
            yield CounterMetricFamily(f"kafka_server_replicamanager_{name}", text, value=value)
        for name, value, text in (
            ("bytesin", m.bytes_in, "Bytes of record batches appended for producers"),
            ("bytesout", m.bytes_out, "Bytes of fetch responses"),
            ("messagesin", m.messages_in, "Records appended for producers"),
        ):
            yield CounterMetricFamily(f"kafka_server_brokertopicmetrics_{name}", text, value=value)
        requests = CounterMetricFamily(
            "kafka_network_requestmetrics_requests", "Requests handled", labels=["request"]
        )
        errors = CounterMetricFamily(
            "kafka_network_requestmetrics_errors",
            "Requests that failed inside the broker",
            labels=["request"],
        )
        seconds = CounterMetricFamily(
            "kafka_network_requestmetrics_totaltime_seconds",
            "Time spent answering requests (the mean is this over requests_total)",
            labels=["request"],
        )
        for key, stats in sorted(m.requests.items()):
            label = [REQUEST_NAMES.get(key, str(key))]
            requests.add_metric(label, stats.count)
            errors.add_metric(label, stats.errors)
            seconds.add_metric(label, stats.total_seconds)
        yield requests
        yield errors
        yield seconds
        if self.remote is not None:
            remote = self.remote.stats()
            for name, stat, text in (
                ("remotecopybytes", "uploaded_bytes", "Bytes offloaded to the remote tier"),
                ("remotecopysegments", "uploaded_segments", "Segments offloaded"),
                ("remotefetchbytes", "fetched_bytes", "Bytes read from the remote tier"),
                ("remotecopyerrors", "copy_errors", "Failed remote-tier cycles"),
                ("remotefetcherrors", "fetch_errors", "Failed remote reads"),
            ):
                if stat in remote:
                    yield CounterMetricFamily(
                        f"kafka_server_brokertopicmetrics_{name}", text, value=remote[stat]
                    )
            # tierlog's own: Kafka's remote metadata cannot vanish with the bucket.
            yield CounterMetricFamily(
                "tierlog_remote_lost_ranges",
                "Times the remote tier was found to have lost committed data",
                value=remote.get("lost_ranges", 0),
            )
            # Requests to the store, what object storage bills (issue 24).
            store_requests = CounterMetricFamily(
                "tierlog_remote_store_requests",
                "GET and PUT requests sent to the remote store (manifests included)",
                labels=["method"],
            )
            store_requests.add_metric(["GET"], remote.get("remote_get_requests", 0))
            store_requests.add_metric(["PUT"], remote.get("remote_put_requests", 0))
            yield store_requests
            yield CounterMetricFamily(
                "tierlog_remote_read_ahead_chunks",
                "Chunks of remote segments fetched ahead of consumers' reads",
                value=remote.get("read_ahead_chunks", 0),
            )
            yield CounterMetricFamily(
                "tierlog_remote_cycles",
                "Remote log manager cycles run (offload, remote retention, manifest checks)",
                value=remote.get("cycles", 0),
            )
        if self.log_retention_passes is not None:
            yield CounterMetricFamily(
                "tierlog_log_retention_passes",
                "Local retention passes run (log.retention.check.interval.ms)",
                value=self.log_retention_passes(),
            )
        if self.scrubber is not None:
            yield from _scrubber_metrics(self.scrubber)
        if self.repairs is not None:
            yield from _repair_metrics(self.repairs)
        if self.quotas is not None:
            yield from _quota_metrics(self.quotas)
        if self.replication_quotas is not None:
            yield from _replication_quota_metrics(self.replication_quotas)
        if self.fetch_sessions is not None:
            yield from _fetch_session_metrics(self.fetch_sessions)
        if self.cleaner is not None:
            yield from _cleaner_metrics(self.cleaner, self.remote)
        if self.server is not None:
            yield from _server_metrics(self.server)
        if self.client_metrics is not None:
            yield from _client_metrics(self.client_metrics)


def _client_metrics(manager: ClientMetricsManager) -> Iterator[Any]:
    """What clients pushed (KIP-714), each number labelled with the client's id, instance id
    and software, plus the attributes the client gave it; names as the client sent them,
    made Prometheus-safe (``org.apache.kafka.producer.record.send.total`` ->
    ``org_apache_kafka_producer_record_send_total``). Monotonic sums are counters."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

    families: dict[tuple[str, bool], Metric] = {}
    for series in manager.series():
        key = (series.name, series.counter)
        family = families.get(key)
        if family is None:
            # A counter's samples end in _total (OpenMetrics); Kafka's sums already do
            # (record.send.total), which must not become ..._total_total.
            name = series.name.removesuffix("_total") if series.counter else series.name
            kind = "counter" if series.counter else "gauge"
            family = families[key] = Metric(name, "pushed by clients (KIP-714)", kind)
        sample_name = f"{family.name}_total" if series.counter else family.name
        family.add_sample(sample_name, dict(series.labels), series.value)
    yield from families.values()
    yield GaugeMetricFamily(
        "tierlog_client_metrics_instances",
        "Client instances whose pushed metrics this broker keeps",
        value=manager.instances,
    )
    yield CounterMetricFamily(
        "tierlog_client_metrics_pushes", "Client-metrics pushes accepted", value=manager.pushes
    )
    yield CounterMetricFamily(
        "tierlog_client_metrics_refused",
        "Client-metrics requests refused (early, stale subscription, too large, unreadable)",
        value=manager.refused,
    )


def _server_metrics(server: KafkaServer) -> Iterator[Any]:
    """Connections and request memory (docs/limits.md). Kafka's names where Kafka has the
    metric (``socket-server-metrics`` connection-count, ``SocketServer``
    MemoryPoolAvailable/Used); tierlog's own for the closes its limits make, by reason."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    yield GaugeMetricFamily(
        "kafka_server_socket_server_metrics_connection_count",
        "Client connections open",
        value=server.connection_count,
    )
    pool = server.memory_pool
    if pool is not None:
        yield GaugeMetricFamily(
            "kafka_network_socketserver_memorypoolavailable",
            "Bytes of queued.max.request.bytes not reserved (negative: one request overran)",
            value=pool.available,
        )
        yield GaugeMetricFamily(
            "kafka_network_socketserver_memorypoolused",
            "Bytes of queued.max.request.bytes reserved by requests being received or handled",
            value=pool.capacity - pool.available,
        )
    s = server.stats
    refused = CounterMetricFamily(
        "tierlog_server_connections_refused",
        "Connections closed on accept by a connection quota",
        labels=["limit"],
    )
    refused.add_metric(["max.connections"], s.refused_max_connections)
    refused.add_metric(["max.connections.per.ip"], s.refused_per_ip)
    yield refused
    closed = CounterMetricFamily(
        "tierlog_server_connections_closed",
        "Connections closed by a time limit",
        labels=["limit"],
    )
    closed.add_metric(["connections.max.idle.ms"], s.closed_idle)
    closed.add_metric(["socket.request.receive.timeout.ms"], s.closed_slow_request)
    yield closed
    # Kafka's socket-server-metrics authentication counters (SSL and SASL listeners).
    for name, value, text in (
        ("successful_authentication", s.successful_authentication, "Authentications"),
        ("successful_reauthentication", s.successful_reauthentication, "Re-authentications"),
        ("failed_authentication", s.failed_authentication, "Failed authentications"),
    ):
        yield CounterMetricFamily(
            f"kafka_server_socket_server_metrics_{name}",
            f"{text} on SSL and SASL listeners",
            value=value,
        )
    yield CounterMetricFamily(
        "kafka_server_socket_server_metrics_expired_connections_killed",
        "Connections closed because their SASL session ended without re-authentication "
        "(KIP-368; Kafka's expired-connections-killed-count)",
        value=s.expired_connections_killed,
    )


def _cleaner_metrics(cleaner: LogCleaner, remote: RemoteLogManager | None) -> Iterator[Any]:
    """The log cleaner: Kafka's LogCleaner / LogCleanerManager gauges under their names,
    tierlog's counters and per-partition dirty ratios under its own."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    s = cleaner.stats
    try:
        states = cleaner.describe()
    except RuntimeError:  # the logs changed under this (metrics) thread: next scrape
        states = {}
    ratios = [state["dirty_ratio"] for state in states.values()]
    yield GaugeMetricFamily(
        "kafka_log_logcleaner_max_dirty_percent",
        "Highest dirty share of a compacted log, in percent",
        value=100 * max((float(r) for r in ratios), default=0.0),  # type: ignore[arg-type]
    )
    yield GaugeMetricFamily(
        "kafka_log_logcleaner_cleaner_recopy_percent",
        "Bytes written over bytes read by the last pass, in percent",
        value=100 * s.last_bytes_written / s.last_bytes_read if s.last_bytes_read else 0.0,
    )
    yield GaugeMetricFamily(
        "kafka_log_logcleaner_max_clean_time_secs",
        "How long the last pass took",
        value=s.last_pass_seconds,
    )
    yield GaugeMetricFamily(
        "kafka_log_logcleanermanager_uncleanable_partitions_count",
        "Compacted logs the cleaner skips (their first dirty segment does not fit the offset "
        "map, or a segment is corrupt)",
        value=len(cleaner.state.uncleanable),
    )
    yield GaugeMetricFamily(
        "kafka_log_logcleanermanager_time_since_last_run_ms",
        "Time since the last pass ended (-1: none yet)",
        value=cleaner.clock.milliseconds() - s.last_pass_end_ms if s.last_pass_end_ms else -1,
    )
    for name, value, text in (
        ("passes", s.passes, "Cleaning passes swapped in"),
        ("read_bytes", s.bytes_read, "Bytes the passes read"),
        ("written_bytes", s.bytes_written, "Bytes the passes wrote"),
        ("removed_records", s.records_removed, "Records the passes removed"),
        ("stale_swaps", s.stale_swaps, "Passes discarded: their segments changed meanwhile"),
        ("failures", s.failures, "Passes that failed"),
    ):
        yield CounterMetricFamily(f"tierlog_cleaner_{name}", text, value=value)
    if remote is not None and remote.compactor is not None:
        compactor = remote.compactor
        yield CounterMetricFamily(
            "tierlog_cleaner_remote_passes",
            "Remote-tier passes committed",
            value=getattr(compactor, "passes", 0),
        )
        yield CounterMetricFamily(
            "tierlog_cleaner_remote_replaced_segments",
            "Remote segments replaced by cleaned ones",
            value=getattr(compactor, "replaced_segments", 0),
        )
    dirty = GaugeMetricFamily(
        "tierlog_cleaner_dirty_ratio",
        "Dirty share of each compacted log's cleanable part",
        labels=["partition"],
    )
    for (topic, index), state in sorted(states.items()):
        dirty.add_metric([f"{topic}-{index}"], float(state["dirty_ratio"]))  # type: ignore[arg-type]
    yield dirty


def _fetch_session_metrics(cache: FetchSessionCache) -> Iterator[Any]:
    """Kafka's FetchSessionCache metrics (KIP-227)."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    yield GaugeMetricFamily(
        "kafka_server_fetchsessioncache_numincrementalfetchsessions",
        "Incremental fetch sessions open",
        value=len(cache),
    )
    yield GaugeMetricFamily(
        "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached",
        "Partitions held by the open fetch sessions",
        value=cache.partitions_cached(),
    )
    yield CounterMetricFamily(
        "kafka_server_fetchsessioncache_incrementalfetchsessionevictions",
        "Fetch sessions evicted to make room for new ones",
        value=cache.evictions,
    )


def _quota_metrics(quotas: QuotaStats) -> Iterator[Any]:
    """Requests answered with a client-quota throttle time, and that time in total."""
    from prometheus_client.core import CounterMetricFamily

    throttled = CounterMetricFamily(
        "tierlog_quota_throttled_requests",
        "Requests answered with a throttle time (client byte-rate quotas)",
        labels=["request"],
    )
    seconds = CounterMetricFamily(
        "tierlog_quota_throttle_seconds",
        "Throttle time handed out to clients over their quota",
        labels=["request"],
    )
    for api in sorted(quotas.throttled):
        throttled.add_metric([api], quotas.throttled[api])
        seconds.add_metric([api], quotas.throttle_ms.get(api, 0) / 1000)
    yield throttled
    yield seconds


def _replication_quota_metrics(quotas: ReplicationQuotas) -> Iterator[Any]:
    """The replication throttles (KIP-73): bytes of throttled partitions moved, per side
    (Kafka's LeaderReplication / FollowerReplication byte-rate, as a counter to derive the
    rate from), and each side's limit (absent while unlimited)."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    moved = CounterMetricFamily(
        "tierlog_replication_throttled_bytes",
        "Bytes of partitions listed in *.replication.throttled.replicas sent (leader) or "
        "fetched (follower)",
        labels=["side"],
    )
    limit = GaugeMetricFamily(
        "tierlog_replication_throttled_rate",
        "leader/follower.replication.throttled.rate in force, bytes per second",
        labels=["side"],
    )
    for side, quota in (("leader", quotas.leader), ("follower", quotas.follower)):
        moved.add_metric([side], quota.bytes_total)
        if quota.limited:
            limit.add_metric([side], quota.rate)
    yield moved
    yield limit


def _repair_metrics(repairs: RepairStats) -> Iterator[Any]:
    """Damaged ranges rewritten from an in-sync replica (tierlog's own, as the scrubber)."""
    from prometheus_client.core import CounterMetricFamily

    for name, value, text in (
        ("ranges", repairs.repaired_ranges, "Damaged ranges repaired from a replica"),
        ("bytes", repairs.repaired_bytes, "Bytes rewritten from a replica's copy"),
        ("failed_attempts", repairs.failed_attempts, "Repair attempts a replica could not serve"),
    ):
        yield CounterMetricFamily(f"tierlog_segment_repair_{name}", text, value=value)


def _scrubber_metrics(scrubber: Scrubber) -> Iterator[Any]:
    """The background scrubber's progress and findings (Kafka has no scrubber, hence
    tierlog's own names)."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    s = scrubber.stats
    for name, value, text in (
        ("verified_bytes", s.verified_bytes, "Bytes of closed segments CRC-checked"),
        ("verified_segments", s.verified_segments, "Closed segments CRC-checked"),
        ("passes", s.completed_passes, "Completed passes over every closed segment"),
        ("corrupt_batches", s.corrupt_batches, "Damaged batches found (each counted once)"),
    ):
        yield CounterMetricFamily(f"tierlog_scrubber_{name}", text, value=value)
    yield GaugeMetricFamily(
        "tierlog_scrubber_pass_progress_ratio",
        "Share of the current pass's bytes checked so far",
        value=s.pass_bytes_done / s.pass_bytes_total if s.pass_bytes_total else 1.0,
    )
    yield GaugeMetricFamily(
        "tierlog_scrubber_last_pass_seconds",
        "How long the last completed pass took",
        value=s.last_pass_seconds,
    )
    yield GaugeMetricFamily(
        "tierlog_scrubber_rate_bytes_per_second",
        "The configured rate (log.scrubber.bytes.per.second)",
        value=scrubber.bytes_per_second,
    )
    damaged = GaugeMetricFamily(
        "tierlog_scrubber_damaged_ranges",
        "Damaged byte ranges marked unreadable, per partition (reads answer KAFKA_STORAGE_ERROR)",
        labels=["partition"],
    )
    for name, problems in sorted(s.damaged.items()):
        damaged.add_metric([name], len(problems))
    yield damaged


def serve_metrics(collector: MetricsCollector, host: str, port: int) -> tuple[Any, int]:
    """Start the HTTP endpoint (a prometheus_client thread); returns (server, bound port)."""
    from prometheus_client import CollectorRegistry, start_http_server

    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    server, _thread = start_http_server(port, addr=host, registry=registry)
    bound = int(server.server_address[1])
    log.info("metrics on http://%s:%d/metrics", host, bound)
    return server, bound
