"""What request handlers may use of the broker: a few narrow services, never the ``Broker``
itself (its start-up, shutdown, log manager, remote tier and server stay private to it).

The broker builds one ``BrokerServices`` once every component is ready, and only then starts
accepting connections, so no request ever sees a half-built broker.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tierlog.broker.authorization import RequestAuthorizer
from tierlog.broker.cleaner_state import CleanerStates
from tierlog.broker.config import BrokerConfig
from tierlog.broker.coordination.api import Coordinator, PartitionState, UserConfigs
from tierlog.broker.decode_pool import DecodePool
from tierlog.broker.replication.replica_manager import ReplicaManager
from tierlog.broker.replication.replication_quota import ReplicationQuotas

if TYPE_CHECKING:
    from tierlog.broker.client_metrics.manager import ClientMetricsManager
    from tierlog.broker.controller import Controller
    from tierlog.broker.dynamic_config import DynamicBrokerConfig
    from tierlog.broker.fetch_sessions import FetchSessionCache
    from tierlog.broker.group import GroupCoordinator
    from tierlog.broker.network.quotas import ClientQuotaManager
    from tierlog.broker.offsets_topic import OffsetsTopic
    from tierlog.broker.replication.log_dir_mover import LogDirMover
    from tierlog.broker.txn import Transactions
    from tierlog.security.api import Authorizer

# Producer ids are reserved from the coordinator in blocks, as Kafka does, so a restart
# never hands out an id twice and most InitProducerId calls touch no file.
PRODUCER_ID_BLOCK = 1000


class ProducerIds:
    """Hands out producer ids from blocks reserved in the coordination metadata (Kafka's
    ``/latest_producer_id_block``)."""

    def __init__(self, coordinator: Coordinator, block_size: int = PRODUCER_ID_BLOCK) -> None:
        self.coordinator = coordinator
        self.block_size = block_size
        self._ids: Iterator[int] = iter(())

    async def next_id(self) -> int:
        producer_id = next(self._ids, None)
        if producer_id is None:
            first = await self.coordinator.allocate_producer_ids(self.block_size)
            self._ids = iter(range(first, first + self.block_size))
            producer_id = next(self._ids)
        return int(producer_id)


class Lifecycle:
    """Whether the broker is stopping, and futures resolved when it starts to (they end
    long polls early, so a clean shutdown does not wait out every fetch's max wait)."""

    def __init__(self) -> None:
        self.stopping = False
        self._waiters: set[asyncio.Future[None]] = set()

    def begin_stop(self) -> None:
        self.stopping = True
        for future in list(self._waiters):
            if not future.done():
                future.set_result(None)

    def stop_waiter(self) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self.stopping:
            future.set_result(None)
        else:
            self._waiters.add(future)
            future.add_done_callback(self._waiters.discard)
        return future


@dataclass(frozen=True)
class BrokerServices:
    """Args:
    config: the broker's configuration as started (read-only; server.properties).
    dynamic_config: its dynamic layers (KIP-226) and the effective config; None in tests
        that build services by hand.
    cluster: the coordination metadata: brokers, controller, topics, partition states.
    replicas: the partitions hosted here, their records, and topic operations.
    groups: the group coordinator.
    offsets_topic: ``__consumer_offsets``: where a group's coordinator is.
    producer_ids: InitProducerId's id source.
    lifecycle: whether the broker is stopping.
    alter_partition: the controller's AlterPartition decision (topic, partition, leader,
        leader epoch, new ISR, partition epoch) -> the stored state, raising
        AlterPartitionError; None on a broker that is not the controller.
    controller: cluster mode's controller role of this broker, for the operator's
        controller APIs (ElectLeaders, partition reassignments); None on a single node.
    cleaner_state: the log cleaner's state of every compacted log here
        (``LogCleaner.describe``), None when the cleaner is off; read on the event loop.
    transactions: the transaction coordinator, its topic and the marker writer.
    authz: the authorization checks of Kafka's table for the request being handled
        (``tierlog.broker.authorization``); with no authorizer every check passes.
    user_configs: users' configs (SCRAM credentials), where this mode keeps them.
    quotas: client byte-rate quotas (produce and fetch throttling).
    fetch_sessions: incremental fetch sessions (KIP-227); None: none are opened.
    client_metrics: what clients push (KIP-714), exported on the metrics endpoint; None
        when that endpoint is off (the telemetry APIs are then not announced).
    log_dir_mover: moves replicas between this broker's log.dirs (AlterReplicaLogDirs).
    authorizer: the ACL authorizer once security is wired (issue 22); None: every
        operation is allowed, as in Kafka without ``authorizer.class.name``. Handlers ask
        it through ``handlers.authorized_ops`` (KIP-430 operation bit fields).
    decoder: where produced records are decoded when a produce needs it (off the loop).
    replication_quotas: the replication throttles (KIP-73); the leader's is applied to
        followers' fetches here. None: unthrottled (services built by hand).
    """

    config: BrokerConfig
    cluster: Coordinator
    replicas: ReplicaManager
    groups: GroupCoordinator
    offsets_topic: OffsetsTopic
    producer_ids: ProducerIds
    lifecycle: Lifecycle
    alter_partition: (
        Callable[[str, int, int, int, list[int], int], Awaitable[PartitionState]] | None
    )
    controller: Controller | None = None
    cleaner_state: Callable[[], CleanerStates | None] = lambda: None
    transactions: Transactions | None = None
    authz: RequestAuthorizer = field(default_factory=RequestAuthorizer)
    user_configs: UserConfigs | None = None
    quotas: ClientQuotaManager | None = None
    fetch_sessions: FetchSessionCache | None = None
    client_metrics: ClientMetricsManager | None = None
    log_dir_mover: LogDirMover | None = None
    authorizer: Authorizer | None = None
    decoder: DecodePool = field(default_factory=DecodePool)
    dynamic_config: DynamicBrokerConfig | None = None
    replication_quotas: ReplicationQuotas | None = None
