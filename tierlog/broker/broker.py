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
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kio.static.primitive import i32Timedelta

from tierlog.broker.authorization import RequestAuthorizer, bind_request
from tierlog.broker.client_metrics.manager import ClientMetricsManager
from tierlog.broker.cluster import ClusterMembership
from tierlog.broker.config import BrokerConfig
from tierlog.broker.coordination.api import Coordinator, UserConfigs
from tierlog.broker.coordination.local import LocalCoordinator
from tierlog.broker.coordination.local_security import LocalAclStore, LocalUserConfigs
from tierlog.broker.decode_pool import DecodePool
from tierlog.broker.fetch_sessions import FetchSessionCache
from tierlog.broker.handlers.fetch import replica_id_of
from tierlog.broker.handlers.routes import HANDLERS
from tierlog.broker.listeners import ListenerPlan
from tierlog.broker.meta_properties import FILE_NAME as META_PROPERTIES
from tierlog.broker.meta_properties import check_or_write
from tierlog.broker.meta_properties import read as read_meta_properties
from tierlog.broker.metrics import MetricsCollector, serve_metrics
from tierlog.broker.network.connection_security import ListenerSecurity
from tierlog.broker.network.listener_setup import (
    bind_listeners,
    connection_limits,
    listener_security,
    registration,
)
from tierlog.broker.network.quotas import ClientQuotaManager
from tierlog.broker.network.server import ConnectionQuotas, KafkaServer
from tierlog.broker.offsets_topic import OffsetsTopic
from tierlog.broker.replication.log_dir_mover import LogDirMover
from tierlog.broker.replication.partition import Partition
from tierlog.broker.replication.partition_limits import PartitionLimits, fd_limit
from tierlog.broker.replication.replica_fetcher import ReplicaFetcherManager
from tierlog.broker.replication.replica_manager import ReplicaManager
from tierlog.broker.replication.segment_repair import SegmentRepairer
from tierlog.broker.scram_store import ScramCredentialCache
from tierlog.broker.services import BrokerServices, Lifecycle, ProducerIds
from tierlog.broker.txn import Transactions
from tierlog.compaction.cleaner import CleanerConfig, LogCleaner
from tierlog.compaction.remote_cleaner import RemoteCompactor
from tierlog.local.dir_remover import DirRemover
from tierlog.local.log_manager import LogManager, LogManagerTimings
from tierlog.local.scrubber import Scrubber
from tierlog.protocol import ApiKey, EncodedFetchResponse, Request
from tierlog.remote.api import RemoteStorageError
from tierlog.remote.registry import open_store
from tierlog.remote.remote_log_manager import RemoteLogManager
from tierlog.security.api import AclStore, Authorizer
from tierlog.security.registry import open_authorizer
from tierlog.util.clock import Clock, SystemClock
from tierlog.util.configdef import ConfigError
from tierlog.util.scheduler import AsyncioScheduler
from tierlog.util.throttle import Throttle

log = logging.getLogger(__name__)


