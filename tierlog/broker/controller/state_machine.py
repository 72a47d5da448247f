"""Carries the controller's partition decisions into ZooKeeper (Kafka's
``ZkPartitionStateMachine`` with the ISR edits of ``ZkReplicaStateMachine``).

Owns the write side of partition states: creating the first state of new partitions,
rewriting states when brokers come and go, applying AlterPartition and preferred-leader
elections. The decisions themselves are ``election`` and ``alter_partition``'s pure
functions; this module feeds them the context, writes their result conditionally on the
state znode's zkVersion through ``zk_partition_states`` (each write a fenced multi), and on
``StalePartitionStateError`` re-reads the state and decides again (the state changed
under us, so the old decision may be wrong).

Bulk transitions (a broker's failure or return, fail-over, preferred and unclean elections,
the auto-rebalance) decide every partition first and then write all decisions at once
(``PartitionStates.update_many``: pipelined multis of a few hundred conditional
writes, each fenced): a broker leading 700 of 2,000 partitions took 25-33 s to fail over
when each write waited for its own round trip, one partition at a time. New leaders go
first, ISR shrinks after (Kafka's onBrokerFailure elects offline partitions before it
removes the dead replicas from other ISRs), so the writes clients wait for are not queued
behind the others. A partition whose write lost a race is re-read and re-decided on its
own; the others of its batch are written regardless.

``ControllerMovedError`` is never caught here: it means this controller was deposed, and
the controller resigns on it before doing anything else.

Not thread-safe: runs on the controller's event thread only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace

from tierlog.broker.controller import alter_partition as ap
from tierlog.broker.controller.alter_partition import AlterPartitionResult
from tierlog.broker.controller.context import ControllerContext, TopicPartition
from tierlog.broker.controller.election import (
    Decision,
    new_partition_election,
    offline_partition_leader,
    preferred_replica_election,
    reconcile,
)
from tierlog.broker.controller.stats import ControllerStats
from tierlog.broker.coordination.api import UnknownTopicError
from tierlog.broker.coordination.zk_data import NO_LEADER, LeaderAndIsr
from tierlog.broker.coordination.zk_errors import StalePartitionStateError, StaleZnodeError
from tierlog.broker.coordination.zk_partition_states import PartitionStates
from tierlog.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

# A conditional write lost to a concurrent one is re-decided this often; only a writer
# other than this controller (which the fencing says cannot exist for long) loses more.
MAX_ATTEMPTS = 10

ELECTION_NOT_NEEDED = int(ErrorCode.election_not_needed)
PREFERRED_LEADER_NOT_AVAILABLE = int(ErrorCode.preferred_leader_not_available)
ELIGIBLE_LEADERS_NOT_AVAILABLE = int(ErrorCode.eligible_leaders_not_available)

# What a partition's state should become given the current one and its zkVersion.
Decide = Callable[[LeaderAndIsr, int], Decision | None]


def describe(tp: TopicPartition, old: LeaderAndIsr | None, new: LeaderAndIsr) -> str:
    """``orders-0: leader 1 -> 2, epoch 3 -> 4, isr [1, 2] -> [2]``, for the log."""
    if old is None:
        return f"{tp}: leader {new.leader}, epoch {new.leader_epoch}, isr {list(new.isr)}"
    return (
        f"{tp}: leader {old.leader} -> {new.leader}, epoch {old.leader_epoch} ->"
        f" {new.leader_epoch}, isr {list(old.isr)} -> {list(new.isr)}"
    )


class PartitionStateMachine:
    """Writes partition states for one controller term; see the module docstring."""

    def __init__(
        self,
        states: PartitionStates,
        ctx: ControllerContext,
        unclean_default: bool,
        stats: ControllerStats | None = None,
    ) -> None:
        self._states = states
        self._ctx = ctx
        self._unclean_default = unclean_default
        self._stats = stats or ControllerStats()

    def set_unclean_default(self, enabled: bool) -> None:
        """The broker's ``unclean.leader.election.enable`` (a topic's override wins)."""
        self._unclean_default = enabled

    # -- reads ------------------------------------------------------------------------------

    def refresh(self, tp: TopicPartition) -> bool:
        """Re-read one state into the context; False if it has none any more."""
        found = self._states.get(tp.topic, tp.partition)
        if found is None:
            self._ctx.states.pop(tp, None)
            return False
        self._ctx.set_state(tp, *found)
        return True

    def refresh_many(self, partitions: Iterable[TopicPartition]) -> None:
        """``refresh`` for many partitions, in one pipelined read."""
        tps = list(partitions)
        found = self._states.get_many([(tp.topic, tp.partition) for tp in tps])
        for tp in tps:
            state = found.get((tp.topic, tp.partition))
            if state is None:
                self._ctx.states.pop(tp, None)
            else:
                self._ctx.set_state(tp, *state)

    # -- new partitions ---------------------------------------------------------------------

    def initialize(self, partitions: Iterable[TopicPartition]) -> None:
        """Create the first state of partitions that have none (Kafka's NewPartition ->
        OnlinePartition), one multi per topic. A partition none of whose replicas is live
        stays New until one registers. A state that exists already (an earlier controller
        made it) is read instead."""
        by_topic: dict[str, list[TopicPartition]] = {}
        for tp in partitions:
            if tp not in self._ctx.states:
                by_topic.setdefault(tp.topic, []).append(tp)
        for topic, tps in by_topic.items():
            self._initialize_topic(topic, tps)

    def _initialize_topic(self, topic: str, tps: list[TopicPartition]) -> None:
        for _ in range(MAX_ATTEMPTS):
            states: dict[int, LeaderAndIsr] = {}
            for tp in tps:
                state = new_partition_election(
                    self._ctx.replicas(tp), self._ctx.live_brokers, self._ctx.epoch
                )
                if state is None:
                    log.warning(
                        "%s: stays %s, none of its replicas %s is live",
                        tp,
                        self._ctx.lifecycle[tp].value,
                        self._ctx.replicas(tp),
                    )
                else:
                    states[tp.partition] = state
            if not states:
                return
            try:
                versions = self._states.create(self._ctx.lease, topic, states)
            except StalePartitionStateError:
                # Some state exists already: take what is stored, create only the rest.
                for tp in tps:
                    self.refresh(tp)
                tps = [tp for tp in tps if tp not in self._ctx.states]
                continue
            except UnknownTopicError:
                log.info("%s: deleted before its partitions got states", topic)
                return
            for partition, state in sorted(states.items()):
                tp = TopicPartition(topic, partition)
                self._ctx.set_state(tp, state, versions[partition])
                log.info("%s (new partition: first live replica leads)", describe(tp, None, state))
            return
        log.error("%s: could not create partition states, they kept changing", topic)

    # -- broker changes ---------------------------------------------------------------------

    def reconcile(self, partitions: Iterable[TopicPartition], why: str) -> None:
        """Bring each partition's leader and ISR in line with the live brokers
        (``election.reconcile``): elect leaders where the leader is gone, take dead brokers
        out of ISRs, elect leaders for offline partitions a returning broker can lead. All
        decided first, then written in batches (new leaders first)."""
        deciders: dict[TopicPartition, Decide] = {}
        for tp in partitions:
            if tp not in self._ctx.states:
                continue
            unclean = self._ctx.unclean_allowed(tp.topic, self._unclean_default)

            def decide(
                current: LeaderAndIsr, _version: int, tp: TopicPartition = tp, u: bool = unclean
            ) -> Decision | None:
                return reconcile(
                    self._ctx.replicas(tp), current, self._ctx.live_brokers, u, self._ctx.epoch
                )

            deciders[tp] = decide
        self._write_many(deciders, why)

    def write(self, tp: TopicPartition, decide: Decide, why: str) -> bool:
        """Write what ``decide`` makes of the current state (re-deciding after a lost race);
        True if a new state was written. For the controller's other steps (reassignment)."""
        return tp in self._write_many({tp: decide}, why)

    def _write_many(
        self, deciders: Mapping[TopicPartition, Decide], why: str
    ) -> set[TopicPartition]:
        """Decide every partition on its current state, then write the decisions that
        change something, conditionally on the zkVersion each was decided on: the new
        leaders first, then the rest. A partition whose state changed meanwhile is re-read
        and re-decided (up to MAX_ATTEMPTS times); a deleted one is dropped. Returns the
        partitions written."""
        written: set[TopicPartition] = set()
        todo = dict(deciders)
        for _ in range(MAX_ATTEMPTS):
            decided: dict[TopicPartition, tuple[LeaderAndIsr, int, Decision]] = {}
            for tp, decide in todo.items():
                found = self._ctx.states.get(tp)
                if found is None:
                    continue
                decision = decide(*found)
                if decision is not None:
                    decided[tp] = (found[0], found[1], decision)
            elections = {tp: d for tp, d in decided.items() if d[2].state.leader != d[0].leader}
            rest = {tp: d for tp, d in decided.items() if tp not in elections}
            stale: list[TopicPartition] = []
            for group in (elections, rest):
                if group:
                    stale += self._write_group(group, why, written)
            if not stale:
                return written
            self.refresh_many(stale)
            todo = {tp: deciders[tp] for tp in stale}
        log.error("%s: gave up, their states kept changing", ", ".join(map(str, sorted(todo))))
        return written

    def _write_group(
        self,
        group: Mapping[TopicPartition, tuple[LeaderAndIsr, int, Decision]],
        why: str,
        written: set[TopicPartition],
    ) -> list[TopicPartition]:
        """Write decisions in one pipelined batch; returns the partitions that lost a race."""
        updates = {
            (tp.topic, tp.partition): (decision.state, version)
            for tp, (_, version, decision) in group.items()
        }
        results = self._states.update_many(self._ctx.lease, updates)
        stale: list[TopicPartition] = []
        for tp, (current, version, decision) in group.items():
            result = results[(tp.topic, tp.partition)]
            if isinstance(result, StaleZnodeError):
                log.info("%s: state changed since read (zkVersion %d), deciding again", tp, version)
                stale.append(tp)
            elif isinstance(result, UnknownTopicError):
                self._ctx.states.pop(tp, None)
            else:
                self._ctx.set_state(tp, decision.state, result)
                written.add(tp)
                self._log_written(tp, current, decision, why)
        return stale

    def _log_written(
        self, tp: TopicPartition, current: LeaderAndIsr, decision: Decision, why: str
    ) -> None:
        if decision.unclean:
            # Counted once written: a lost race re-decides, and may decide cleanly.
            self._stats.unclean_leader_elections += 1
            log.warning(
                "%s (%s; %s): UNCLEAN leader election, %d was not in the ISR %s:"
                " records acknowledged before may be lost",
                describe(tp, current, decision.state),
                why,
                decision.reason,
                decision.state.leader,
                list(current.isr),
            )
        else:
            log.info("%s (%s; %s)", describe(tp, current, decision.state), why, decision.reason)

    # -- AlterPartition ---------------------------------------------------------------------

    def alter_partition(
        self,
        tp: TopicPartition,
        leader_id: int,
        leader_epoch: int,
        new_isr: list[int],
        partition_epoch: int,
        broker_epoch: int | None,
    ) -> AlterPartitionResult:
        """Check a leader's ISR change and write it if valid (``alter_partition``)."""
        if tp.topic not in self._ctx.assignments:
            return AlterPartitionResult.refused(ap.UNKNOWN_TOPIC_OR_PARTITION, "unknown topic")
        refreshed = False
        for _ in range(MAX_ATTEMPTS):
            found = self._ctx.states.get(tp)
            current, version = found if found is not None else (None, -1)
            verdict = ap.check_alter_partition(
                current,
                version,
                self._ctx.replicas(tp),
                self._ctx.live_brokers,
                leader_id=leader_id,
                leader_epoch=leader_epoch,
                new_isr=new_isr,
                partition_epoch=partition_epoch,
                controller_epoch=self._ctx.epoch,
                broker_epoch=broker_epoch,
            )
            if isinstance(verdict, AlterPartitionResult):
                if verdict.error == ap.NOT_CONTROLLER and not refreshed:
                    # Newer epochs than ours: our copy may be behind (a write whose answer
                    # was lost). Look once before telling the leader to go elsewhere.
                    refreshed = True
                    if self.refresh(tp):
                        continue
                if not verdict.ok:
                    log.info(
                        "%s: refused AlterPartition from %d (error %d: %s)",
                        tp,
                        leader_id,
                        verdict.error,
                        verdict.message,
                    )
                return verdict
            assert current is not None
            try:
                new_version = self._states.update(
                    self._ctx.lease, tp.topic, tp.partition, verdict, version
                )
            except StalePartitionStateError:
                if not self.refresh(tp):
                    break
                continue
            except UnknownTopicError:
                break
            self._ctx.set_state(tp, verdict, new_version)
            log.info(
                "%s (AlterPartition from leader %d; partition epoch %d -> %d)",
                describe(tp, current, verdict),
                leader_id,
                version,
                new_version,
            )
            return AlterPartitionResult.accepted(verdict, new_version)
        self._ctx.states.pop(tp, None)
        return AlterPartitionResult.refused(ap.UNKNOWN_TOPIC_OR_PARTITION, "partition is gone")

    # -- preferred leaders ------------------------------------------------------------------

    def elect_preferred(
        self, partitions: Iterable[TopicPartition] | None
    ) -> dict[TopicPartition, int]:
        """Preferred-replica election (ElectLeaders with PREFERRED); an error code per
        partition: NONE, ELECTION_NOT_NEEDED (84), PREFERRED_LEADER_NOT_AVAILABLE (80) or
        UNKNOWN_TOPIC_OR_PARTITION (3). With ``partitions`` None every partition is tried
        and those that need nothing are left out of the answer (as Kafka does)."""
        everything = partitions is None
        results: dict[TopicPartition, int] = {}
        deciders: dict[TopicPartition, Decide] = {}
        for tp in self._ctx.partitions() if partitions is None else partitions:
            found = self._ctx.states.get(tp)
            replicas = self._ctx.replicas(tp)
            if found is None or not replicas:
                results[tp] = ap.UNKNOWN_TOPIC_OR_PARTITION
                continue
            if found[0].leader == replicas[0]:
                if not everything:
                    results[tp] = ELECTION_NOT_NEEDED
                continue

            def decide(
                current: LeaderAndIsr, _version: int, replicas: list[int] = replicas
            ) -> Decision | None:
                state = preferred_replica_election(
                    replicas, current, self._ctx.live_brokers, self._ctx.epoch
                )
                return None if state is None else Decision(state, "preferred replica election")

            deciders[tp] = decide
        written = self._write_many(deciders, "ElectLeaders")
        for tp in deciders:
            results[tp] = ap.NONE if tp in written else PREFERRED_LEADER_NOT_AVAILABLE
        return results

    # -- unclean leaders ---------------------------------------------------------------------

    def elect_unclean(
        self, partitions: Iterable[TopicPartition] | None
    ) -> dict[TopicPartition, int]:
        """ElectLeaders with UNCLEAN (KIP-460): a partition without a live leader gets the
        first live in-sync replica or, failing that, the first live replica whatever the
        topic's ``unclean.leader.election.enable`` says (the operator asked). An error code
        per partition: NONE, ELECTION_NOT_NEEDED (84: its leader is live),
        ELIGIBLE_LEADERS_NOT_AVAILABLE (83: no replica is live) or
        UNKNOWN_TOPIC_OR_PARTITION. With ``partitions`` None only the partitions that
        needed an election are answered."""
        everything = partitions is None
        results: dict[TopicPartition, int] = {}
        deciders: dict[TopicPartition, Decide] = {}
        for tp in self._ctx.partitions() if partitions is None else partitions:
            found = self._ctx.states.get(tp)
            replicas = self._ctx.replicas(tp)
            if found is None or not replicas:
                results[tp] = ap.UNKNOWN_TOPIC_OR_PARTITION
                continue
            leader = found[0].leader
            if leader != NO_LEADER and leader in self._ctx.live_brokers:
                if not everything:
                    results[tp] = ELECTION_NOT_NEEDED
                continue

            def decide(
                current: LeaderAndIsr, _version: int, replicas: list[int] = replicas
            ) -> Decision | None:
                live = self._ctx.live_brokers
                if current.leader != NO_LEADER and current.leader in live:
                    return None
                chosen, unclean = offline_partition_leader(replicas, current.isr, live, True)
                if chosen is None:
                    return None
                isr = (chosen,) if unclean else tuple(r for r in current.isr if r in live)
                state = replace(
                    current,
                    leader=chosen,
                    leader_epoch=current.leader_epoch + 1,
                    isr=isr,
                    controller_epoch=self._ctx.epoch,
                )
                how = "unclean election of an out-of-sync replica" if unclean else "clean"
                return Decision(state, f"ElectLeaders UNCLEAN: {how}", unclean)

            deciders[tp] = decide
        written = self._write_many(deciders, "ElectLeaders")
        for tp in deciders:
            results[tp] = ap.NONE if tp in written else ELIGIBLE_LEADERS_NOT_AVAILABLE
        return results
