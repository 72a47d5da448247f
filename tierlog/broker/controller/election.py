"""Leader election rules and the partition state table: pure functions, no I/O.

Owns every decision about who leads a partition and who is in its ISR when brokers come
and go (Kafka's ``Election`` / ``PartitionLeaderElectionAlgorithms`` and the ISR edits of
``ReplicaStateMachine.removeReplicasFromIsr``). The controller feeds it the replica
assignment, the stored state and the set of live brokers, and writes what it returns;
nothing here reads ZooKeeper or a clock, so every rule is unit-tested on its own.

Partition states, Kafka's ``PartitionStateMachine`` (a partition's state in the
controller's memory, derived from its state znode and the live brokers)::

                      create topic                     leader elected
    NonExistent ─────────────────────────▶ New ────────────────────────────▶ Online ◀─┐
         ▲                                  │                                │  │     │ new
         │ delete topic                     │ no live replica                │  └─────┘ leader
         │                                  ▼            leader dies,        ▼
         └────────────────────────────── Offline ◀───── nobody can lead ─────┘
                                            │  ▲
                                            └──┘ still nobody / new leader ─▶ Online

``VALID_PREVIOUS`` is the table the drawing shows: a transition from a state not listed
for its target is a bug (``IllegalTransitionError``), as Kafka's ``isValidTransition``.

Epochs: every change the controller makes here bumps the leader epoch by one (Kafka's
``LeaderAndIsr.newLeaderAndIsr``), including removing a follower from the ISR; only a
leader's own AlterPartition keeps it (KIP-497). The partition epoch is the state znode's
zkVersion and moves with every write, so it is not decided here.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

from tierlog.broker.coordination.zk_data import NO_LEADER, LeaderAndIsr


class PartitionLifecycle(enum.Enum):
    """Kafka's PartitionState objects, by the names Kafka logs."""

    NON_EXISTENT = "NonExistentPartition"
    NEW = "NewPartition"
    ONLINE = "OnlinePartition"
    OFFLINE = "OfflinePartition"


_L = PartitionLifecycle

# target -> the states it may be entered from (Kafka's validPreviousStates).
VALID_PREVIOUS: dict[PartitionLifecycle, frozenset[PartitionLifecycle]] = {
    _L.NEW: frozenset({_L.NON_EXISTENT}),
    _L.ONLINE: frozenset({_L.NEW, _L.ONLINE, _L.OFFLINE}),
    _L.OFFLINE: frozenset({_L.NEW, _L.ONLINE, _L.OFFLINE}),
    _L.NON_EXISTENT: frozenset({_L.OFFLINE}),
}


class IllegalTransitionError(ValueError):
    """A partition state change the table does not allow (a controller bug)."""


def check_transition(current: PartitionLifecycle, target: PartitionLifecycle) -> None:
    """Raises IllegalTransitionError unless ``current -> target`` is in the table."""
    if current not in VALID_PREVIOUS[target]:
        raise IllegalTransitionError(
            f"illegal partition state change {current.value} -> {target.value}"
        )


def lifecycle_of(state: LeaderAndIsr, live: Collection[int]) -> PartitionLifecycle:
    """Online while its leader is a live broker; Offline otherwise (no leader, or a leader
    whose death the state znode does not show yet)."""
    return _L.ONLINE if state.leader != NO_LEADER and state.leader in live else _L.OFFLINE


# -- decisions ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    """A new state for a partition and why, for the controller's one log line."""

    state: LeaderAndIsr
    reason: str
    unclean: bool = False


def new_partition_election(
    replicas: Sequence[int], live: Collection[int], controller_epoch: int
) -> LeaderAndIsr | None:
    """First state of a new partition: the first live replica leads, the live replicas (in
    assignment order) are the ISR, leader epoch 0 (Kafka's
    ``initializeLeaderAndIsrForPartitions``). None when no replica is live: the partition
    stays New until one registers."""
    live_replicas = tuple(r for r in replicas if r in live)
    if not live_replicas:
        return None
    return LeaderAndIsr(live_replicas[0], 0, live_replicas, controller_epoch)