class Broker:
    """Start-up order (nothing is served before everything is ready): coordination, log
    dirs and logs, the listening socket (bound, not yet accepting), the remote tier, the
    replica manager and its partitions, the group coordinator with what
    ``__consumer_offsets`` holds, the background tasks; only then are connections accepted.
    Shutdown goes the other way round."""

    def __init__(self, config: BrokerConfig, *, clock: Clock | None = None) -> None:
        self.config = config
        self.clock = clock or SystemClock()
        self.lifecycle = Lifecycle()
        self._stopped = asyncio.Event()
        self.coordinator: Coordinator | None = None
        self.log_manager: LogManager | None = None
        self.server: KafkaServer | None = None  # the inter-broker listener's
        self.servers: dict[str, KafkaServer] = {}  # every listener's, by name
        self.listeners: ListenerPlan | None = None
        self.remote: RemoteLogManager | None = None
        self.replicas: ReplicaManager | None = None
        self.offsets_topic: OffsetsTopic | None = None
        self.transactions: Transactions | None = None
        self.services: BrokerServices | None = None
        self.cluster: ClusterMembership | None = None
        self.scrubber: Scrubber | None = None
        self.repairer: SegmentRepairer | None = None
        self.cleaner: LogCleaner | None = None
        self.authorizer: Authorizer | None = None
        # Deleted partitions' directories are unlinked off the event loop (dir_remover).
        self._dir_remover = DirRemover()
        # Produced records that must be decoded are, off the event loop (decode_pool).
        self._decoder = DecodePool()
        self.port = 0
        self.metrics_port = -1
        self._metrics_server: Any = None

    @property
    def stopping(self) -> bool:
        return self.lifecycle.stopping

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        config = self.config
        # Before anything is written: a bad listener is a one-line config error.
        listeners = config.listener_plan()
        loop = asyncio.get_running_loop()
        coordinator: Coordinator
        # Logs no metadata accounts for are strays, removed (issue 20, item 5), except
        # beside a single node's metadata file that is new while the data dir is not (its
        # operator moved it away): then they are kept aside, for the operator to judge.
        keep_strays = False
        if config.single_node:
            coordinator = LocalCoordinator(config.log_dirs[0])
            if not coordinator.path.exists():
                # A first start that failed after writing meta.properties (a port already
                # taken) never saved its cluster id anywhere else: keep that one, or every
                # later start would refuse the directory as another cluster's.
                meta = Path(config.log_dirs[0]) / META_PROPERTIES
                if meta.exists():
                    coordinator.cluster_id = read_meta_properties(meta)["cluster.id"]
                    keep_strays = True
        else:
            self.cluster = ClusterMembership(config)
            coordinator = self.cluster.coordinator
            await self.cluster.connect()
        self.coordinator = coordinator
        # Before anything is written: a TLS or SASL mistake is a one-line config error too.
        scram = ScramCredentialCache(self._user_configs(coordinator), self.clock)
        security = {
            e.name: listener_security(config.security, e, self.clock, scram)
            for e in listeners.listeners
        }
        # Before anything is served: every request is authorized from the first one on.
        self.authorizer = await self._open_authorizer(coordinator)
        for log_dir in config.log_dirs:
            check_or_write(log_dir, config.broker_id, coordinator.cluster_id)
        topic_configs = {
            name: config.log_config.with_overrides(topic.configs)
            for name, topic in coordinator.topics().items()
        }
        scheduler = AsyncioScheduler(loop)
        log_manager = self.log_manager = LogManager(
            config.log_dirs,
            config.log_config,
            clock=self.clock,
            scheduler=scheduler,
            remove_dir=self._dir_remover.submit,
            verify_reads=config["log.read.verify.enable"],
            timings=LogManagerTimings(
                flush_check_interval_ms=config["log.flush.scheduler.interval.ms"],
                retention_check_interval_ms=config["log.retention.check.interval.ms"],
                checkpoint_interval_ms=config["log.flush.offset.checkpoint.interval.ms"],
                producer_id_expiration_ms=config["producer.id.expiration.ms"],
                producer_expiration_check_interval_ms=config[
                    "producer.id.expiration.check.interval.ms"
                ],
            ),
        )
        log_manager.startup(topic_configs)
        await self._bind_listeners(listeners, security)
        await coordinator.start(
            registration(
                listeners,
                {name: server.port for name, server in self.servers.items()},
                config.broker_id,
                config["broker.rack"] or None,
            )
        )
        self.remote = self._remote_log_manager()
        replicas = self.replicas = ReplicaManager(
            config.broker_id,
            log_manager,
            coordinator,
            config.log_config,
            self.remote,
            remote_storage_system_enabled=config["remote.log.storage.system.enable"],
            replica_lag_time_max_ms=config["replica.lag.time.max.ms"],
            clock=self.clock,
            keep_strays=keep_strays,
            limits=PartitionLimits(
                config["max.broker.partitions"], config["max.partitions"], fd_limit()
            ),
        )
        offsets_topic = self.offsets_topic = OffsetsTopic(
            config, coordinator, replicas, clock=self.clock
        )
        replicas.leadership_listeners.append(offsets_topic.on_leadership_change)
        producer_ids = ProducerIds(coordinator)
        transactions = self.transactions = Transactions(
            config,
            coordinator,
            replicas,
            offsets_topic.groups,
            producer_ids.next_id,
            self._address_of,
            clock=self.clock,
        )
        replicas.leadership_listeners.append(transactions.state_topic.on_leadership_change)
        if self.cluster is not None:
            replicas.fetchers = ReplicaFetcherManager(
                config.broker_id,
                self._address_of,
                max_wait_ms=config["replica.fetch.wait.max.ms"],
                min_bytes=config["replica.fetch.min.bytes"],
                max_bytes=config["replica.fetch.max.bytes"],
                backoff_ms=config["replica.fetch.backoff.ms"],
            )
        replicas.sync()
        coordinator.on_change(replicas.sync)
        if self.cluster is not None:
            self.cluster.start_controller()
        self.services = BrokerServices(
            config=config,
            cluster=coordinator,
            replicas=replicas,
            groups=offsets_topic.groups,
            offsets_topic=offsets_topic,
            producer_ids=producer_ids,
            lifecycle=self.lifecycle,
            alter_partition=(
                coordinator.alter_partition
                if self.cluster is None
                else self.cluster.decide_alter_partition
            ),
            controller=None if self.cluster is None else self.cluster.controller,
            # The cleaner starts below; until then (and when disabled) there is no state.
            cleaner_state=lambda: None if self.cleaner is None else self.cleaner.describe(),
            transactions=transactions,
            fetch_sessions=FetchSessionCache(config["max.incremental.fetch.session.cache.slots"]),
            authz=RequestAuthorizer(self.authorizer),
            user_configs=self._user_configs(coordinator),
            quotas=ClientQuotaManager(
                coordinator.client_quotas,
                samples=config["quota.window.num"],
                window_ms=config["quota.window.size.seconds"] * 1000,
            ),
            # Client metrics need somewhere to go: the metrics endpoint (KIP-714).
            client_metrics=(
                ClientMetricsManager(self.clock, config["telemetry.max.bytes"])
                if config["metrics.http.port"] >= 0
                else None
            ),
            log_dir_mover=LogDirMover(
                replicas,
                bytes_per_second=config["replica.alter.log.dirs.io.max.bytes.per.second"],
            ),
            decoder=self._decoder,
        )
        # Moves between log dirs that the last stop interrupted go on (KIP-113).
        assert self.services.log_dir_mover is not None
        self.services.log_dir_mover.resume(log_manager.pending_moves)
        self._schedule_background_tasks(scheduler)
        rate = config["log.scrubber.bytes.per.second"]
        if rate > 0:  # re-checks closed segments' CRC-32C in the background (issue 10)
            self.scrubber = Scrubber(
                lambda: log_manager.logs,
                rate,
                min_pass_interval_s=config["log.scrubber.pass.interval.ms"] / 1000,
            )
            self.scrubber.start()
        if self.cluster is not None:  # damaged ranges are fetched again from the ISR
            scrubber = self.scrubber
            self.repairer = SegmentRepairer(
                config.broker_id,
                lambda: replicas.partitions.values(),
                self._address_of,
                on_repaired=(lambda p: scrubber.forget_repaired(p.local)) if scrubber else None,
            )
            if scrubber is not None:
                scrubber.on_damage = self.repairer.wake
            self.repairer.start()
        if config["log.cleaner.enable"]:
            cleaner = self.cleaner = LogCleaner(
                log_manager, cleaner_config(config), clock=self.clock
            )
            cleaner.start()
            if self.remote is not None:
                # Compacted tiered topics: the leader cleans their remote segments too.
                self.remote.compactor = RemoteCompactor(
                    log_manager.log_dir_of,
                    map_memory_bytes=config["log.cleaner.dedupe.buffer.size"],
                    run_pass=cleaner.run_blocking,
                    delete_delay_ms=config.log_config.file_delete_delay_ms,
                    clock=self.clock,
                )
        self._serve_metrics()
        for name, server in self.servers.items():
            await server.serve()
            log.info(
                "broker %d listening on %s:%d, listener %s (%s)",
                config.broker_id,
                server.host,
                server.port,
                name,
                server.listener.protocol.value,
            )
        log.info("broker %d serving cluster %s", config.broker_id, coordinator.cluster_id)

    async def _bind_listeners(
        self, listeners: ListenerPlan, security: dict[str, ListenerSecurity]
    ) -> None:
        """Every listener bound (not yet accepting) under the broker's one set of
        connection quotas. ``server`` is the inter-broker listener's (metrics read the
        shared counts through it); ``port`` the first listener's."""
        config = self.config
        self.listeners = listeners
        self.servers = await bind_listeners(
            listeners,
            security,
            self.dispatch,
            config["socket.request.max.bytes"],
            ConnectionQuotas(connection_limits(config), self.clock),
        )
        self.server = self.servers[listeners.inter_broker]
        self.port = self.servers[listeners.listeners[0].name].port

    def _user_configs(self, coordinator: Coordinator) -> UserConfigs:
        if self.cluster is not None:
            from tierlog.broker.coordination.zk_configs import ZkUserConfigs

            return ZkUserConfigs(self.cluster.coordinator.zk.configs)
        assert isinstance(coordinator, LocalCoordinator)
        return LocalUserConfigs(coordinator)

    async def _open_authorizer(self, coordinator: Coordinator) -> Authorizer | None:
        """``authorizer.class.name``'s plugin with its ACLs loaded, kept where this mode
        keeps metadata: ZooKeeper in Kafka's layout, or the single node's metadata store."""
        config = self.config
        name = config["authorizer.class.name"]
        if not name:
            return None
        store: AclStore
        if self.cluster is not None:
            from tierlog.broker.coordination.zk_acls import ZkAclStore

            store = ZkAclStore(self.cluster.coordinator.zk.acls)
        else:
            assert isinstance(coordinator, LocalCoordinator)
            store = LocalAclStore(coordinator)
        settings = {
            "super.users": config["super.users"],
            "allow.everyone.if.no.acl.found": str(config["allow.everyone.if.no.acl.found"]).lower(),
        }
        authorizer = open_authorizer(name, settings, store)
        assert authorizer is not None
        await authorizer.start()
        log.info("authorizer %s: ACLs loaded", name)
        return authorizer

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
        )
        self._metrics_server, self.metrics_port = serve_metrics(
            collector, config["metrics.http.host"], config["metrics.http.port"]
        )

    def _log_dir_mover_close(self) -> Callable[[], Any] | None:
        mover = self.services.log_dir_mover if self.services else None
        return mover.close if mover else None

    def _address_of(self, broker_id: int) -> tuple[str, int] | None:
        """Where a live broker listens (the replica fetchers connect there)."""
        assert self.coordinator is not None
        found = next((b for b in self.coordinator.brokers() if b.broker_id == broker_id), None)
        if found is None:
            return None
        inter_broker = self.listeners.inter_broker if self.listeners else ""
        return found.address_on(inter_broker) or (found.host, found.port)

    def _remote_log_manager(self) -> RemoteLogManager | None:
        """The remote log manager, when remote.log.storage.system.enable (the default)."""
        config = self.config
        if not config["remote.log.storage.system.enable"]:
            return None
        if not config.single_node and not config["remote.log.storage.url"]:
            log.warning(
                "remote.log.storage.url is not set: this broker's remote tier is its own "
                "(%s); in a cluster every broker must name the same root, or a new leader "
                "does not see what the old one offloaded",
                config.remote_storage_url,
            )
        copy_rate = config["remote.log.manager.copy.max.bytes.per.second"]
        try:
            store = open_store(
                config.remote_storage_url,
                config.remote_storage_options,
                clock=self.clock,
                # Paced per uploaded chunk (8 MiB) by the store, not per segment up front;
                # credit for one second at most, so the uploader does not burst after idling.
                throttle=Throttle(
                    copy_rate,
                    self.clock,
                    burst_bytes=copy_rate,
                    initial_bytes=copy_rate,
                ),
            )
        except (RemoteStorageError, OSError, ValueError) as exc:
            # Opening the store is where a URL fsspec knows but cannot reach fails (hdfs://
            # without libhdfs): one line naming the key, not a traceback from pyarrow.
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ConfigError(
                "remote.log.storage.url", f"cannot open the remote tier: {reason}"
            ) from exc
        log.info("remote tier at %s", store.url)
        return RemoteLogManager(
            store,
            config.log_dirs[0] / ".remote-cache",
            config["remote.log.reader.cache.bytes"],
            clock=self.clock,
            fetch_timeout_ms=config["remote.fetch.max.wait.ms"],
        )

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
        # The server accepts connections only once start() has built every service.
        assert self.services is not None and self.replicas is not None
        metrics = self.replicas.metrics
        if self.services.quotas is not None:
            # A throttled client's next request waits here (Kafka mutes its channel).
            await self.services.quotas.wait_if_throttled()
        context = bind_request(request)  # who asks: the handlers' checks and quotas read it
        started = time.perf_counter()
        failed = True
        try:
            response = await handler(self.services, request)
            failed = False
        finally:
            elapsed = time.perf_counter() - started
            metrics.record_request(request.api_key, elapsed, failed)
        quotas = self.services.quotas
        if quotas is not None and not _sent_by_a_broker(request):
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


def cleaner_config(config: BrokerConfig) -> CleanerConfig:
    """The broker's ``log.cleaner.*`` keys as the cleaner's settings."""
    rate = config["log.cleaner.io.max.bytes.per.second"]
    return CleanerConfig(
        enable=config["log.cleaner.enable"],
        threads=config["log.cleaner.threads"],
        dedupe_buffer_size=config["log.cleaner.dedupe.buffer.size"],
        # Kafka's default, Double.MAX_VALUE, means no limit.
        io_max_bytes_per_second=0.0 if rate >= 1e300 else rate,
        backoff_ms=config["log.cleaner.backoff.ms"],
        load_factor=config["log.cleaner.io.buffer.load.factor"],
    )
