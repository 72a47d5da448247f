"""The broker: wires configuration, the log manager, coordination, the replica manager, the
group coordinator and the network server, and owns start-up and clean shutdown.

Everything runs on one asyncio event loop; the local tier's single-threaded contract is
kept by running its scheduled tasks on that loop (``AsyncioScheduler``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from typing import Any

from tierlog.broker.config import BrokerConfig
from tierlog.broker.coordination.api import BrokerRegistration, Coordinator
from tierlog.broker.coordination.local import LocalCoordinator
from tierlog.broker.group import GroupCoordinator
from tierlog.broker.handlers import HANDLERS
from tierlog.broker.meta_properties import check_or_write
from tierlog.broker.offsets_topic import OffsetsTopic
from tierlog.broker.partition import Partition
from tierlog.broker.replica_manager import ReplicaManager, TopicError
from tierlog.broker.server import KafkaServer
from tierlog.local.log_manager import LogManager, LogManagerTimings
from tierlog.protocol import Request
from tierlog.protocol.errors import ErrorCode
from tierlog.remote.fsspec_storage import FsspecRemoteStore
from tierlog.remote.remote_log_manager import RemoteLogManager
from tierlog.util.clock import Clock, SystemClock
from tierlog.util.scheduler import AsyncioScheduler

log = logging.getLogger(__name__)

# Producer ids are reserved from the coordinator in blocks, as Kafka does, so a restart
# never hands out an id twice and most InitProducerId calls touch no file.
PRODUCER_ID_BLOCK = 1000


class Broker:
    def __init__(self, config: BrokerConfig, *, clock: Clock | None = None) -> None:
        self.config = config
        self.clock = clock or SystemClock()
        self.stopping = False
        self._stop_waiters: set[asyncio.Future[None]] = set()
        self._stopped = asyncio.Event()
        self._producer_ids: Iterator[int] = iter(())
        self.coordinator: Coordinator
        self.log_manager: LogManager
        self.replicas: ReplicaManager
        self.server: KafkaServer
        self.groups: GroupCoordinator
        self.remote: RemoteLogManager | None = None
        self.offsets_topic: OffsetsTopic
        self.port = 0

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        config = self.config
        if not config.single_node:
            raise NotImplementedError(
                "zookeeper.connect is set, but cluster mode arrives with the cluster work; "
                "leave it empty for a single node"
            )
        loop = asyncio.get_running_loop()
        self.coordinator = LocalCoordinator(config.log_dirs[0])
        for log_dir in config.log_dirs:
            check_or_write(log_dir, config.broker_id, self.coordinator.cluster_id)
        topic_configs = {
            name: self._topic_config(topic.configs)
            for name, topic in self.coordinator.topics().items()
        }
        self.log_manager = LogManager(
            config.log_dirs,
            config.log_config,
            clock=self.clock,
            scheduler=AsyncioScheduler(loop),
            timings=LogManagerTimings(
                flush_check_interval_ms=config["log.flush.scheduler.interval.ms"],
                retention_check_interval_ms=config["log.retention.check.interval.ms"],
                checkpoint_interval_ms=config["log.flush.offset.checkpoint.interval.ms"],
            ),
        )
        self.log_manager.startup(topic_configs)
        listener = config.listeners[0]
        self.server = KafkaServer(
            self.dispatch, listener.host, listener.port, config["socket.request.max.bytes"]
        )
        self.port = await self.server.start()
        advertised = config.advertised[0]
        self.coordinator.start(
            BrokerRegistration(config.broker_id, advertised.host, advertised.port or self.port)
        )
        self.replicas = ReplicaManager(
            config.broker_id, self.log_manager, self.coordinator, config.log_config
        )
        self.replicas.remote_storage_system_enabled = config["remote.log.storage.system.enable"]
        self.replicas.sync()
        self._start_remote_tier()
        await self._start_groups()
        log.info(
            "broker %d listening on %s:%d (cluster %s)",
            config.broker_id,
            listener.host,
            self.port,
            self.coordinator.cluster_id,
        )

    async def _start_groups(self) -> None:
        """The group coordinator, with what ``__consumer_offsets`` already holds."""
        self.offsets_topic = OffsetsTopic(self)
        self.groups = self.offsets_topic.groups
        if self.offsets_topic.exists:
            self.offsets_topic.load_led_partitions()
        interval = self.config["offsets.retention.check.interval.ms"]
        self.log_manager.scheduler.schedule(  # type: ignore[union-attr]
            "offsets-expiry",
            lambda: asyncio.ensure_future(self.offsets_topic.expire_offsets()),
            interval,
            interval,
        )

    def _start_remote_tier(self) -> None:
        """The remote log manager, when remote.log.storage.system.enable (the default)."""
        config = self.config
        if not config["remote.log.storage.system.enable"]:
            return
        store = FsspecRemoteStore(
            config.remote_storage_url, config.remote_storage_options, clock=self.clock
        )
        self.remote = RemoteLogManager(
            store,
            config.log_dirs[0] / ".remote-cache",
            config["remote.log.reader.cache.bytes"],
            clock=self.clock,
            copy_bytes_per_second=config["remote.log.manager.copy.max.bytes.per.second"],
            fetch_timeout_ms=config["remote.fetch.max.wait.ms"],
        )
        interval = config["remote.log.manager.task.interval.ms"]
        self.log_manager.scheduler.schedule(  # type: ignore[union-attr]
            "remote-log-manager", lambda: asyncio.ensure_future(self.remote_cycle()), 0, interval
        )
        log.info("remote tier at %s", store.url_of(store.partition_path("x", 0)).rsplit("/", 1)[0])

    async def remote_cycle(self) -> None:
        """Track the tiered partitions this broker leads, then offload and retain."""
        remote = self.remote
        if remote is None or self.stopping:
            return
        wanted = set()
        for (topic, index), partition in self.replicas.partitions.items():
            if partition.log.config.remote_storage_enable and partition.is_leader:
                wanted.add((topic, index))
                remote.track(
                    topic,
                    index,
                    partition.topic_id,
                    partition.log,
                    partition_leader_epoch(partition),
                )
        for key in list(remote.partitions):
            if key not in wanted:
                tracked = remote.partitions[key]
                current = self.replicas.coordinator.topic(key[0])
                deleted = current is None or current.topic_id != tracked.topic_id
                remote.untrack(*key, topic_deleted=deleted)
        await remote.run_cycle()

    def group_coordinator_node(self, group_id: str) -> BrokerRegistration | None:
        return self.offsets_topic.coordinator_node(group_id)

    def _topic_config(self, overrides: dict[str, str]) -> Any:
        return self.config.log_config.with_overrides(overrides)

    async def stop(self) -> None:
        """Clean shutdown: stop accepting, finish in-flight work, flush and checkpoint."""
        if self.stopping:
            await self._stopped.wait()
            return
        self.stopping = True
        for future in list(self._stop_waiters):
            if not future.done():
                future.set_result(None)
        # Each step runs even if an earlier one fails (say the data dir was removed under
        # a running broker): a SIGTERM must always end the process.
        clean = True
        steps: list[tuple[str, Callable[[], Any]]] = [
            ("server", self.server.stop),
            ("groups", self.groups.close),
            ("remote tier", self.remote.close if self.remote is not None else _nothing),
            ("logs", self.log_manager.shutdown),
            ("coordination", self.coordinator.stop),
        ]
        for what, step in steps:
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

    def stop_waiter(self) -> asyncio.Future[None]:
        """A future resolved when the broker starts stopping (ends long polls early)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self.stopping:
            future.set_result(None)
        else:
            self._stop_waiters.add(future)
            future.add_done_callback(self._stop_waiters.discard)
        return future

    # -- requests ------------------------------------------------------------------------

    async def dispatch(self, request: Request) -> Any:
        handler = HANDLERS.get(request.api_key)
        if handler is None:
            raise _no_handler(request)
        return await handler(self, request)

    # -- services for handlers -----------------------------------------------------------

    def auto_create_topic(self, name: str) -> None:
        """Create ``name`` with the broker defaults, if auto.create.topics.enable."""
        if not self.config["auto.create.topics.enable"]:
            raise TopicError(ErrorCode.unknown_topic_or_partition, f"unknown topic {name!r}")
        self.replicas.create_topic(
            name, self.config["num.partitions"], self.config["default.replication.factor"], {}
        )

    def next_producer_id(self) -> int:
        producer_id: int | None = next(self._producer_ids, None)
        if producer_id is None:
            first = self.coordinator.allocate_producer_ids(PRODUCER_ID_BLOCK)
            self._producer_ids = iter(range(first, first + PRODUCER_ID_BLOCK))
            producer_id = next(self._producer_ids)
        return int(producer_id)


def _nothing() -> None:
    return None


def partition_leader_epoch(partition: Partition) -> Callable[[], int]:
    """The partition's current leader epoch, read when the remote manager writes."""
    return lambda: partition.leader_epoch


def _no_handler(request: Request) -> Exception:
    from tierlog.protocol.errors import UnsupportedVersionError

    return UnsupportedVersionError(request.api_key, request.api_version, request.correlation_id)
