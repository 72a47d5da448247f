"""What a broker is made of, and the one function that builds it: ``assemble``.

Every part is built with what it needs passed to its constructor, in dependency order, so
this module is where a reader sees the broker's parts and what each is given. Nothing here
starts serving: ``Broker.start`` runs ``assemble``, then starts the background work and
accepts connections. Parts are recorded in ``BrokerParts`` as they are built, so a start
that fails part-way leaves the later ones None and ``Broker.stop`` stops only what exists.

Start-up order (nothing is served before everything is ready): the listener plan, the
coordination metadata, the listeners' security and the authorizer (a TLS, SASL or ACL
mistake is a one-line config error before anything is written), the log dirs and their
logs, the listening sockets (bound, not accepting: the registration needs their ports), the
log cleaner, the remote tier, the replica fetchers and the replica manager, the internal
topics' coordinators, the dynamic broker configs (``dynamic_config``: the parts that take
them at run time, ``reconfigurables``), the services the handlers see.

Two pairs depend on each other, and each is wired explicitly here rather than by setting
attributes after construction: the replica manager and the internal topics' coordinators
(through ``LeadershipChanges``, a hub the coordinators subscribe to), and the scrubber and
the segment repairer (the scrubber wakes a repairer built after it, through a closure).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tierlog.broker.authorization import RequestAuthorizer
from tierlog.broker.client_metrics.manager import ClientMetricsManager
from tierlog.broker.cluster import ClusterMembership
from tierlog.broker.config import BrokerConfig
from tierlog.broker.coordination.api import BrokerRegistration, Coordinator, UserConfigs
from tierlog.broker.coordination.local import LocalCoordinator
from tierlog.broker.coordination.local_security import LocalAclStore, LocalUserConfigs
from tierlog.broker.decode_pool import DecodePool
from tierlog.broker.dynamic_config import DynamicBrokerConfig
from tierlog.broker.fetch_sessions import FetchSessionCache
from tierlog.broker.listeners import ListenerPlan
from tierlog.broker.meta_properties import FILE_NAME as META_PROPERTIES
from tierlog.broker.meta_properties import check_or_write
from tierlog.broker.meta_properties import read as read_meta_properties
from tierlog.broker.network.listener_setup import (
    bind_listeners,
    connection_limits,
    inter_broker_security,
    listener_security,
    registration,
)
from tierlog.broker.network.quotas import ClientQuotaManager
from tierlog.broker.network.server import ConnectionQuotas, KafkaServer
from tierlog.broker.network.tls_reload import ListenerCertificates
from tierlog.broker.offsets_topic import OffsetsTopic
from tierlog.broker.reconfigurables import broker_reconfigurables, cleaner_config
from tierlog.broker.replication.leadership import LeadershipChanges
from tierlog.broker.replication.log_dir_mover import LogDirMover
from tierlog.broker.replication.partition_limits import PartitionLimits, fd_limit
from tierlog.broker.replication.partition_map import PartitionMap
from tierlog.broker.replication.replica_fetcher import ReplicaFetcherManager
from tierlog.broker.replication.replica_manager import ReplicaManager
from tierlog.broker.replication.replication_quota import ReplicationQuotas
from tierlog.broker.replication.segment_repair import SegmentRepairer
from tierlog.broker.scram_store import ScramCredentialCache
from tierlog.broker.services import BrokerServices, Lifecycle, ProducerIds
from tierlog.broker.txn import Transactions
from tierlog.compaction.cleaner import LogCleaner
from tierlog.compaction.remote_cleaner import RemoteCompactor
from tierlog.local.dir_remover import DirRemover
from tierlog.local.log_manager import LogManager, LogManagerTimings
from tierlog.local.scrubber import Scrubber
from tierlog.protocol import Request
from tierlog.remote.api import RemoteStorageError
from tierlog.remote.registry import open_store
from tierlog.remote.remote_log_manager import RemoteLogManager
from tierlog.security.api import AclStore, Authorizer
from tierlog.security.client_config import ClientSecurity
from tierlog.security.registry import open_authorizer
from tierlog.util.clock import Clock
from tierlog.util.configdef import ConfigError
from tierlog.util.scheduler import AsyncioScheduler
from tierlog.util.throttle import Throttle

log = logging.getLogger(__name__)

Dispatch = Callable[[Request], Awaitable[Any]]


@dataclass
class Runtime:
    """What the broker process gives every part: its clock, event-loop scheduler and
    lifecycle, where requests go, and the two off-loop workers it owns."""

    clock: Clock
    scheduler: AsyncioScheduler
    lifecycle: Lifecycle
    dispatch: Dispatch
    dir_remover: DirRemover
    decoder: DecodePool


@dataclass
class BrokerParts:
    """The broker's parts, in the order ``assemble`` builds them (None until built)."""

    listeners: ListenerPlan | None = None
    cluster: ClusterMembership | None = None  # cluster mode (zookeeper.connect) only
    coordinator: Coordinator | None = None
    authorizer: Authorizer | None = None
    log_manager: LogManager | None = None
    servers: dict[str, KafkaServer] = field(default_factory=dict)  # by listener name
    cleaner: LogCleaner | None = None
    remote: RemoteLogManager | None = None
    replicas: ReplicaManager | None = None
    offsets_topic: OffsetsTopic | None = None
    transactions: Transactions | None = None
    services: BrokerServices | None = None
    dynamic_config: DynamicBrokerConfig | None = None
    certificates: ListenerCertificates | None = None  # the TLS listeners' (reloadable)
    scrubber: Scrubber | None = None
    repairer: SegmentRepairer | None = None


