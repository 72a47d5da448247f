"""AlterPartition (API 56, KIP-497) checks: pure, no I/O.

Owns the rules by which the controller accepts or refuses a leader's ISR change, and the
answer it gives. The controller passes in its view of the partition (state, zkVersion,
assignment, live brokers) and writes the state this returns; on a lost zkVersion race it
re-reads and asks again.

Order and codes follow Kafka's controller. ZooKeeper mode (``KafkaController.
processAlterPartition``, 3.x) and KRaft (``ReplicationControlManager.
validateAlterPartitionData``) agree on them except where noted:

1. the sender's broker epoch, when given, is not the live one -> STALE_BROKER_EPOCH (77)
   (KIP-380: a request from an older incarnation of the broker);
2. no such partition (or no state yet) -> UNKNOWN_TOPIC_OR_PARTITION (3);
3. leader epoch or partition epoch NEWER than the controller's -> NOT_CONTROLLER (41):
   only a newer controller can have written them, so this one is stale and the leader
   should find the new one;
4. leader epoch older -> FENCED_LEADER_EPOCH (74);
5. the sender is not the leader -> INVALID_REQUEST (42) (KRaft; one leader epoch has one
   leader, so this is a confused caller, not a race);
6. the same leader, leader epoch and ISR as stored -> success with the stored state, even
   with an older partition epoch (ZooKeeper mode's ``equalsAllowStalePartitionEpoch``: a
   retry whose first answer was lost must not fail);
7. partition epoch older -> INVALID_UPDATE_VERSION (95);
8. ISR with duplicates, replicas outside the assignment, or without the leader ->
   INVALID_REQUEST (42) (KRaft's ``Replicas.validateIsr`` and leader check);
9. ISR naming a broker that is not live -> INELIGIBLE_REPLICA (107) (AlterPartition v2+;
   Kafka answers OPERATION_NOT_ATTEMPTED to v0-1, which tierlog's kio 4.x peers never send).

An accepted change keeps the leader and the leader epoch (KIP-497: only the partition
epoch, the zkVersion, moves).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from tierlog.broker.coordination.zk_data import NO_LEADER, LeaderAndIsr
from tierlog.protocol.errors import ErrorCode

NONE = int(ErrorCode.none)
UNKNOWN_SERVER_ERROR = int(ErrorCode.unknown_server_error)
UNKNOWN_TOPIC_OR_PARTITION = int(ErrorCode.unknown_topic_or_partition)
REQUEST_TIMED_OUT = int(ErrorCode.request_timed_out)
NOT_CONTROLLER = int(ErrorCode.not_controller)
INVALID_REQUEST = int(ErrorCode.invalid_request)
FENCED_LEADER_EPOCH = int(ErrorCode.fenced_leader_epoch)
STALE_BROKER_EPOCH = int(ErrorCode.stale_broker_epoch)
INVALID_UPDATE_VERSION = int(ErrorCode.invalid_update_version)
INELIGIBLE_REPLICA = int(ErrorCode.ineligible_replica)


@dataclass(frozen=True)
class AlterPartitionResult:
    """The answer for one partition: ``error`` is a Kafka error code (0 = accepted); on
    success the state now stored (``partition_epoch`` = the state znode's new zkVersion,
    ``controller_epoch`` the epoch of the controller that wrote it), else -1 / () and
    ``message`` says why."""

    error: int
    leader: int = NO_LEADER
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    partition_epoch: int = -1
    controller_epoch: int = -1
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.error == NONE

    @classmethod
    def accepted(cls, state: LeaderAndIsr, zk_version: int) -> AlterPartitionResult:
        return cls(
            NONE, state.leader, state.leader_epoch, state.isr, zk_version, state.controller_epoch
        )

    @classmethod
    def refused(cls, error: int, message: str) -> AlterPartitionResult:
        return cls(error, message=message)


def check_alter_partition(
    current: LeaderAndIsr | None,
    zk_version: int,
    replicas: Sequence[int],
    live_brokers: Mapping[int, int],
    *,
    leader_id: int,
    leader_epoch: int,
    new_isr: Sequence[int],
    partition_epoch: int,
    controller_epoch: int,
    broker_epoch: int | None = None,
) -> AlterPartitionResult | LeaderAndIsr:
    """Check a leader's ISR change against the controller's view (module docstring).

    Args:
        current: the stored state, None if the partition is unknown or has none yet.
        zk_version: its zkVersion (the partition epoch).
        replicas: the partition's assignment.
        live_brokers: broker id -> broker epoch of every registered broker.
        broker_epoch: the sender's broker epoch, if the request carried one.

    Returns:
        the state to write (the request is valid and changes something), or the answer to
        give without writing (a refusal, or success for an idempotent retry).
    """
    if broker_epoch is not None and live_brokers.get(leader_id) != broker_epoch:
        return AlterPartitionResult.refused(
            STALE_BROKER_EPOCH,
            f"broker {leader_id} epoch {broker_epoch} is not the live one"
            f" ({live_brokers.get(leader_id)})",
        )
    if current is None:
        return AlterPartitionResult.refused(UNKNOWN_TOPIC_OR_PARTITION, "unknown partition")
    if leader_epoch > current.leader_epoch or partition_epoch > zk_version:
        return AlterPartitionResult.refused(
            NOT_CONTROLLER,
            f"epochs {leader_epoch}/{partition_epoch} are newer than this controller's"
            f" {current.leader_epoch}/{zk_version}",
        )
    if leader_epoch < current.leader_epoch:
        return AlterPartitionResult.refused(
            FENCED_LEADER_EPOCH,
            f"leader epoch {leader_epoch} is older than {current.leader_epoch}",
        )
    if leader_id != current.leader:
        return AlterPartitionResult.refused(
            INVALID_REQUEST, f"broker {leader_id} is not the leader ({current.leader})"
        )
    isr = tuple(new_isr)
    if isr == current.isr:
        return AlterPartitionResult.accepted(current, zk_version)
    if partition_epoch < zk_version:
        return AlterPartitionResult.refused(
            INVALID_UPDATE_VERSION,
            f"partition epoch {partition_epoch} is older than {zk_version}",
        )
    if len(set(isr)) != len(isr) or not set(isr) <= set(replicas):
        return AlterPartitionResult.refused(
            INVALID_REQUEST, f"ISR {list(isr)} is not a set of the replicas {list(replicas)}"
        )
    if current.leader not in isr:
        return AlterPartitionResult.refused(
            INVALID_REQUEST, f"ISR {list(isr)} does not contain the leader {current.leader}"
        )
    ineligible = [r for r in isr if r not in live_brokers]
    if ineligible:
        return AlterPartitionResult.refused(
            INELIGIBLE_REPLICA, f"ISR {list(isr)} names brokers that are not live: {ineligible}"
        )
    return replace(current, isr=isr, controller_epoch=controller_epoch)
