"""Carries partition reassignments into ZooKeeper (Kafka's ZooKeeper-era
``KafkaController.onPartitionReassignment``, KIP-455).

Owns the steps of a reassignment: validating a request, writing RS = TRS ++ ORS with the
adding/removing replicas to the topic znode, noticing that every target replica has joined
the ISR, moving the leader and shrinking the ISR to TRS, and writing RS = TRS. The rules are
``reassignment``'s pure functions; partition states are written through the
``PartitionStateMachine`` (conditional on their zkVersion), topic znodes by a
read-modify-write conditional on the topic znode's zkVersion, so that a concurrent
CreatePartitions on another broker is never clobbered.

Where the state lives: the topic znode's ``adding_replicas``/``removing_replicas`` (what a
new controller resumes from, ``resume``) and, in memory, the context's copy of it. There is
no other bookkeeping: a partition is being reassigned exactly when its stored assignment
has adding or removing replicas.

When a reassignment completes: Kafka's ZooKeeper-mode controller put a watch on the state
znode of each reassigning partition (``PartitionReassignmentIsrChangeHandler``), because
before KIP-497 leaders wrote their ISR changes to ZooKeeper themselves. In tierlog every ISR
expansion is an AlterPartition that this controller accepts on its own thread, so the
controller re-checks a reassigning partition after each accepted AlterPartition for it
(``on_isr_change``), and after broker changes and fail-over; no extra watches, nothing
missed.

Brokers learn from the znodes: a broker hosts whatever the assignment names (so adding
replicas start following the leader at once) and drops, deleting its log, what it no
longer names. Kafka bumps the leader epoch when it writes RS (its brokers ignore a
LeaderAndIsr without a newer epoch); a tierlog broker applies a changed replica set at the
same epoch, so no bump is needed to start the new followers.

Not thread-safe: runs on the controller's event thread only.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from tierlog.broker.controller import reassignment as rs
from tierlog.broker.controller.context import ControllerContext, TopicPartition
from tierlog.broker.controller.election import Decision
from tierlog.broker.controller.reassignment import PartitionAssignment
from tierlog.broker.controller.state_machine import MAX_ATTEMPTS, PartitionStateMachine
from tierlog.broker.coordination.api import UnknownTopicError
from tierlog.broker.coordination.zk_data import LeaderAndIsr
from tierlog.broker.coordination.zk_errors import StaleTopicAssignmentError
from tierlog.broker.coordination.zk_topics import TopicAdmin

log = logging.getLogger(__name__)

# (error code, message): the answer to one partition of AlterPartitionReassignments.
Outcome = tuple[int, str]


class PartitionReassigner:
    """Reassignments for one controller term; see the module docstring."""

    def __init__(
        self, topics: TopicAdmin, ctx: ControllerContext, psm: PartitionStateMachine
    ) -> None:
        self._topics = topics
        self._ctx = ctx
        self._psm = psm

    # -- requests ---------------------------------------------------------------------------

    def alter(
        self,
        reassignments: Mapping[TopicPartition, Sequence[int] | None],
        *,
        allow_replication_factor_change: bool = True,
    ) -> dict[TopicPartition, Outcome]:
        """AlterPartitionReassignments: start (or replace, or with None cancel) each
        partition's reassignment; returns once each is stored, not once it is done
        (Kafka answers the same way)."""
        return {
            tp: self._alter_one(tp, target, allow_replication_factor_change)
            for tp, target in reassignments.items()
        }

    def _alter_one(
        self, tp: TopicPartition, target: Sequence[int] | None, allow_rf_change: bool
    ) -> Outcome:
        current = self.assignment(tp)
        if current is None or tp not in self._ctx.states:
            return rs.UNKNOWN_TOPIC_OR_PARTITION, "unknown partition"
        if target is None:
            if not current.is_reassigning:
                return rs.NO_REASSIGNMENT_IN_PROGRESS, f"{tp} is not being reassigned"
            new = current.revert()
            what = "cancelled"
        else:
            refused = rs.check_target(
                target,
                current,
                self._ctx.live_brokers,
                allow_replication_factor_change=allow_rf_change,
            )
            if refused is not None:
                return refused
            new = current.reassign_to(target)
            what = f"to {list(target)}"
        try:
            applied = self._apply(tp, current, new)
        except UnknownTopicError:
            return rs.UNKNOWN_TOPIC_OR_PARTITION, f"{tp.topic} was deleted"
        if not applied:
            return (
                rs.INVALID_REPLICA_ASSIGNMENT,
                f"{tp}: no live in-sync replica of {list(new.replicas)} could lead",
            )
        log.info(
            "%s: reassignment %s: replicas %s -> %s, adding %s, removing %s",
            tp,
            what,
            list(current.replicas),
            list(new.replicas),
            list(new.adding),
            list(new.removing),
        )
        self.maybe_complete(tp)
        return rs.NONE, ""

    def list(
        self, partitions: Sequence[TopicPartition] | None
    ) -> dict[TopicPartition, PartitionAssignment]:
        """ListPartitionReassignments: the reassignments in progress (of ``partitions``,
        or all), from the context."""
        ongoing = self._ctx.reassigning()
        wanted = ongoing if partitions is None else [tp for tp in partitions if tp in ongoing]
        found: dict[TopicPartition, PartitionAssignment] = {}
        for tp in wanted:
            assignment = self.assignment(tp)
            if assignment is not None:
                found[tp] = assignment
        return found

    # -- progress -----------------------------------------------------------------------------

    def resume(self) -> None:
        """Fail-over (Kafka's ``initializePartitionReassignments`` +
        ``maybeResumeReassignments``): whatever the stored assignments say is in progress
        goes on; those that finished meanwhile complete now."""
        ongoing = self._ctx.reassigning()
        if ongoing:
            log.info("resuming reassignments of %s", [str(tp) for tp in ongoing])
        for tp in ongoing:
            self.maybe_complete(tp)

    def on_isr_change(self, tp: TopicPartition) -> None:
        """After an accepted AlterPartition: a target replica may have caught up."""
        assignment = self.assignment(tp)
        if assignment is not None and assignment.is_reassigning:
            self.maybe_complete(tp)

    def check_all(self) -> None:
        """After broker changes: a leader may now be electable among the targets."""
        for tp in self._ctx.reassigning():
            self.maybe_complete(tp)

    def maybe_complete(self, tp: TopicPartition) -> bool:
        """Phase B of ``onPartitionReassignment`` once every TRS member is in the ISR: move
        the leader into TRS and shrink the ISR to it (one state write, epoch + 1), then
        write RS = TRS with nothing adding or removing. True if it completed."""
        assignment = self.assignment(tp)
        found = self._ctx.states.get(tp)
        if assignment is None or found is None or not assignment.is_reassigning:
            return False
        if not rs.is_complete(assignment, found[0].isr):
            missing = sorted(set(assignment.target) - set(found[0].isr))
            log.debug("%s: reassignment waits for %s to join the ISR", tp, missing)
            return False
        done = assignment.completed()
        try:
            applied = self._apply(tp, assignment, done)
        except UnknownTopicError:
            return False  # deleted meanwhile: nothing left to move
        if not applied:
            log.info("%s: reassignment complete but no target replica can lead yet", tp)
            return False
        log.info("%s: reassignment completed, replicas %s", tp, list(done.replicas))
        return True

    # -- writes -------------------------------------------------------------------------------

    def assignment(self, tp: TopicPartition) -> PartitionAssignment | None:
        topic = self._ctx.assignments.get(tp.topic)
        if topic is None or tp.partition not in topic.partitions:
            return None
        return rs.assignment_of(topic, tp.partition)

    def _apply(
        self, tp: TopicPartition, current: PartitionAssignment, new: PartitionAssignment
    ) -> bool:
        """Make ``new`` the stored assignment; replicas it drops first leave the ISR and
        the leadership. False (nothing written) when no remaining replica could lead."""
        dropped = set(current.replicas) - set(new.replicas)
        if dropped and not self._shed(tp, new.replicas, dropped):
            return False
        self._write_assignment(tp, new)
        return True

    def _shed(self, tp: TopicPartition, keep: tuple[int, ...], dropped: set[int]) -> bool:
        found = self._ctx.states.get(tp)
        if found is None:
            return False
        if rs.restrict_to(found[0], keep, self._ctx.live_brokers, self._ctx.epoch) is None:
            return False

        def decide(current: LeaderAndIsr, _version: int) -> Decision | None:
            state = rs.restrict_to(current, keep, self._ctx.live_brokers, self._ctx.epoch)
            if state is None or state == current:
                return None
            return Decision(state, f"replicas {sorted(dropped)} leave with the reassignment")

        self._psm.write(tp, decide, "reassignment")
        after = self._ctx.states.get(tp)
        return after is not None and not set(after[0].isr) & dropped and after[0].leader in keep

    def _write_assignment(self, tp: TopicPartition, new: PartitionAssignment) -> None:
        """Read-modify-write of the topic znode, conditional on its zkVersion."""
        for _ in range(MAX_ATTEMPTS):
            found = self._topics.get_with_version(tp.topic)
            if found is None:
                raise UnknownTopicError(tp.topic)
            stored, version = found
            updated = rs.with_partition(stored, tp.partition, new)
            try:
                self._topics.set_assignment(self._ctx.lease, tp.topic, updated, version)
            except StaleTopicAssignmentError:
                continue
            self._ctx.add_topic(tp.topic, updated)
            return
        raise StaleTopicAssignmentError(f"{tp.topic}: the assignment kept changing")