async def assemble(config: BrokerConfig, run: Runtime, parts: BrokerParts) -> None:
    """Build every part of a broker into ``parts``, in dependency order (see the module's
    docstring). Raises ``ConfigError`` (one line naming the key) for what a config gets
    wrong; whatever it built before a failure is in ``parts`` for the stop."""
    clock = run.clock
    # Before anything is written: a bad listener is a one-line config error.
    listeners = parts.listeners = config.listener_plan()
    # How this broker connects to the others (its TLS files read now: a start-up error).
    peer_security = inter_broker_security(
        config.security, listeners, config["sasl.mechanism.inter.broker.protocol"], clock
    )
    coordinator, keep_strays = await _coordination(
        config, parts, peer_security, listeners.inter_broker
    )
    # A TLS or SASL mistake is a one-line config error too, before anything is written.
    users = _user_configs(parts.cluster, coordinator)
    scram = ScramCredentialCache(users, clock)
    security = {
        e.name: listener_security(
            config.security, e, clock, scram, inter_broker=e.name == listeners.inter_broker
        )
        for e in listeners.listeners
    }
    certificates = parts.certificates = ListenerCertificates(
        {name: s.tls for name, s in security.items() if s.tls is not None},
        listeners.inter_broker,
        peer_security,
    )
    # Before anything is served: every request is authorized from the first one on.
    authorizer = parts.authorizer = await _open_authorizer(config, parts.cluster, coordinator)
    for log_dir in config.log_dirs:
        check_or_write(log_dir, config.broker_id, coordinator.cluster_id)
    partitions = PartitionMap()
    log_manager = parts.log_manager = _log_manager(config, run, partitions.committed_offset)
    log_manager.startup(
        {
            name: config.log_config.with_overrides(topic.configs)
            for name, topic in coordinator.topics().items()
        }
    )
    connection_quotas = ConnectionQuotas(connection_limits(config), clock)
    parts.servers = await bind_listeners(
        listeners, security, run.dispatch, config["socket.request.max.bytes"], connection_quotas
    )
    await coordinator.start(_registration(config, listeners, parts.servers))
    cleaner = parts.cleaner = (
        LogCleaner(log_manager, cleaner_config(config), clock=clock)
        if config["log.cleaner.enable"]
        else None
    )
    # Paces uploads to the remote tier (per 8 MiB chunk, by the store); credit for one second
    # at most, so the uploader does not burst after idling. Its rate is a dynamic config.
    copy_rate = config["remote.log.manager.copy.max.bytes.per.second"]
    copy_throttle = Throttle(copy_rate, clock, burst_bytes=copy_rate, initial_bytes=copy_rate)
    # Bounds what fetches read from the remote tier (KIP-956), also one second of credit.
    fetch_rate = config["remote.log.manager.fetch.max.bytes.per.second"]
    fetch_throttle = Throttle(fetch_rate, clock, burst_bytes=fetch_rate, initial_bytes=fetch_rate)
    remote = parts.remote = _remote_log_manager(
        config, clock, log_manager, cleaner, copy_throttle, fetch_throttle
    )
    address_of = peer_addresses(coordinator, listeners.inter_broker)
    leadership = LeadershipChanges()
    replication_quotas = ReplicationQuotas(
        config["leader.replication.throttled.rate"],
        config["follower.replication.throttled.rate"],
        clock,
    )
    replicas = parts.replicas = ReplicaManager(
        config.broker_id,
        log_manager,
        coordinator,
        config.log_config,
        remote,
        remote_storage_system_enabled=config["remote.log.storage.system.enable"],
        replica_lag_time_max_ms=config["replica.lag.time.max.ms"],
        clock=clock,
        keep_strays=keep_strays,
        limits=PartitionLimits(
            config["max.broker.partitions"], config["max.partitions"], fd_limit()
        ),
        partitions=partitions,
        fetchers=(
            _replica_fetchers(config, address_of, peer_security, replication_quotas)
            if parts.cluster
            else None
        ),
        leadership=leadership,
    )
    offsets_topic = parts.offsets_topic = OffsetsTopic(config, coordinator, replicas, clock=clock)
    leadership.subscribe(offsets_topic.on_leadership_change)
    producer_ids = ProducerIds(coordinator)
    transactions = parts.transactions = Transactions(
        config,
        coordinator,
        replicas,
        offsets_topic.groups,
        producer_ids.next_id,
        address_of,
        clock=clock,
        peer_security=peer_security,
    )
    leadership.subscribe(transactions.state_topic.on_leadership_change)
    cluster = parts.cluster
    log_dir_mover = LogDirMover(
        replicas, bytes_per_second=config["replica.alter.log.dirs.io.max.bytes.per.second"]
    )
    # Applied (``start_parts``) before anything is served; every change after, at once.
    dynamic_config = parts.dynamic_config = DynamicBrokerConfig(
        config,
        coordinator,
        [
            *broker_reconfigurables(
                replicas,
                connection_quotas,
                lambda: cleaner,
                copy_throttle,
                fetch_throttle,
                replication_quotas,
                log_dir_mover,
                transactions,
                remote,
                None if cluster is None else cluster.controller,
            ),
            certificates.reconfigurable(),
        ],
    )
    parts.services = BrokerServices(
        config=config,
        dynamic_config=dynamic_config,
        cluster=coordinator,
        replicas=replicas,
        groups=offsets_topic.groups,
        offsets_topic=offsets_topic,
        producer_ids=producer_ids,
        lifecycle=run.lifecycle,
        alter_partition=(
            coordinator.alter_partition if cluster is None else cluster.decide_alter_partition
        ),
        controller=None if cluster is None else cluster.controller,
        cleaner_state=(lambda: cleaner.describe()) if cleaner is not None else (lambda: None),
        transactions=transactions,
        fetch_sessions=FetchSessionCache(config["max.incremental.fetch.session.cache.slots"]),
        authz=RequestAuthorizer(authorizer),
        user_configs=users,
        quotas=ClientQuotaManager(
            coordinator.client_quotas,
            samples=config["quota.window.num"],
            window_ms=config["quota.window.size.seconds"] * 1000,
        ),
        # Client metrics need somewhere to go: the metrics endpoint (KIP-714).
        client_metrics=(
            ClientMetricsManager(clock, config["telemetry.max.bytes"])
            if config["metrics.http.port"] >= 0
            else None
        ),
        log_dir_mover=log_dir_mover,
        decoder=run.decoder,
        replication_quotas=replication_quotas,
    )
    _integrity(config, parts, address_of, peer_security)


