"""The broker: wires configuration, the log manager, coordination, the remote tier, the
replica manager, the group coordinator and the network server, and owns start-up and clean
shutdown. Request handlers see only the ``BrokerServices`` it builds, never the broker.

Everything runs on one asyncio event loop; the local tier's single-threaded contract is
kept by running its scheduled tasks on that loop (``AsyncioScheduler``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from tierlog.broker.config import BrokerConfig
from tierlog.broker.coordination.api import BrokerRegistration, Coordinator
from tierlog.broker.coordination.local import LocalCoordinator
from tierlog.broker.handlers import HANDLERS
from tierlog.broker.meta_properties import check_or_write
from tierlog.broker.offsets_topic import OffsetsTopic
from tierlog.broker.partition import Partition
from tierlog.broker.replica_manager import ReplicaManager
from tierlog.broker.server import KafkaServer
from tierlog.broker.services import BrokerServices, Lifecycle, ProducerIds
from tierlog.local.log_manager import LogManager, LogManagerTimings
from tierlog.protocol import Request
from tierlog.remote.fsspec_storage import FsspecRemoteStore
from tierlog.remote.remote_log_manager import RemoteLogManager
from tierlog.util.clock import Clock, SystemClock
from tierlog.util.scheduler import AsyncioScheduler

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
        self.server: KafkaServer | None = None
        self.remote: RemoteLogManager | None = None
        self.replicas: ReplicaManager | None = None
        self.offsets_topic: OffsetsTopic | None = None
        self.services: BrokerServices | None = None
        self.port = 0

    @property
    def stopping(self) -> bool:
        return self.lifecycle.stopping

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        config = self.config
        loop = asyncio.get_running_loop()
        coordinator = self.coordinator = LocalCoordinator(config.log_dirs[0])
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
            timings=LogManagerTimings(
                flush_check_interval_ms=config["log.flush.scheduler.interval.ms"],
                retention_check_interval_ms=config["log.retention.check.interval.ms"],
                checkpoint_interval_ms=config["log.flush.offset.checkpoint.interval.ms"],
                producer_id_expiration_ms=config["producer.id.expiration.ms"],
            ),
        )
        log_manager.startup(topic_configs)
        listener = config.listeners[0]
        self.server = KafkaServer(
            self.dispatch, listener.host, listener.port, config["socket.request.max.bytes"]
        )
        self.port = await self.server.start()
        advertised = config.advertised[0]
        await coordinator.start(
            BrokerRegistration(config.broker_id, advertised.host, advertised.port or self.port)
        )
        self.remote = self._remote_log_manager()
        replicas = self.replicas = ReplicaManager(
            config.broker_id,
            log_manager,
            coordinator,
            config.log_config,
            self.remote,
            remote_storage_system_enabled=config["remote.log.storage.system.enable"],
        )
        replicas.sync()
        offsets_topic = self.offsets_topic = OffsetsTopic(
            config, coordinator, replicas, clock=self.clock
        )
        if offsets_topic.exists:
            offsets_topic.load_led_partitions()
        self.services = BrokerServices(
            config=config,
            cluster=coordinator,
            replicas=replicas,
            groups=offsets_topic.groups,
            offsets_topic=offsets_topic,
            producer_ids=ProducerIds(coordinator),
            lifecycle=self.lifecycle,
        )
        self._schedule_background_tasks(scheduler)
        await self.server.serve()
        log.info(
            "broker %d listening on %s:%d (cluster %s)",
            config.broker_id,
            listener.host,
            self.port,
            coordinator.cluster_id,
        )

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

    def _remote_log_manager(self) -> RemoteLogManager | None:
        """The remote log manager, when remote.log.storage.system.enable (the default)."""
        config = self.config
        if not config["remote.log.storage.system.enable"]:
            return None
        store = FsspecRemoteStore(
            config.remote_storage_url, config.remote_storage_options, clock=self.clock
        )
        log.info("remote tier at %s", store.url_of(store.partition_path("x", 0)).rsplit("/", 1)[0])
        return RemoteLogManager(
            store,
            config.log_dirs[0] / ".remote-cache",
            config["remote.log.reader.cache.bytes"],
            clock=self.clock,
            copy_bytes_per_second=config["remote.log.manager.copy.max.bytes.per.second"],
            fetch_timeout_ms=config["remote.fetch.max.wait.ms"],
        )

    async def remote_cycle(self) -> None:
        """Track the tiered partitions this broker leads, then offload and retain."""
        remote, replicas = self.remote, self.replicas
        if remote is None or replicas is None or self.stopping:
            return
        wanted = set()
        for (topic, index), partition in replicas.partitions.items():
            if partition.local.config.remote_storage_enable and partition.is_leader:
                wanted.add((topic, index))
                remote.track(
                    topic,
                    index,
                    partition.topic_id,
                    partition.local,
                    partition_leader_epoch(partition),
                    partition_high_watermark(partition),
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
        self.lifecycle.begin_stop()
        # Each step runs even if an earlier one fails (say the data dir was removed under
        # a running broker), and steps of components a failed start never built are
        # skipped: a SIGTERM must always end the process.
        clean = True
        server, remote, replicas = self.server, self.remote, self.replicas
        log_manager, coordinator = self.log_manager, self.coordinator
        groups = self.offsets_topic.groups if self.offsets_topic is not None else None
        steps: list[tuple[str, Callable[[], Any] | None]] = [
            ("server", server.stop if server else None),
            ("groups", groups.close if groups else None),
            ("remote tier", remote.close if remote else None),
            ("high watermarks", replicas.checkpoint_high_watermarks if replicas else None),
            ("logs", log_manager.shutdown if log_manager else None),
            ("coordination", coordinator.stop if coordinator else None),
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
        assert self.services is not None
        return await handler(self.services, request)


def partition_leader_epoch(partition: Partition) -> Callable[[], int]:
    """The partition's current leader epoch, read when the remote manager writes."""
    return lambda: partition.leader_epoch


def partition_high_watermark(partition: Partition) -> Callable[[], int]:
    """The partition's high watermark, read when the remote manager picks segments."""
    return lambda: partition.high_watermark


def _no_handler(request: Request) -> Exception:
    from tierlog.protocol.errors import UnsupportedVersionError

    return UnsupportedVersionError(request.api_key, request.api_version, request.correlation_id)
