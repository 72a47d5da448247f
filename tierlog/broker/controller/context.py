"""The active controller's view of the cluster (Kafka's ``ControllerContext``).

Owns the in-memory copy of what the controller decides from: live brokers and their epochs,
each topic's assignment and config overrides, each partition's stored state with its
zkVersion, and each partition's lifecycle state (``election.PartitionLifecycle``). It is
built from ZooKeeper when a broker becomes controller and dropped when it resigns.

Not thread-safe: only the controller's event thread reads or writes it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import NamedTuple

from tierlog.broker.controller.election import (
    PartitionLifecycle,
    check_transition,
    lifecycle_of,
)
from tierlog.broker.coordination.zk_controller import ControllerLease
from tierlog.broker.coordination.zk_data import LeaderAndIsr, TopicAssignment

# Kafka's topic-level config and its broker-level default (false since 0.11, KIP-106).
UNCLEAN_LEADER_ELECTION_ENABLE = "unclean.leader.election.enable"


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class ControllerContext:
    """What one controller term knows; see the module docstring."""

    def __init__(self, lease: ControllerLease) -> None:
        self.lease = lease
        self.live_brokers: dict[int, int] = {}  # broker id -> broker epoch (KIP-380)
        self.assignments: dict[str, TopicAssignment] = {}
        self.topic_configs: dict[str, dict[str, str]] = {}
        self.states: dict[TopicPartition, tuple[LeaderAndIsr, int]] = {}  # with zkVersion
        self.lifecycle: dict[TopicPartition, PartitionLifecycle] = {}

    @property
    def epoch(self) -> int:
        return self.lease.epoch

    # -- topics ----------------------------------------------------------------------------

    def add_topic(self, topic: str, assignment: TopicAssignment) -> list[TopicPartition]:
        """Record a topic's (possibly grown) assignment; returns its partitions that are new
        to the context, now in state New."""
        self.assignments[topic] = assignment
        added = []
        for partition in sorted(assignment.partitions):
            tp = TopicPartition(topic, partition)
            if tp not in self.lifecycle:
                self._transition(tp, PartitionLifecycle.NEW)
                added.append(tp)
        return added

    def remove_topic(self, topic: str) -> None:
        """Forget a deleted topic; its partitions go Offline -> NonExistent (Kafka's
        TopicDeletionManager moves them through both before deleting)."""
        for tp in [tp for tp in self.lifecycle if tp.topic == topic]:
            self._transition(tp, PartitionLifecycle.OFFLINE)
            self._transition(tp, PartitionLifecycle.NON_EXISTENT)
            del self.lifecycle[tp]
            self.states.pop(tp, None)
        self.assignments.pop(topic, None)
        self.topic_configs.pop(topic, None)

    def replicas(self, tp: TopicPartition) -> list[int]:
        assignment = self.assignments.get(tp.topic)
        return [] if assignment is None else list(assignment.partitions.get(tp.partition, []))

    def reassigning(self) -> list[TopicPartition]:
        """Partitions with a reassignment in progress: adding or removing replicas stored
        in their topic's assignment (KIP-455), which is where a new controller finds them."""
        found = []
        for topic, assignment in self.assignments.items():
            for p in {*assignment.adding_replicas, *assignment.removing_replicas}:
                tp = TopicPartition(topic, p)
                if tp in self.lifecycle:
                    found.append(tp)
        return sorted(found)

    def unclean_allowed(self, topic: str, default: bool) -> bool:
        """The topic's ``unclean.leader.election.enable`` override, else the broker's."""
        value = self.topic_configs.get(topic, {}).get(UNCLEAN_LEADER_ELECTION_ENABLE)
        return default if value is None else value.strip().lower() == "true"

    # -- partitions ------------------------------------------------------------------------

    def partitions(self) -> Iterator[TopicPartition]:
        return iter(sorted(self.lifecycle))

    def partitions_without_state(self) -> list[TopicPartition]:
        return [tp for tp in self.partitions() if tp not in self.states]

    def set_state(self, tp: TopicPartition, state: LeaderAndIsr, zk_version: int) -> None:
        """Record a stored state and move the partition to Online or Offline by it."""
        self.states[tp] = (state, zk_version)
        self._transition(tp, lifecycle_of(state, self.live_brokers))

    def refresh_lifecycles(self) -> None:
        """Re-derive Online/Offline after the live broker set changed."""
        for tp, (state, _) in self.states.items():
            self._transition(tp, lifecycle_of(state, self.live_brokers))

    def offline_partitions(self) -> list[TopicPartition]:
        return [tp for tp in self.partitions() if self.lifecycle[tp] is PartitionLifecycle.OFFLINE]

    def _transition(self, tp: TopicPartition, target: PartitionLifecycle) -> None:
        check_transition(self.lifecycle.get(tp, PartitionLifecycle.NON_EXISTENT), target)
        self.lifecycle[tp] = target

    def set_live_brokers(self, brokers: Mapping[int, int]) -> None:
        self.live_brokers = dict(brokers)
        self.refresh_lifecycles()