async def _coordination(
    config: BrokerConfig, parts: BrokerParts, peer_security: ClientSecurity, inter_broker: str
) -> tuple[Coordinator, bool]:
    """The coordination metadata (single node: its file in the first log dir; cluster:
    ZooKeeper, connected, its controller channel on the ``inter_broker`` listener with
    ``peer_security``), and whether stray logs are kept aside rather than removed."""
    if not config.single_node:
        cluster = parts.cluster = ClusterMembership(config, peer_security, inter_broker)
        parts.coordinator = cluster.coordinator
        await cluster.connect()
        return cluster.coordinator, False
    coordinator = LocalCoordinator(config.log_dirs[0])
    parts.coordinator = coordinator
    # Logs no metadata accounts for are strays, removed (issue 20, item 5), except beside a
    # single node's metadata file that is new while the data dir is not (its operator
    # moved it away): then they are kept aside, for the operator to judge.
    keep_strays = False
    if not coordinator.path.exists():
        # A first start that failed after writing meta.properties (a port already taken)
        # never saved its cluster id anywhere else: keep that one, or every later start
        # would refuse the directory as another cluster's.
        meta = Path(config.log_dirs[0]) / META_PROPERTIES
        if meta.exists():
            coordinator.cluster_id = read_meta_properties(meta)["cluster.id"]
            keep_strays = True
    return coordinator, keep_strays


