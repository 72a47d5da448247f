"""Partition reassignment rules (KIP-455): pure functions, no I/O.

Owns what a partition's replica assignment and state become while it moves between brokers,
as Kafka's ZooKeeper-era controller does it (``ReplicaAssignment`` and
``KafkaController.onPartitionReassignment``); ``reassigner`` writes the results.

Names, as Kafka's: ORS the original replicas, TRS the target replicas, RS the replicas
assigned meanwhile, AR the adding replicas (TRS - ORS), RR the removing ones (ORS - TRS)::

    start          RS = TRS ++ ORS (distinct), AR, RR      stored in /brokers/topics/<t>
       │                                                  (adding_replicas/removing_replicas)
       ▼           brokers in AR host the partition and follow the leader
    catching up ── until every TRS member is in the ISR (AlterPartition from the leader)
       │
       ▼           leader moved into TRS if it is not there (epoch + 1), ISR shrunk to TRS
    complete       RS = TRS, AR = RR = []; brokers in RR drop the partition and its log

A new target for a partition already moving is taken relative to the same ORS (Kafka's
``reassignTo``); cancelling (a null target) moves it back to ORS (``revertReassignment``).
Replicas the new RS no longer names leave the ISR, and the leadership, before the
assignment that drops them is written: in tierlog a broker drops a partition as soon as the
assignment stops naming it, so the order matters more than in Kafka, where StopReplica came
after the LeaderAndIsr that moved the leader.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from tierlog.broker.coordination.zk_data import NO_LEADER, LeaderAndIsr, TopicAssignment
from tierlog.protocol.errors import ErrorCode

# A partition's key: (topic, partition), e.g. the controller's TopicPartition.
K = TypeVar("K", bound=tuple[str, int])

NONE = int(ErrorCode.none)
INVALID_REPLICA_ASSIGNMENT = int(ErrorCode.invalid_replica_assignment)
INVALID_REPLICATION_FACTOR = int(ErrorCode.invalid_replication_factor)
NO_REASSIGNMENT_IN_PROGRESS = int(ErrorCode.no_reassignment_in_progress)
UNKNOWN_TOPIC_OR_PARTITION = int(ErrorCode.unknown_topic_or_partition)


def _distinct(replicas: Sequence[int]) -> tuple[int, ...]:
    return tuple(dict.fromkeys(replicas))


@dataclass(frozen=True)
class PartitionAssignment:
    """One partition's replicas, with the adding/removing sets of a reassignment in
    progress (Kafka's ``ReplicaAssignment``)."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def is_reassigning(self) -> bool:
        return bool(self.adding or self.removing)

    @property
    def origin(self) -> tuple[int, ...]:
        """ORS: what the partition had before the reassignment (RS - AR)."""
        return tuple(r for r in self.replicas if r not in self.adding)

    @property
    def target(self) -> tuple[int, ...]:
        """TRS: what it will have after (RS - RR)."""
        return tuple(r for r in self.replicas if r not in self.removing)

    def reassign_to(self, target: Sequence[int]) -> PartitionAssignment:
        """Kafka's ``ReplicaAssignment.reassignTo``: RS = TRS ++ ORS, relative to the ORS
        of a reassignment already in progress."""
        origin = self.origin
        full = _distinct([*target, *origin])
        return PartitionAssignment(
            full,
            tuple(r for r in full if r not in origin),
            tuple(r for r in full if r not in target),
        )

    def revert(self) -> PartitionAssignment:
        """Cancellation: back to ORS, nothing adding or removing."""
        return PartitionAssignment(self.origin)

    def completed(self) -> PartitionAssignment:
        return PartitionAssignment(self.target)


def assignment_of(topic: TopicAssignment, partition: int) -> PartitionAssignment:
    return PartitionAssignment(
        tuple(topic.partitions.get(partition, ())),
        tuple(topic.adding_replicas.get(partition, ())),
        tuple(topic.removing_replicas.get(partition, ())),
    )


def with_partition(
    topic: TopicAssignment, partition: int, assignment: PartitionAssignment
) -> TopicAssignment:
    """The topic's assignment with one partition's replaced (others untouched)."""

    def put(m: Mapping[int, list[int]], value: tuple[int, ...]) -> dict[int, list[int]]:
        out = {p: list(r) for p, r in m.items() if p != partition}
        if value:
            out[partition] = list(value)
        return out

    return replace(
        topic,
        partitions={
            **{p: list(r) for p, r in topic.partitions.items()},
            partition: list(assignment.replicas),
        },
        adding_replicas=put(topic.adding_replicas, assignment.adding),
        removing_replicas=put(topic.removing_replicas, assignment.removing),
    )


def check_target(
    target: Sequence[int],
    current: PartitionAssignment,
    registered: Collection[int],
    *,
    allow_replication_factor_change: bool = True,
) -> tuple[int, str] | None:
    """Kafka's ``KafkaController.validateReplicas`` (and KIP-860's RF check): None when the
    target is acceptable, else (error code, message)."""
    if not target:
        return INVALID_REPLICA_ASSIGNMENT, "the target replica list is empty"
    if len(set(target)) != len(target):
        return INVALID_REPLICA_ASSIGNMENT, f"duplicate replicas in {list(target)}"
    if any(r < 0 for r in target):
        return INVALID_REPLICA_ASSIGNMENT, f"negative broker ids in {list(target)}"
    unknown = sorted(set(target) - set(registered))
    if unknown:
        return INVALID_REPLICA_ASSIGNMENT, f"brokers {unknown} are not registered"
    if not allow_replication_factor_change and len(target) != len(current.target):
        return (
            INVALID_REPLICATION_FACTOR,
            f"the replication factor would change from {len(current.target)} to {len(target)}",
        )
    return None


def is_complete(assignment: PartitionAssignment, isr: Collection[int]) -> bool:
    """Kafka's ``isReassignmentComplete``: every target replica is in the ISR."""
    return set(assignment.target) <= set(isr)


def restrict_to(
    current: LeaderAndIsr,
    keep: Sequence[int],
    live: Collection[int],
    controller_epoch: int,
) -> LeaderAndIsr | None:
    """The state once the replicas outside ``keep`` are gone: they leave the ISR and, if
    one leads, the first of ``keep`` that is live and in the ISR leads instead (Kafka's
    ``reassignPartitionLeaderElection`` + ``moveReassignedPartitionLeaderIfRequired``),
    leader epoch + 1.

    Returns:
        ``current`` itself when it already fits (no write needed), the new state, or None
        when no replica of ``keep`` could lead (then nothing may be removed yet).
    """
    isr = tuple(r for r in current.isr if r in keep)
    leader = current.leader
    if leader == NO_LEADER or leader not in keep or leader not in live:
        leader = next((r for r in keep if r in live and r in isr), NO_LEADER)
        if leader == NO_LEADER:
            return None
    if leader == current.leader and isr == current.isr:
        return current
    return replace(
        current,
        leader=leader,
        leader_epoch=current.leader_epoch + 1,
        isr=isr,
        controller_epoch=controller_epoch,
    )


def leader_imbalance(
    assignments: Mapping[K, Sequence[int]], leaders: Mapping[K, int]
) -> dict[int, tuple[float, list[K]]]:
    """Kafka's ``checkAndTriggerAutoLeaderRebalance``, the measuring half: for each
    preferred broker (the first replica), the share of its partitions it does not lead and
    those partitions. Partitions without a known state are not counted as imbalanced."""
    by_preferred: dict[int, list[K]] = {}
    for tp, replicas in assignments.items():
        if replicas:
            by_preferred.setdefault(replicas[0], []).append(tp)
    out: dict[int, tuple[float, list[K]]] = {}
    for broker, tps in sorted(by_preferred.items()):
        elsewhere = [tp for tp in sorted(tps) if tp in leaders and leaders[tp] != broker]
        out[broker] = (len(elsewhere) / len(tps), elsewhere)
    return out


def rebalance_candidates(
    assignments: Mapping[K, Sequence[int]], leaders: Mapping[K, int], percentage: int
) -> list[K]:
    """The partitions to give back to their preferred leader: those of every broker whose
    imbalance ratio is above ``leader.imbalance.per.broker.percentage`` / 100 (strictly, as
    Kafka compares). The caller skips those whose preferred replica cannot lead."""
    chosen: list[K] = []
    for ratio, tps in leader_imbalance(assignments, leaders).values():
        if ratio > percentage / 100:
            chosen += tps
    return sorted(chosen)
