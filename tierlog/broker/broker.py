"""The broker: wires configuration, the log manager, coordination, the remote tier, the
replica manager, the group coordinator and the network server, and owns start-up and clean
shutdown. Request handlers see only the ``BrokerServices`` it builds, never the broker.

Everything runs on one asyncio event loop; the local tier's single-threaded contract is
kept by running its scheduled tasks on that loop (``AsyncioScheduler``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from kio.static.primitive import i32Timedelta

from tierlog.broker.assembly import BrokerParts, Runtime, assemble, start_parts
from tierlog.broker.authorization import bind_request
from tierlog.broker.cluster import ClusterMembership
from tierlog.broker.config import BrokerConfig
from tierlog.broker.coordination.api import Coordinator
from tierlog.broker.decode_pool import DecodePool
from tierlog.broker.handlers.fetch import replica_id_of
from tierlog.broker.handlers.routes import HANDLERS
from tierlog.broker.listeners import ListenerPlan
from tierlog.broker.metrics import MetricsCollector, serve_metrics
from tierlog.broker.network.server import KafkaServer
from tierlog.broker.offsets_topic import OffsetsTopic
from tierlog.broker.replication.partition import Partition
from tierlog.broker.replication.replica_manager import ReplicaManager
from tierlog.broker.replication.segment_repair import SegmentRepairer
from tierlog.broker.services import BrokerServices, Lifecycle
from tierlog.broker.txn import Transactions
from tierlog.compaction.cleaner import LogCleaner
from tierlog.local.dir_remover import DirRemover
from tierlog.local.log_manager import LogManager
from tierlog.local.scrubber import Scrubber
from tierlog.protocol import ApiKey, EncodedFetchResponse, Request
from tierlog.records import record_walk, walk_jit
from tierlog.remote.remote_log_manager import RemoteLogManager
from tierlog.security.api import Authorizer
from tierlog.util.clock import Clock, SystemClock
from tierlog.util.scheduler import AsyncioScheduler

log = logging.getLogger(__name__)


class Broker:
    """One broker: ``start`` builds its parts (``assembly.assemble``), sets them going and
    only then accepts connections; ``stop`` goes the other way round. Requests go through
    ``dispatch`` to the handlers, which see only the ``BrokerServices``."""

    def __init__(self, config: BrokerConfig, *, clock: Clock | None = None) -> None:
        self.config = config
        self.clock = clock or SystemClock()
        self.lifecycle = Lifecycle()
        self._stopped = asyncio.Event()
        self.parts = BrokerParts()
        # Deleted partitions' directories are unlinked off the event loop (dir_remover).
        self._dir_remover = DirRemover()
        # Produced records that must be decoded are, off the event loop (decode_pool).
        self._decoder = DecodePool()
        self.metrics_port = -1
        self._metrics_server: Any = None

    # The parts, by name (None until built; tools and tests read them).

    @property
    def coordinator(self) -> Coordinator | None:
        return self.parts.coordinator

    @property
    def cluster(self) -> ClusterMembership | None:
        return self.parts.cluster

    @property
    def listeners(self) -> ListenerPlan | None:
        return self.parts.listeners

    @property
    def servers(self) -> dict[str, KafkaServer]:
        return self.parts.servers

    @property
    def server(self) -> KafkaServer | None:
        """The inter-broker listener's server (metrics read the shared counts through it)."""
        plan = self.parts.listeners
        return self.parts.servers.get(plan.inter_broker) if plan else None

    @property
    def port(self) -> int:
        """The first listener's port (0 before it is bound)."""
        plan = self.parts.listeners
        first = self.parts.servers.get(plan.listeners[0].name) if plan else None
        return first.port if first else 0

    @property
    def log_manager(self) -> LogManager | None:
        return self.parts.log_manager

    @property
    def remote(self) -> RemoteLogManager | None:
        return self.parts.remote

    @property
    def replicas(self) -> ReplicaManager | None:
        return self.parts.replicas

    @property
    def offsets_topic(self) -> OffsetsTopic | None:
        return self.parts.offsets_topic

    @property
    def transactions(self) -> Transactions | None:
        return self.parts.transactions

    @property
    def services(self) -> BrokerServices | None:
        return self.parts.services

    @property
    def authorizer(self) -> Authorizer | None:
        return self.parts.authorizer

    @property
    def scrubber(self) -> Scrubber | None:
        return self.parts.scrubber

    @property
    def repairer(self) -> SegmentRepairer | None:
        return self.parts.repairer

    @property
    def cleaner(self) -> LogCleaner | None:
        return self.parts.cleaner

    @property
    def stopping(self) -> bool:
        return self.lifecycle.stopping

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        if walk_jit.wanted():
            # TIERLOG_JIT=1: the compiled record walk (numba, +~110 MB RSS) loads while the
            # broker starts (0.3 s; 1-2 s to compile after an install); batches that arrive
            # first are walked in Python (records/walk_jit.py).
            threading.Thread(
                target=record_walk.use_jit, name="record-walk-jit", daemon=True
            ).start()
        scheduler = AsyncioScheduler(asyncio.get_running_loop())
        runtime = Runtime(
            self.clock, scheduler, self.lifecycle, self.dispatch, self._dir_remover, self._decoder
        )
        await assemble(self.config, runtime, self.parts)
        start_parts(self.parts)
        self._schedule_background_tasks(scheduler)
        self._serve_metrics()
        for name, server in self.servers.items():
            await server.serve()
            log.info(
                "broker %d listening on %s:%d, listener %s (%s)",
                self.config.broker_id,
                server.host,
                server.port,
                name,
                server.listener.protocol.value,
            )
        assert self.coordinator is not None
        log.info("broker %d serving cluster %s", self.config.broker_id, self.coordinator.cluster_id)

    def _schedule_background_tasks(self, scheduler: AsyncioScheduler) -> None:
        config = self.config
        assert self.offsets_topic is not None and self.replicas is not None
        offsets_topic = self.offsets_topic
        interval = config["offsets.retention.check.interval.ms"]
        scheduler.schedule(
            "offsets-expiry",
            lambda: asyncio.ensure_future(offsets_topic.expire_offsets()),
            interval,
            interval,
        )
        coordinator = self.transactions.coordinator if self.transactions else None
        if coordinator is not None:
            interval = config["transaction.abort.timed.out.transaction.cleanup.interval.ms"]
            scheduler.schedule(
                "transaction-abort",
                lambda: asyncio.ensure_future(coordinator.abort_timed_out()),
                interval,
                interval,
            )
            interval = config["transaction.remove.expired.transaction.cleanup.interval.ms"]
            scheduler.schedule(
                "transactionalid-expiration",
                lambda: asyncio.ensure_future(coordinator.expire_ids()),
                interval,
                interval,
            )
        if self.cluster is not None:
            # Kafka's isr-expiration task runs every replica.lag.time.max.ms / 2.
            interval = max(1, config["replica.lag.time.max.ms"] // 2)
            scheduler.schedule("isr-expiration", self.replicas.maybe_shrink_isr, interval, interval)
        if self.parts.certificates is not None:
            self.parts.certificates.schedule_file_checks(
                scheduler, config["ssl.keystore.reload.interval.ms"]
            )
        interval = config["replica.high.watermark.checkpoint.interval.ms"]
        scheduler.schedule(
            "high-watermark-checkpoint",
            self.replicas.checkpoint_high_watermarks,
            interval,
            interval,
        )
        if self.remote is not None:
            interval = config["remote.log.manager.task.interval.ms"]
            scheduler.schedule(
                "remote-log-manager",
                lambda: asyncio.ensure_future(self.remote_cycle()),
                0,
                interval,
            )

    def _serve_metrics(self) -> None:
        config = self.config
        if config["metrics.http.port"] < 0:
            return
        assert self.replicas is not None
        cluster, log_manager = self.cluster, self.log_manager
        collector = MetricsCollector(
            self.replicas.metrics,
            self.replicas,
            offline_partitions=lambda: sum(
                1
                for topic in (self.coordinator.topics() if self.coordinator else {}).values()
                for state in topic.partition_states.values()
                if state.leader < 0
            ),
            active_controller=lambda: cluster.controller.is_active if cluster else True,
            remote=self.remote,
            scrubber=self.scrubber,
            server=self.server,
            cleaner=self.cleaner,
            repairs=self.repairer.stats if self.repairer else None,
            quotas=self.services.quotas.stats if self.services and self.services.quotas else None,
            fetch_sessions=self.services.fetch_sessions if self.services else None,
            controller_stats=cluster.controller.stats if cluster else None,
            log_retention_passes=lambda: log_manager.retention_passes if log_manager else 0,
            client_metrics=self.services.client_metrics if self.services else None,
            replication_quotas=self.services.replication_quotas if self.services else None,
        )
        self._metrics_server, self.metrics_port = serve_metrics(
            collector, config["metrics.http.host"], config["metrics.http.port"]
        )

    def _log_dir_mover_close(self) -> Callable[[], Any] | None:
        mover = self.services.log_dir_mover if self.services else None
        return mover.close if mover else None

    async def remote_cycle(self) -> None:
        """Track the tiered partitions hosted here (leaders offload and retain, followers
        read the manifest), then run a cycle."""
        remote, replicas = self.remote, self.replicas
        if remote is None or replicas is None or self.stopping:
            return
        wanted = set()
        for (topic, index), partition in replicas.partitions.items():
            if partition.local.config.remote_storage_enable:
                # Leaders upload; followers follow the manifest (KIP-405).
                wanted.add((topic, index))
                remote.track(
                    topic,
                    index,
                    partition.topic_id,
                    partition.local,
                    partition_leader_epoch(partition),
                    partition_high_watermark(partition),
                    follower=not partition.is_leader,
                )
        for key in list(remote.partitions):
            if key not in wanted:
                tracked = remote.partitions[key]
                current = replicas.coordinator.topic(key[0])
                deleted = current is None or current.topic_id != tracked.topic_id
                remote.untrack(*key, topic_deleted=deleted)
        await remote.run_cycle()

    async def stop(self) -> None:
        """Clean shutdown: stop accepting, finish in-flight work, flush and checkpoint."""
        if self.stopping:
            await self._stopped.wait()
            return
        if self.cluster is not None and self.replicas is not None:
            # Still serving: leaderships move away first, so clients fail over with one
            # metadata refresh instead of waiting out a session timeout.
            await self.cluster.controlled_shutdown(self.replicas)
        self.lifecycle.begin_stop()
        # Each step runs even if an earlier one fails (say the data dir was removed under
        # a running broker), and steps of components a failed start never built are
        # skipped: a SIGTERM must always end the process.
        clean = True
        remote, replicas = self.remote, self.replicas
        log_manager, coordinator, cluster = self.log_manager, self.coordinator, self.cluster
        groups = self.offsets_topic.groups if self.offsets_topic is not None else None
        fetchers = replicas.fetchers if replicas is not None else None
        steps: list[tuple[str, Callable[[], Any] | None]] = [
            *((f"listener {name}", server.stop) for name, server in self.servers.items()),
            ("metrics endpoint", self._metrics_server.shutdown if self._metrics_server else None),
            ("replica fetchers", fetchers.close if fetchers else None),
            ("log dir moves", self._log_dir_mover_close()),
            ("groups", groups.close if groups else None),
            ("transactions", self.transactions.close if self.transactions else None),
            ("scrubber", self.scrubber.stop if self.scrubber else None),
            ("segment repair", self.repairer.stop if self.repairer else None),
            ("log cleaner", self.cleaner.stop if self.cleaner else None),
            ("remote tier", remote.stop if remote else None),
            ("authorizer", self.authorizer.close if self.authorizer else None),
            ("high watermarks", replicas.checkpoint_high_watermarks if replicas else None),
            ("logs", log_manager.shutdown if log_manager else None),
            ("deleted logs' removal", lambda: asyncio.to_thread(self._dir_remover.close)),
            ("record decoding", self._decoder.close),
            (
                "coordination",
                (cluster.stop if cluster else coordinator.stop) if coordinator else None,
            ),
        ]
        for what, step in steps:
            if step is None:
                continue
            try:
                result = step()
                if asyncio.iscoroutine(result):
                    await result
            except Exception:
                clean = False
                log.exception("stopping the %s failed; continuing the shutdown", what)
        self._stopped.set()
        log.info(
            "broker %d stopped %s",
            self.config.broker_id,
            "cleanly" if clean else "with errors (see above)",
        )

    async def wait_stopped(self) -> None:
        await self._stopped.wait()

    # -- requests ------------------------------------------------------------------------

    async def dispatch(self, request: Request) -> Any:
        handler = HANDLERS.get(request.api_key)
        if handler is None:
            raise _no_handler(request)
        # Every request passes here: the parts are read once, not through properties.
        parts = self.parts
        services, replicas = parts.services, parts.replicas
        # The server accepts connections only once start() has built every service.
        assert services is not None and replicas is not None
        metrics = replicas.metrics
        quotas = services.quotas
        if quotas is not None and quotas.throttled_for_ms() > 0:
            # A throttled client's next request waits here (Kafka mutes its channel).
            await quotas.wait_if_throttled()
        context = bind_request(request)  # who asks: the handlers' checks and quotas read it
        started = time.perf_counter()
        failed = True
        try:
            response = await handler(services, request)
            failed = False
        finally:
            elapsed = time.perf_counter() - started
            metrics.record_request(request.api_key, elapsed, failed)
        if quotas is not None and quotas.active() and not _sent_by_a_broker(request):
            # request_percentage: the time this request took, against the client's quota.
            throttle_ms = quotas.record_request_time(
                elapsed, request.client_id, context.principal.name
            )
            if throttle_ms:
                quotas.throttle("Request", throttle_ms)
                response = with_throttle_time(response, throttle_ms)
        if isinstance(response, EncodedFetchResponse):
            metrics.bytes_out += response.size
        return response


# Exempt from request_percentage, as Kafka exempts ClusterAction: what brokers send.
BROKER_ONLY_APIS = frozenset({ApiKey.ALTER_PARTITION, ApiKey.WRITE_TXN_MARKERS})


def _sent_by_a_broker(request: Request) -> bool:
    """A broker-only API, or a follower's Fetch (it names its replica id): Kafka's
    ClusterAction requests, which no client quota throttles."""
    if request.api_key in BROKER_ONLY_APIS:
        return True
    return request.api_key == ApiKey.FETCH and replica_id_of(request) >= 0


def with_throttle_time(response: Any, throttle_ms: int) -> Any:
    """``response`` telling the client to wait ``throttle_ms`` (KIP-219): a kio answer's
    ``throttle_time`` is raised to it; hand-laid answers (Produce, Fetch) carry their own
    byte-rate throttle and are left as they are (the connection is muted all the same)."""
    if not dataclasses.is_dataclass(response) or isinstance(response, type):
        return response
    current = getattr(response, "throttle_time", None)
    if not isinstance(current, datetime.timedelta):
        return response
    wanted = datetime.timedelta(milliseconds=throttle_ms)
    return dataclasses.replace(response, throttle_time=i32Timedelta.parse(max(current, wanted)))


def partition_leader_epoch(partition: Partition) -> Callable[[], int]:
    """The partition's current leader epoch, read when the remote manager writes."""
    return lambda: partition.leader_epoch


def partition_high_watermark(partition: Partition) -> Callable[[], int]:
    """The partition's high watermark, read when the remote manager picks segments."""
    return lambda: partition.high_watermark


def _no_handler(request: Request) -> Exception:
    from tierlog.protocol.errors import UnsupportedVersionError

    return UnsupportedVersionError(request.api_key, request.api_version, request.correlation_id)