def _user_configs(cluster: ClusterMembership | None, coordinator: Coordinator) -> UserConfigs:
    """Users' configs (SCRAM credentials, quotas) where this mode keeps metadata."""
    if cluster is not None:
        from tierlog.broker.coordination.zk_configs import ZkUserConfigs

        return ZkUserConfigs(cluster.coordinator.zk.configs)
    assert isinstance(coordinator, LocalCoordinator)
    return LocalUserConfigs(coordinator)


async def _open_authorizer(
    config: BrokerConfig, cluster: ClusterMembership | None, coordinator: Coordinator
) -> Authorizer | None:
    """``authorizer.class.name``'s plugin with its ACLs loaded, kept where this mode keeps
    metadata: ZooKeeper in Kafka's layout, or the single node's metadata store."""
    name = config["authorizer.class.name"]
    if not name:
        return None
    store: AclStore
    if cluster is not None:
        from tierlog.broker.coordination.zk_acls import ZkAclStore

        store = ZkAclStore(cluster.coordinator.zk.acls)
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


def _log_manager(
    config: BrokerConfig, run: Runtime, committed_offset: Callable[[tuple[str, int]], int | None]
) -> LogManager:
    return LogManager(
        config.log_dirs,
        config.log_config,
        clock=run.clock,
        scheduler=run.scheduler,
        remove_dir=run.dir_remover.submit,
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
        committed_offset=committed_offset,
    )


def _registration(
    config: BrokerConfig, listeners: ListenerPlan, servers: dict[str, KafkaServer]
) -> BrokerRegistration:
    return registration(
        listeners,
        {name: server.port for name, server in servers.items()},
        config.broker_id,
        config["broker.rack"] or None,
    )


def peer_addresses(
    coordinator: Coordinator, inter_broker: str
) -> Callable[[int], tuple[str, int] | None]:
    """Where a live broker listens for other brokers (the replica fetchers, transaction
    markers and segment repair connect there): its inter-broker listener's endpoint."""

    def address_of(broker_id: int) -> tuple[str, int] | None:
        found = next((b for b in coordinator.brokers() if b.broker_id == broker_id), None)
        if found is None:
            return None
        return found.address_on(inter_broker) or (found.host, found.port)

    return address_of


def _replica_fetchers(
    config: BrokerConfig,
    address_of: Callable[[int], tuple[str, int] | None],
    peer_security: ClientSecurity,
    quota: ReplicationQuotas,
) -> ReplicaFetcherManager:
    return ReplicaFetcherManager(
        config.broker_id,
        address_of,
        max_wait_ms=config["replica.fetch.wait.max.ms"],
        min_bytes=config["replica.fetch.min.bytes"],
        max_bytes=config["replica.fetch.max.bytes"],
        backoff_ms=config["replica.fetch.backoff.ms"],
        security=peer_security,
        quota=quota.follower,
    )