def offline_partition_leader(
    replicas: Sequence[int],
    isr: Collection[int],
    live: Collection[int],
    unclean_allowed: bool,
) -> tuple[int | None, bool]:
    """Kafka's ``offlinePartitionLeaderElection``: the first replica in assignment order that
    is live and in the ISR; failing that, with unclean election allowed, the first live
    replica (it may lack committed records: data loss traded for availability).

    Returns:
        (leader or None, whether the choice was unclean).
    """
    for replica in replicas:
        if replica in live and replica in isr:
            return replica, False
    if unclean_allowed:
        for replica in replicas:
            if replica in live:
                return replica, True
    return None, False


def remove_replicas_from_isr(
    current: LeaderAndIsr, dead: Collection[int], controller_epoch: int
) -> LeaderAndIsr | None:
    """Take dead brokers out of the ISR; a dead leader leaves the partition leaderless
    (Kafka's ``ReplicaStateMachine.doRemoveReplicasFromIsr``, leader epoch + 1).

    The ISR is never emptied: Kafka keeps the last member when it goes, so that the replica
    known to hold every committed record can lead again when it returns (an offline
    partition's state reads ``leader -1, isr [that broker]``). When several members die at
    once this keeps the old leader if it was among them (its log holds everything the ISR
    acknowledged), else the first of them in ISR order.

    Returns:
        the new state, or None when nothing changes (no write, no epoch bump).
    """
    dead_members = [r for r in current.isr if r in dead]
    leader_dead = current.leader != NO_LEADER and current.leader in dead
    if not dead_members and not leader_dead:
        return None
    isr = tuple(r for r in current.isr if r not in dead)
    if not isr:
        keep = current.leader if current.leader in dead_members else dead_members[0]
        isr = (keep,)
    leader = NO_LEADER if leader_dead else current.leader
    if leader == current.leader and isr == current.isr:
        return None
    return _bump(current, leader, isr, controller_epoch)


def reconcile(
    replicas: Sequence[int],
    current: LeaderAndIsr,
    live: Collection[int],
    unclean_allowed: bool,
    controller_epoch: int,
) -> Decision | None:
    """What a partition's state should become given who is live now: the controller calls
    it for every partition a broker change may concern, and on fail-over for all of them.

    - leader not live: elect one (``offline_partition_leader``); a clean leader keeps the
      live part of the ISR, an unclean one starts a new ISR of itself (Kafka's
      ``Election.leaderForOffline``); if nobody can lead, the partition goes (or stays)
      leaderless with its dead members out of the ISR but never an empty ISR;
    - leader live: dead brokers leave the ISR.

    Idempotent: None when the state already fits ``live``.
    """
    dead = [r for r in (*replicas, *current.isr) if r not in live]
    if current.leader == NO_LEADER or current.leader not in live:
        leader, unclean = offline_partition_leader(replicas, current.isr, live, unclean_allowed)
        if leader is not None:
            isr = (leader,) if unclean else tuple(r for r in current.isr if r in live)
            was = "no leader" if current.leader == NO_LEADER else f"leader {current.leader} died"
            how = "unclean election of an out-of-sync replica" if unclean else "clean election"
            return Decision(_bump(current, leader, isr, controller_epoch), f"{was}: {how}", unclean)
        offline = remove_replicas_from_isr(current, dead, controller_epoch)
        if offline is None:
            return None
        return Decision(offline, "no live in-sync replica can lead: partition offline")
    shrunk = remove_replicas_from_isr(current, dead, controller_epoch)
    if shrunk is None:
        return None
    gone = sorted(set(current.isr) - set(shrunk.isr))
    return Decision(shrunk, f"in-sync replicas {gone} died: removed from the ISR")


def preferred_replica_election(
    replicas: Sequence[int], current: LeaderAndIsr, live: Collection[int], controller_epoch: int
) -> LeaderAndIsr | None:
    """Move leadership back to the preferred (first) replica if it is live and in the ISR
    (Kafka's ``preferredReplicaPartitionLeaderElection``); the ISR is unchanged. None when
    it already leads or cannot."""
    if not replicas:
        return None
    preferred = replicas[0]
    if current.leader == preferred or preferred not in live or preferred not in current.isr:
        return None
    return _bump(current, preferred, current.isr, controller_epoch)


def _bump(
    current: LeaderAndIsr, leader: int, isr: tuple[int, ...], controller_epoch: int
) -> LeaderAndIsr:
    return replace(
        current,
        leader=leader,
        leader_epoch=current.leader_epoch + 1,
        isr=isr,
        controller_epoch=controller_epoch,
    )
