"""What the request handlers use of transactions: one object built by the broker.

``Transactions`` ties the coordinator (``coordinator``), its topic (``state_topic``), the
marker writer and sender, and the produce-side KIP-890 check together, so handlers see one
narrow service, as they do for groups.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import kio.schema.add_partitions_to_txn.v4.request as apt

from tierlog.broker.txn.coordinator import TopicPartition, TransactionCoordinator, TxnConfig
from tierlog.broker.txn.log_codec import topic_partitions
from tierlog.broker.txn.markers import Marker, MarkerSender, write_markers
from tierlog.broker.txn.peers import PeerChannels, PeerUnavailableError
from tierlog.broker.txn.state_topic import TransactionStateTopic
from tierlog.broker.txn.verification import VerificationGuards
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.kio_build import build
from tierlog.security.client_config import ClientSecurity
from tierlog.util.clock import Clock

if TYPE_CHECKING:
    from tierlog.broker.config import BrokerConfig
    from tierlog.broker.coordination.api import Coordinator
    from tierlog.broker.group import GroupCoordinator
    from tierlog.broker.replication.replica_manager import ReplicaManager
    from tierlog.broker.txn.peers import AddressOf

log = logging.getLogger(__name__)
E = ErrorCode


class Transactions:
    """Args:
    config: the broker's configuration.
    cluster: the coordination metadata.
    replicas: the partitions hosted here.
    groups: the group coordinator (transactional offsets complete with markers).
    next_producer_id: InitProducerId's id source.
    address_of: where another broker listens.
    clock: wall time.
    peer_security: TLS and SASL of the inter-broker listener (None: PLAINTEXT).
    """

    def __init__(
        self,
        config: BrokerConfig,
        cluster: Coordinator,
        replicas: ReplicaManager,
        groups: GroupCoordinator | None,
        next_producer_id: Any,
        address_of: AddressOf,
        *,
        clock: Clock,
        peer_security: ClientSecurity | None = None,
    ) -> None:
        self.replicas = replicas
        self.groups = groups
        self.cluster = cluster
        # transaction.partition.verification.enable: false turns KIP-890 part 1 off (the
        # produce and TxnOffsetCommit checks), as in Kafka.
        self.verification_enabled: bool = config["transaction.partition.verification.enable"]
        self.guards = VerificationGuards()
        self.peers = PeerChannels(address_of, security=peer_security)
        self.sender = MarkerSender(
            replicas.broker_id, self._leader_of, self.write_markers, self.peers
        )
        self.coordinator = TransactionCoordinator(
            self._write_state,
            self.sender.send,
            next_producer_id,
            TxnConfig(
                num_partitions=config["transaction.state.log.num.partitions"],
                max_timeout_ms=config["transaction.max.timeout.ms"],
                id_expiration_ms=config["transactional.id.expiration.ms"],
            ),
            clock=clock,
        )
        self.state_topic = TransactionStateTopic(config, cluster, replicas, self.coordinator)

    async def _write_state(self, *args: Any) -> int:
        return await self.state_topic.write(*args)

    def _leader_of(self, topic: str, index: int) -> int | None:
        known = self.cluster.topic(topic)
        if known is None or index not in known.replicas:
            return None
        state = known.partition_states.get(index)
        return -1 if state is None else state.leader

    async def write_markers(self, markers: list[Marker]) -> dict[tuple[int, TopicPartition], int]:
        return await write_markers(self.replicas, self.groups, self.guards, markers)

    async def verify_produce(
        self, transactional_id: str, wanted: Mapping[TopicPartition, tuple[int, int]]
    ) -> dict[TopicPartition, tuple[int, object | None]]:
        """Check with the transaction's coordinator that each partition is in the
        producer's ongoing transaction; returns partition -> (error code, guard token).
        The caller appends only if the code is 0 and ``guards.holds`` the token."""
        tokens = {tp: self.guards.begin(tp[0], tp[1], pid) for tp, (pid, _) in wanted.items()}
        # A produce request carries one producer's batches: one id and epoch.
        producer_id, epoch = next(iter(wanted.values()))
        partitions = list(wanted)
        if self.coordinator.owns(transactional_id):
            codes = self.coordinator.verify(transactional_id, producer_id, epoch, partitions)
        else:
            codes = await self._verify_remotely(transactional_id, producer_id, epoch, partitions)
        results: dict[TopicPartition, tuple[int, object | None]] = {}
        for tp, token in tokens.items():
            code = codes.get(tp, E.invalid_txn_state)
            if code:
                self.guards.clear(tp[0], tp[1], producer_id)
            results[tp] = (code, token if code == 0 else None)
        return results

    async def _verify_remotely(
        self, transactional_id: str, producer_id: int, epoch: int, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, int]:
        node = await self.state_topic.coordinator_node(transactional_id)
        if node is None:
            return dict.fromkeys(partitions, int(E.not_enough_replicas))
        request = build(
            apt.AddPartitionsToTxnRequest,
            {
                "transactions": [
                    {
                        "transactional_id": transactional_id,
                        "producer_id": producer_id,
                        "producer_epoch": epoch,
                        "verify_only": True,
                        "topics": [
                            {"name": topic, "partitions": indexes}
                            for topic, indexes in topic_partitions(partitions).items()
                        ],
                    }
                ]
            },
        )
        try:
            answer: Any = await self.peers.request(node.broker_id, request)
        except PeerUnavailableError as exc:
            log.debug(
                "verifying %r with broker %d failed: %s", transactional_id, node.broker_id, exc
            )
            return dict.fromkeys(partitions, int(E.not_enough_replicas))
        if answer.error_code:
            return dict.fromkeys(partitions, int(answer.error_code))
        codes: dict[TopicPartition, int] = {}
        for result in answer.results_by_transaction:
            for topic in result.topic_results:
                for p in topic.results_by_partition:
                    codes[(topic.name, int(p.partition_index))] = int(p.partition_error_code)
        return codes

    async def close(self) -> None:
        await self.coordinator.close()
        await self.peers.close()
