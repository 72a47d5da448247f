"""Tests for the protocol's timers (tierlog.broker.group.consumer.timers and their handling):
session timeouts fence silent members, rebalance timeouts fence members that do not revoke
in time, and a timer for an epoch the member has left does nothing."""

from __future__ import annotations

from tierlog.broker.group.consumer.timers import (
    CancelTimer,
    Deadlines,
    ScheduleTimer,
    TimerKey,
    TimerKind,
    rebalance_timer,
    session_timer,
)

from .helpers import GROUP, Harness, owned_of


def test_a_member_silent_for_its_session_timeout_is_fenced() -> None:
    harness = Harness({"foo": 4})
    harness.join("a")
    harness.join("b")
    harness.settle(["a", "b"])
    epoch = harness.group.group_epoch
    for _ in range(9):  # a heartbeats every 5 s; b says nothing
        harness.clock.advance(5_000)
        harness.beat("a")
    assert "b" in harness.group.members  # 45 s not over yet
    fired = harness.advance(1_000)
    assert [o.response for o in fired] == [None]
    assert "b" not in harness.group.members
    assert harness.group.group_epoch == epoch + 1
    harness.settle(["a"])
    assert harness.group.members["a"].assigned == {harness.topic_id("foo"): frozenset(range(4))}


def test_a_member_that_does_not_revoke_in_time_is_fenced() -> None:
    harness = Harness({"foo": 4})
    harness.join("a", rebalance_timeout_ms=10_000)
    harness.join("b")
    told = harness.beat("a").response  # a must now give two partitions up
    assert told is not None and told.member_epoch == 1
    key = TimerKey(TimerKind.REBALANCE, GROUP, "a")
    assert harness.deadlines.deadline(key) == harness.clock.milliseconds() + 10_000
    for _ in range(2):  # a keeps heartbeating but keeps reporting all four partitions
        harness.clock.advance(4_000)
        harness.heartbeat(
            member_id="a",
            member_epoch=1,
            topic_partitions=((harness.topic_id("foo"), (0, 1, 2, 3)),),
        )
    harness.advance(2_000)
    assert "a" not in harness.group.members
    harness.settle(["b"])
    assert harness.group.members["b"].assigned == {harness.topic_id("foo"): frozenset(range(4))}


def test_a_member_that_revokes_in_time_keeps_its_place() -> None:
    harness = Harness({"foo": 4})
    harness.join("a", rebalance_timeout_ms=10_000)
    harness.join("b")
    told = harness.beat("a").response
    assert told is not None
    harness.clock.advance(3_000)
    harness.heartbeat(member_id="a", member_epoch=1, topic_partitions=owned_of(told.assignment))
    assert TimerKey(TimerKind.REBALANCE, GROUP, "a") not in harness.deadlines
    assert harness.advance(10_001) == []  # past the rebalance timeout, within the sessions
    assert "a" in harness.group.members


def test_a_rebalance_timer_for_an_epoch_already_left_does_nothing() -> None:
    harness = Harness({"foo": 4})
    harness.join("a")
    stale = rebalance_timer(GROUP, "a", epoch=0, timeout_ms=1)
    outcome = harness.protocol.timer_fired(stale)
    assert outcome.records == () and outcome.response is None
    assert "a" in harness.group.members


def test_timers_for_unknown_groups_and_members_do_nothing() -> None:
    harness = Harness()
    assert harness.protocol.timer_fired(session_timer("nope", "a", 1)).records == ()
    harness.join("a")
    assert harness.protocol.timer_fired(session_timer(GROUP, "zz", 1)).records == ()
    assert harness.protocol.timer_fired(rebalance_timer(GROUP, "zz", 1, 1)).records == ()


def test_deadlines_fire_in_order_and_rearming_replaces() -> None:
    deadlines = Deadlines()
    a = session_timer(GROUP, "a", 100)
    b = session_timer(GROUP, "b", 50)
    deadlines.apply([a, b], now_ms=0)
    deadlines.apply([session_timer(GROUP, "a", 100)], now_ms=80)  # a heartbeat re-arms a
    assert deadlines.next_deadline() == 50
    assert deadlines.due(60) == [b]
    assert deadlines.due(179) == []
    assert deadlines.due(180) == [ScheduleTimer(a.key, 100)]
    deadlines.apply([a, CancelTimer(a.key)], now_ms=0)
    assert len(deadlines) == 0
    assert a.key.name == "session-timeout-a"
