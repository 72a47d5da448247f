"""Leader election and ISR rules (controller/election.py): Kafka's examples as plain tests,
the invariants as hypothesis properties."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tierlog.broker.controller.election import (
    VALID_PREVIOUS,
    IllegalTransitionError,
    PartitionLifecycle,
    check_transition,
    lifecycle_of,
    new_partition_election,
    offline_partition_leader,
    preferred_replica_election,
    reconcile,
    remove_replicas_from_isr,
)
from tierlog.broker.coordination.zk_data import NO_LEADER, LeaderAndIsr

L = PartitionLifecycle
EPOCH = 7  # the controller epoch decisions are stamped with


def state(leader: int, epoch: int, isr: tuple[int, ...]) -> LeaderAndIsr:
    return LeaderAndIsr(leader, epoch, isr, controller_epoch=1)


# -- the state table ------------------------------------------------------------------------------


def test_transition_table_is_kafkas() -> None:
    allowed = {(a, b) for b, previous in VALID_PREVIOUS.items() for a in previous}
    assert allowed == {
        (L.NON_EXISTENT, L.NEW),
        (L.NEW, L.ONLINE),
        (L.NEW, L.OFFLINE),
        (L.ONLINE, L.ONLINE),
        (L.ONLINE, L.OFFLINE),
        (L.OFFLINE, L.ONLINE),
        (L.OFFLINE, L.OFFLINE),
        (L.OFFLINE, L.NON_EXISTENT),
    }
    for a, b in itertools.product(L, L):
        if (a, b) in allowed:
            check_transition(a, b)
        else:
            with pytest.raises(IllegalTransitionError):
                check_transition(a, b)


def test_lifecycle_follows_the_leaders_liveness() -> None:
    assert lifecycle_of(state(1, 0, (1, 2)), {1, 2}) is L.ONLINE
    assert lifecycle_of(state(1, 0, (1, 2)), {2}) is L.OFFLINE
    assert lifecycle_of(state(NO_LEADER, 3, (1,)), {1, 2}) is L.OFFLINE


# -- examples -------------------------------------------------------------------------------------


def test_new_partition() -> None:
    assert new_partition_election([3, 1, 2], {1, 2}, EPOCH) == LeaderAndIsr(1, 0, (1, 2), EPOCH)
    assert new_partition_election([3, 1, 2], {1, 2, 3}, EPOCH) == LeaderAndIsr(
        3, 0, (3, 1, 2), EPOCH
    )
    assert new_partition_election([3], {1}, EPOCH) is None


def test_leader_failure_elects_the_first_live_isr_member_in_assignment_order() -> None:
    current = state(1, 4, (3, 2, 1))  # ISR order is not assignment order
    decision = reconcile([1, 2, 3], current, {2, 3}, False, EPOCH)
    assert decision is not None and not decision.unclean
    assert decision.state == LeaderAndIsr(2, 5, (3, 2), EPOCH)


def test_follower_failure_removes_it_from_the_isr_with_an_epoch_bump() -> None:
    decision = reconcile([1, 2, 3], state(1, 4, (1, 2, 3)), {1, 3}, False, EPOCH)
    assert decision is not None
    assert decision.state == LeaderAndIsr(1, 5, (1, 3), EPOCH)
    assert reconcile([1, 2, 3], decision.state, {1, 3}, False, EPOCH) is None


def test_last_isr_member_dying_leaves_it_in_the_isr_without_leader() -> None:
    # Kafka's doRemoveReplicasFromIsr keeps a single-member ISR as it is.
    decision = reconcile([1, 2], state(1, 4, (1,)), {2}, False, EPOCH)
    assert decision is not None
    assert decision.state == LeaderAndIsr(NO_LEADER, 5, (1,), EPOCH)
    # Nothing more to do while nobody in the ISR is live...
    assert reconcile([1, 2], decision.state, {2}, False, EPOCH) is None
    # ...the ISR member returning leads again...
    back = reconcile([1, 2], decision.state, {1, 2}, False, EPOCH)
    assert back is not None and back.state == LeaderAndIsr(1, 6, (1,), EPOCH)
    # ...or, with unclean election, the out-of-sync replica leads with an ISR of itself.
    unclean = reconcile([1, 2], decision.state, {2}, True, EPOCH)
    assert unclean is not None and unclean.unclean
    assert unclean.state == LeaderAndIsr(2, 6, (2,), EPOCH)


def test_several_isr_members_dying_at_once_keep_the_old_leader() -> None:
    decision = reconcile([1, 2, 3], state(2, 0, (1, 2)), {3}, False, EPOCH)
    assert decision is not None
    assert decision.state == LeaderAndIsr(NO_LEADER, 1, (2,), EPOCH)


def test_offline_partition_leader() -> None:
    assert offline_partition_leader([1, 2, 3], {3, 2}, {1, 2, 3}, False) == (2, False)
    assert offline_partition_leader([1, 2, 3], {3}, {1, 2}, False) == (None, False)
    assert offline_partition_leader([1, 2, 3], {3}, {2, 1}, True) == (1, True)
    assert offline_partition_leader([1, 2, 3], {3}, set(), True) == (None, False)


def test_preferred_replica_election() -> None:
    assert preferred_replica_election([1, 2], state(2, 3, (2, 1)), {1, 2}, EPOCH) == (
        LeaderAndIsr(1, 4, (2, 1), EPOCH)
    )
    assert preferred_replica_election([1, 2], state(1, 3, (1, 2)), {1, 2}, EPOCH) is None
    assert preferred_replica_election([1, 2], state(2, 3, (2,)), {1, 2}, EPOCH) is None
    assert preferred_replica_election([1, 2], state(2, 3, (2, 1)), {2}, EPOCH) is None


def test_remove_replicas_from_isr_changes_nothing_for_live_brokers() -> None:
    assert remove_replicas_from_isr(state(1, 0, (1, 2)), {3}, EPOCH) is None


# -- properties -----------------------------------------------------------------------------------

BROKERS = range(1, 7)


@st.composite
def partitions(draw: st.DrawFn) -> tuple[list[int], LeaderAndIsr, set[int]]:
    """(assignment, a consistent stored state, live brokers)."""
    replicas = draw(st.lists(st.sampled_from(BROKERS), min_size=1, max_size=4, unique=True))
    isr = draw(st.permutations(replicas).map(lambda r: r[: draw(st.integers(1, len(r)))]))
    leader = draw(st.sampled_from([NO_LEADER, *isr]))
    live = draw(st.sets(st.sampled_from(BROKERS)))
    return replicas, state(leader, draw(st.integers(0, 100)), tuple(isr)), live


@given(partitions(), st.booleans())
def test_reconcile_invariants(p: tuple[list[int], LeaderAndIsr, set[int]], unclean: bool) -> None:
    replicas, current, live = p
    decision = reconcile(replicas, current, live, unclean, EPOCH)
    if decision is None:
        # Nothing to do means the state already fits the live brokers.
        assert current.leader == NO_LEADER or current.leader in live
        assert all(r in live for r in current.isr) or current.leader == NO_LEADER
        return
    new = decision.state
    assert new.leader_epoch == current.leader_epoch + 1
    assert new.controller_epoch == EPOCH
    assert new.isr, "the ISR is never emptied"
    assert len(set(new.isr)) == len(new.isr)
    if new.leader == NO_LEADER:
        # Offline: no live replica could lead; the ISR keeps only dead brokers' last one.
        assert not any(r in live and (unclean or r in current.isr) for r in replicas)
        assert set(new.isr) <= set(current.isr)
    else:
        assert new.leader in live and new.leader in replicas and new.leader in new.isr
        assert all(r in live for r in new.isr)
        if decision.unclean:
            assert unclean and not any(r in live for r in current.isr)
            assert new.isr == (new.leader,)
        else:
            assert new.leader in current.isr
            assert set(new.isr) <= set(current.isr)
            if current.leader in live:
                assert new.leader == current.leader  # a live leader is never moved
            else:  # the first live ISR member in assignment order
                assert new.leader == next(r for r in replicas if r in live and r in current.isr)
    # Deciding again on the result with the same brokers changes nothing.
    assert reconcile(replicas, new, live, unclean, EPOCH) is None


@given(partitions())
def test_new_partition_invariants(p: tuple[list[int], LeaderAndIsr, set[int]]) -> None:
    replicas, _, live = p
    new = new_partition_election(replicas, live, EPOCH)
    live_replicas = [r for r in replicas if r in live]
    if not live_replicas:
        assert new is None
        return
    assert new == LeaderAndIsr(live_replicas[0], 0, tuple(live_replicas), EPOCH)


@given(partitions(), st.sets(st.sampled_from(BROKERS)))
def test_removing_replicas_never_empties_the_isr(
    p: tuple[list[int], LeaderAndIsr, set[int]], dead: set[int]
) -> None:
    _, current, _ = p
    new = remove_replicas_from_isr(current, dead, EPOCH)
    leader = NO_LEADER if current.leader in dead else current.leader
    survivors = [r for r in current.isr if r not in dead]
    # A sole dead member stays (Kafka keeps a single-member ISR as it is).
    isr_unchanged = survivors == list(current.isr) or (not survivors and len(current.isr) == 1)
    if new is None:
        assert leader == current.leader and isr_unchanged
        return
    assert new.isr and new.leader_epoch == current.leader_epoch + 1
    assert new.leader == leader
    assert list(new.isr) == survivors or (not survivors and len(new.isr) == 1)
    assert set(new.isr) <= set(current.isr)


@given(partitions())
def test_preferred_election_invariants(p: tuple[list[int], LeaderAndIsr, set[int]]) -> None:
    replicas, current, live = p
    new = preferred_replica_election(replicas, current, live, EPOCH)
    preferred = replicas[0]
    eligible = preferred in live and preferred in current.isr and current.leader != preferred
    assert (new is not None) == eligible
    if new is not None:
        assert (new.leader, new.isr, new.leader_epoch) == (
            preferred,
            current.isr,
            current.leader_epoch + 1,
        )