def _remote_log_manager(
    config: BrokerConfig,
    clock: Clock,
    log_manager: LogManager,
    cleaner: LogCleaner | None,
    copy_throttle: Throttle,
    fetch_throttle: Throttle,
) -> RemoteLogManager | None:
    """The remote log manager, when remote.log.storage.system.enable (the default); with
    the log cleaner, it cleans compacted tiered topics' remote segments too."""
    if not config["remote.log.storage.system.enable"]:
        return None
    if not config.single_node and not config["remote.log.storage.url"]:
        log.warning(
            "remote.log.storage.url is not set: this broker's remote tier is its own "
            "(%s); in a cluster every broker must name the same root, or a new leader "
            "does not see what the old one offloaded",
            config.remote_storage_url,
        )
    try:
        store = open_store(
            config.remote_storage_url,
            config.remote_storage_options,
            clock=clock,
            throttle=copy_throttle,
        )
    except (RemoteStorageError, OSError, ValueError) as exc:
        # Opening the store is where a URL fsspec knows but cannot reach fails (hdfs://
        # without libhdfs): one line naming the key, not a traceback from pyarrow.
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(
            "remote.log.storage.url", f"cannot open the remote tier: {reason}"
        ) from exc
    log.info("remote tier at %s", store.url)
    compactor = (
        RemoteCompactor(
            log_manager.log_dir_of,
            map_memory_bytes=config["log.cleaner.dedupe.buffer.size"],
            run_pass=cleaner.run_blocking,
            delete_delay_ms=config.log_config.file_delete_delay_ms,
            clock=clock,
        )
        if cleaner is not None
        else None
    )
    return RemoteLogManager(
        store,
        config.log_dirs[0] / ".remote-cache",
        config["remote.log.reader.cache.bytes"],
        clock=clock,
        fetch_timeout_ms=config["remote.fetch.max.wait.ms"],
        compactor=compactor,
        reader_threads=config["remote.log.reader.threads"],
        read_ahead_chunks=config["remote.log.reader.read.ahead.chunks"],
        read_ahead_max_bytes=config["remote.log.reader.read.ahead.max.bytes"],
        fetch_throttle=fetch_throttle,
    )


def _integrity(
    config: BrokerConfig,
    parts: BrokerParts,
    address_of: Callable[[int], tuple[str, int] | None],
    peer_security: ClientSecurity,
) -> None:
    """The scrubber (re-checks closed segments' CRC-32C in the background, issue 10) and,
    in a cluster, the repairer that fetches damaged ranges again from the ISR. Each needs
    the other: the scrubber wakes the repairer on new damage, the repairer tells the
    scrubber what it repaired; the closure below reads ``repairer`` when damage is found,
    after both are built."""
    replicas = parts.replicas
    assert replicas is not None
    repairer: SegmentRepairer | None = None

    def wake_repairer() -> None:
        if repairer is not None:
            repairer.wake()

    rate = config["log.scrubber.bytes.per.second"]
    scrubber = parts.scrubber = (
        Scrubber(
            lambda: replicas.log_manager.logs,
            rate,
            min_pass_interval_s=config["log.scrubber.pass.interval.ms"] / 1000,
            on_damage=wake_repairer,
        )
        if rate > 0
        else None
    )
    if parts.cluster is not None:
        repairer = parts.repairer = SegmentRepairer(
            config.broker_id,
            lambda: replicas.partitions.values(),
            address_of,
            on_repaired=(lambda p: scrubber.forget_repaired(p.local)) if scrubber else None,
            security=peer_security,
        )


def start_parts(parts: BrokerParts) -> None:
    """Set the built parts going, before connections are accepted: the partitions the
    metadata assigns here (and every later change), the controller, interrupted log dir
    moves, and the background workers."""
    replicas, coordinator, log_manager = parts.replicas, parts.coordinator, parts.log_manager
    assert replicas is not None and coordinator is not None and log_manager is not None
    replicas.sync()
    coordinator.on_change(replicas.sync)
    if parts.cluster is not None:
        parts.cluster.start_controller()
    # Moves between log dirs that the last stop interrupted go on (KIP-113).
    assert parts.services is not None and parts.services.log_dir_mover is not None
    parts.services.log_dir_mover.resume(log_manager.pending_moves)
    for worker in (parts.scrubber, parts.repairer, parts.cleaner):
        if worker is not None:
            worker.start()
    # What /config/brokers holds for this broker, applied to the running parts.
    assert parts.dynamic_config is not None
    parts.dynamic_config.start()
