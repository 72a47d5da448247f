"""A broker's part in a cluster (``zookeeper.connect`` set): its ZooKeeper view, the
controller it may become, the fetchers of the partitions it follows, the AlterPartition
channel to the controller, and the controlled shutdown (docs/cluster.md).

The ``Broker`` builds one of these instead of the single node's ``LocalCoordinator``;
everything here runs on the broker's event loop except the controller (its own thread) and
ZooKeeper calls (the coordinator's worker thread).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kio.index import load_request_schema

from tierlog.broker.config import BrokerConfig
from tierlog.broker.coordination.api import AlterPartitionError, PartitionState
from tierlog.broker.coordination.local import new_cluster_id
from tierlog.broker.coordination.zk_auth import (
    JAAS_KEY,
    SET_ACL_KEY,
    ZkIdentity,
    parse_identity,
)
from tierlog.broker.coordination.zk_tls import KEYS as ZK_TLS_KEYS
from tierlog.broker.coordination.zk_tls import ZkTls, zk_tls
from tierlog.broker.coordination.zookeeper import ZkCoordinator
from tierlog.broker.replication.replica_manager import ReplicaManager
from tierlog.client.async_connection import AsyncConnection
from tierlog.protocol import ApiKey
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.kio_build import build
from tierlog.security.client_config import ClientSecurity
from tierlog.util.configdef import ConfigError

log = logging.getLogger(__name__)

ALTER_PARTITION_VERSION = 2
# Kafka's controlled shutdown gives up after controlled.shutdown.max.retries (3) tries of
# up to request.timeout.ms each; one bound of the same order here.
CONTROLLED_SHUTDOWN_TIMEOUT_S = 30.0


def zookeeper_identity(config: BrokerConfig) -> ZkIdentity | None:
    """The broker's ZooKeeper identity (``zookeeper.jaas.config``), if it has one.

    Raises:
        ConfigError: ``zookeeper.set.acl`` without an identity (the brokers could not
            write their own znodes back), or a bad ``zookeeper.jaas.config``.
    """
    text = config[JAAS_KEY]
    if not text:
        if config[SET_ACL_KEY]:
            raise ConfigError(
                SET_ACL_KEY,
                f"znodes writable only by the brokers need their identity: set {JAAS_KEY}",
            )
        return None
    return parse_identity(text)


def zookeeper_tls(config: BrokerConfig) -> ZkTls | None:
    """The broker's TLS to ZooKeeper (``zookeeper.ssl.*``), if enabled.

    Raises:
        SecurityConfigError: naming the key at fault (``zk_tls``).
    """
    return zk_tls({key: config[key] for key in ZK_TLS_KEYS})


class ClusterMembership:
    """Args:
    config: the broker's configuration (zookeeper.*, replica.*, unclean election).
    peer_security: TLS and SASL of the inter-broker listener, for requests to the
        controller (None: PLAINTEXT).
    inter_broker_listener: the listener brokers reach each other on ("": the registration's
        top-level host and port, which Kafka's JSON gives the PLAINTEXT endpoint).
    """

    def __init__(
        self,
        config: BrokerConfig,
        peer_security: ClientSecurity | None = None,
        inter_broker_listener: str = "",
    ) -> None:
        from tierlog.broker.controller import Controller

        self.config = config
        self.broker_id = config.broker_id
        self.coordinator = ZkCoordinator(
            config["zookeeper.connect"],
            config.broker_id,
            session_timeout_ms=config["zookeeper.session.timeout.ms"],
            identity=zookeeper_identity(config),
            secure_acls=config[SET_ACL_KEY],
            tls=zookeeper_tls(config),
        )
        self.coordinator.alter_partition_sender = self.send_alter_partition
        self.controller = Controller(
            self.coordinator.zk,
            config.broker_id,
            unclean_leader_election=config["unclean.leader.election.enable"],
            auto_leader_rebalance=config["auto.leader.rebalance.enable"],
            leader_imbalance_per_broker_percentage=config["leader.imbalance.per.broker.percentage"],
            leader_imbalance_check_interval_s=float(
                config["leader.imbalance.check.interval.seconds"]
            ),
        )
        self._controller_connection: tuple[int, AsyncConnection] | None = None
        self._peer_security = peer_security
        self._inter_broker_listener = inter_broker_listener

    async def connect(self) -> str:
        """The ZooKeeper session and the cluster id."""
        return await self.coordinator.connect(new_cluster_id())

    def start_controller(self) -> None:
        """Join the controller election (after registration: a controller counts only
        registered brokers as live)."""
        self.controller.start()

    # -- AlterPartition ------------------------------------------------------------------

    async def decide_alter_partition(
        self,
        topic: str,
        partition: int,
        leader_id: int,
        leader_epoch: int,
        isr: list[int],
        partition_epoch: int,
    ) -> PartitionState:
        """This broker as controller: the decision (the controller's thread takes it)."""
        loop = asyncio.get_running_loop()
        result = await loop.run_in_executor(
            None,
            lambda: self.controller.alter_partition(
                topic, partition, leader_id, leader_epoch, isr, partition_epoch
            ),
        )
        if not result.ok:
            raise AlterPartitionError(result.error, f"{topic}-{partition}: {result.message}")
        return PartitionState(
            result.leader,
            result.leader_epoch,
            list(result.isr),
            controller_epoch=self.controller.controller_epoch,
            partition_epoch=result.partition_epoch,
        )

    async def send_alter_partition(
        self,
        controller_id: int,
        topic: str,
        partition: int,
        leader_id: int,
        leader_epoch: int,
        isr: list[int],
        partition_epoch: int,
    ) -> PartitionState:
        """A leader's ISR change, sent to the controller (or decided here when this broker
        is the controller)."""
        if controller_id == self.broker_id and self.controller.is_active:
            return await self.decide_alter_partition(
                topic, partition, leader_id, leader_epoch, isr, partition_epoch
            )
        metadata = self.coordinator.topic(topic)
        controller = self.coordinator.snapshot.brokers.get(controller_id)
        if metadata is None or controller is None:
            raise AlterPartitionError(ErrorCode.not_controller, "no live controller known")
        # The controller's inter-broker endpoint: its top-level host/port is Kafka's
        # PLAINTEXT one, which need not be the inter-broker listener.
        address = controller.address_on(self._inter_broker_listener)
        if address is None:
            raise AlterPartitionError(
                ErrorCode.not_controller,
                f"the controller has no {self._inter_broker_listener} listener",
            )
        connection = await self._connection_to(controller_id, *address)
        request = build(
            load_request_schema(ApiKey.ALTER_PARTITION, ALTER_PARTITION_VERSION),
            {
                "broker_id": self.broker_id,
                "broker_epoch": self.coordinator.broker_epoch,
                "topics": [
                    {
                        "topic_id": metadata.topic_id,
                        "partitions": [
                            {
                                "partition_index": partition,
                                "leader_epoch": leader_epoch,
                                "new_isr": isr,
                                "leader_recovery_state": 0,
                                "partition_epoch": partition_epoch,
                            }
                        ],
                    }
                ],
            },
        )
        try:
            response: Any = await connection.request(request)
        except (OSError, ConnectionError, TimeoutError) as exc:
            await self._drop_connection()
            raise AlterPartitionError(ErrorCode.not_controller, str(exc)) from None
        if response.error_code:
            raise AlterPartitionError(int(response.error_code), "refused by the controller")
        answer = response.topics[0].partitions[0]
        if answer.error_code:
            raise AlterPartitionError(int(answer.error_code), f"{topic}-{partition}")
        return PartitionState(
            int(answer.leader_id),
            int(answer.leader_epoch),
            [int(b) for b in answer.isr],
            partition_epoch=int(answer.partition_epoch),
        )

    async def _connection_to(self, broker_id: int, host: str, port: int) -> AsyncConnection:
        if self._controller_connection is not None:
            known_id, connection = self._controller_connection
            if known_id == broker_id and not connection.closed:
                return connection
            await self._drop_connection()
        connection = await AsyncConnection.open(
            host, port, client_id=f"broker-{self.broker_id}", security=self._peer_security
        )
        self._controller_connection = (broker_id, connection)
        return connection

    async def _drop_connection(self) -> None:
        if self._controller_connection is not None:
            _, connection = self._controller_connection
            self._controller_connection = None
            await connection.close()

    # -- shutdown ------------------------------------------------------------------------

    async def controlled_shutdown(self, replicas: ReplicaManager) -> None:
        """Move this broker's leaderships away before it stops: deregister (the controller
        elects other leaders from the ISR, as for a lost broker), then wait, bounded, until
        the metadata shows none left here (docs/cluster.md).

        Only leaderships that can move are waited for: one with another live ISR member.
        A partition whose ISR holds no other live broker has nobody to go to (unclean
        election aside, which is the controller's call); Kafka's controller leaves it
        where it is and answers it as remaining, and the broker stops after its retries.
        Here the controller takes such a partition offline on deregistration anyway."""
        me = self.broker_id

        def leads_nothing(snapshot: Any) -> bool:
            live = snapshot.brokers
            return all(
                state.leader != me
                or len(topic.replicas.get(p, [])) <= 1
                or not any(r != me and r in live for r in state.isr)
                for topic in snapshot.topics.values()
                for p, state in topic.partition_states.items()
            )

        try:
            await self.coordinator.deregister()
            await self.coordinator.wait_for(
                leads_nothing, "leaderships to move away", CONTROLLED_SHUTDOWN_TIMEOUT_S
            )
            log.info("controlled shutdown: this broker leads no replicated partition now")
        except Exception as exc:
            log.warning("controlled shutdown incomplete (%s); stopping anyway", exc)

    async def stop(self) -> None:
        await self._drop_connection()
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self.controller.stop)
        await self.coordinator.stop()
