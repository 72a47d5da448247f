"""KIP-848's consumer protocol wired into the group coordinator (``consumer_groups.py``):
records written before answers, replayed on failover, timers on the event loop, offsets
with member epochs, and the administration APIs."""

from __future__ import annotations

import asyncio

from tests.broker.group.consumer_helpers import (
    GROUP,
    Topics,
    beat,
    consumer_coordinator,
    join,
    settle,
)
from tests.broker.group.helpers import FakeLog, make_coordinator, run
from tierlog.broker.group.consumer.record_codec import decode_record
from tierlog.broker.group.consumer.records import GroupEpochKey
from tierlog.broker.group.consumer.timers import CancelTimer, session_timer
from tierlog.protocol.errors import ErrorCode

E = ErrorCode


def consumer_records(log: FakeLog, partition: int) -> list[object]:
    out = []
    for rec in log.records(partition):
        assert rec.key is not None
        record = decode_record(rec.key, rec.value)
        if record is not None:
            out.append(record)
    return out


def test_members_join_get_partitions_and_rebalance_revoking_first() -> None:
    async def go() -> None:
        log, topics = FakeLog(), Topics({"foo": 4})
        c = consumer_coordinator(log, topics)
        a = await join(c, "a")
        assert a.error == 0 and a.response is not None
        assert a.response.member_epoch == 1
        assert a.response.assignment == {topics.id("foo"): frozenset({0, 1, 2, 3})}
        # Durable before the answer: the group's records are in its partition.
        p = c.partition_for(GROUP)
        assert any(isinstance(r.key, GroupEpochKey) for r in consumer_records(log, p))

        b = await join(c, "b")
        assert b.response is not None and b.response.assignment == {}  # not free yet
        a2 = await beat(c, "a")
        assert a2.response is not None and a2.response.member_epoch == 1  # revoking first
        kept = a2.response.assignment
        assert kept is not None and len(kept[topics.id("foo")]) == 2
        await settle(c, ["a", "b"])
        group = c.consumer.group(GROUP)
        assert group is not None
        owned_a = group.members["a"].assigned[topics.id("foo")]
        owned_b = group.members["b"].assigned[topics.id("foo")]
        assert owned_a | owned_b == {0, 1, 2, 3} and not owned_a & owned_b
        assert group.members["a"].member_epoch == group.members["b"].member_epoch == 2

    run(go())


def test_a_new_coordinator_replays_the_group_and_members_carry_on() -> None:
    async def go() -> None:
        log, topics = FakeLog(), Topics({"foo": 4})
        c = consumer_coordinator(log, topics)
        await join(c, "a")
        await join(c, "b")
        await settle(c, ["a", "b"])
        before = c.consumer.group(GROUP)
        assert before is not None
        await c.close()

        fresh = consumer_coordinator(log, topics, partitions=[])
        p = fresh.partition_for(GROUP)
        assert fresh.load_partition(p, log.log_batches(p)) == 1
        after = fresh.consumer.group(GROUP)
        assert after is not None
        assert after.group_epoch == before.group_epoch
        assert {m: v.assigned for m, v in after.members.items()} == {
            m: v.assigned for m, v in before.members.items()
        }
        # Each member heartbeats at its epoch without being fenced.
        for member_id in ("a", "b"):
            answer = await beat(fresh, member_id)
            assert answer.error == 0, answer
        # And its session timer runs on the new coordinator.
        assert fresh.consumer.has_timer(session_timer(GROUP, "a", 0).key)
        await fresh.close()

    run(go())


def test_a_silent_member_is_fenced_by_its_session_timer() -> None:
    # A 1 s session against heartbeats every 50 ms: a stall of the test's loop on a busy
    # machine must not fence the member that heartbeats.
    async def go() -> None:
        log, topics = FakeLog(), Topics({"foo": 2})
        c = consumer_coordinator(log, topics, session_timeout_ms=1000, heartbeat_interval_ms=50)
        await join(c, "a")
        await join(c, "b")
        await settle(c, ["a", "b"])
        group = c.consumer.group(GROUP)
        assert group is not None
        # Only "a" keeps heartbeating; "b" is removed after its session timeout.
        deadline = asyncio.get_running_loop().time() + 10
        while "b" in group.members:
            assert asyncio.get_running_loop().time() < deadline, "b was never fenced"
            await beat(c, "a")
            await asyncio.sleep(0.05)
            group = c.consumer.group(GROUP)
            assert group is not None
        await settle(c, ["a"])
        assert group.members["a"].assigned == {topics.id("foo"): frozenset({0, 1})}
        assert (await beat(c, "b", member_epoch=2, topic_partitions=())).error == (
            E.unknown_member_id
        )
        await c.close()

    run(go(), timeout=20)


def test_a_heartbeat_fails_with_the_append_error_and_changes_nothing() -> None:
    async def go() -> None:
        log, topics = FakeLog(), Topics({"foo": 2})
        c = consumer_coordinator(log, topics)
        log.fail_with = E.not_leader_or_follower
        answer = await join(c, "a")
        assert answer.error == E.not_coordinator
        assert c.consumer.group(GROUP) is None
        log.fail_with = None
        assert (await join(c, "a")).error == 0

    run(go())


def test_requests_for_a_partition_not_coordinated_here() -> None:
    async def go() -> None:
        log, topics = FakeLog(), Topics({"foo": 2})
        c = consumer_coordinator(log, topics, partitions=[])
        assert (await join(c, "a")).error == E.not_coordinator
        c.begin_loading(c.partition_for(GROUP))
        assert (await join(c, "a")).error == E.coordinator_load_in_progress
        described = c.consumer_group_describe([GROUP])
        assert described[0].error_code == E.coordinator_load_in_progress
        # The request's own checks come first, as Kafka's.
        bad = await join(c, "a", rebalance_timeout_ms=-1)
        assert bad.error == E.invalid_request and bad.message

    run(go())


def test_offsets_are_committed_and_fetched_with_member_epochs() -> None:
    async def go() -> None:
        log, topics = FakeLog(), Topics({"foo": 2})
        c = consumer_coordinator(log, topics)
        await join(c, "a")
        tp = ("foo", 0)
        ok = await c.commit_offsets(GROUP, "a", 1, {tp: (10, -1, "")}, api_version=9)
        assert ok.partitions == {tp: 0}
        stale = await c.commit_offsets(GROUP, "a", 0, {tp: (11, -1, "")}, api_version=9)
        assert stale.partitions == {tp: E.stale_member_epoch}
        old = await c.commit_offsets(GROUP, "a", 1, {tp: (12, -1, "")}, api_version=8)
        assert old.partitions == {tp: E.unsupported_version}
        stranger = await c.commit_offsets(GROUP, "x", 1, {tp: (13, -1, "")}, api_version=9)
        assert stranger.partitions == {tp: E.unknown_member_id}
        # The admin (no member, epoch -1) may not commit while the group has members.
        admin = await c.commit_offsets(GROUP, "", -1, {tp: (14, -1, "")})
        assert admin.partitions == {tp: E.unknown_member_id}

        fetched = c.fetch_offsets(GROUP, [tp], member_id="a", member_epoch=1)
        assert fetched.error == 0 and fetched.partitions[tp].offset == 10
        assert c.fetch_offsets(GROUP, [tp], member_id="a", member_epoch=0).error == (
            E.stale_member_epoch
        )
        assert c.fetch_offsets(GROUP, [tp]).partitions[tp].offset == 10  # the admin's fetch
        # Subscribed topics' offsets cannot be deleted; others can.
        await c.commit_offsets(GROUP, "a", 1, {("old", 0): (5, -1, "")}, api_version=9)
        error, parts = await c.delete_offsets(GROUP, [tp, ("old", 0)])
        assert error == 0
        assert parts == {tp: E.group_subscribed_to_topic, ("old", 0): 0}

        # Offsets survive a failover with the group.
        await c.close()
        fresh = consumer_coordinator(log, topics, partitions=[])
        p = fresh.partition_for(GROUP)
        fresh.load_partition(p, log.log_batches(p))
        assert fresh.fetch_offsets(GROUP, [tp]).partitions[tp].offset == 10
        assert fresh.list_groups().groups[0].group_type == "consumer"
        await fresh.close()

    run(go())


def test_list_describe_and_delete_consumer_groups() -> None:
    async def go() -> None:
        log, topics = FakeLog(), Topics({"foo": 2})
        c = consumer_coordinator(log, topics)
        await join(c, "a")
        await c.commit_offsets(GROUP, "a", 1, {("foo", 0): (3, -1, "")}, api_version=9)
        listed = c.list_groups().groups
        assert [(g.group_id, g.protocol_type, g.state, g.group_type) for g in listed] == [
            (GROUP, "consumer", "Stable", "consumer")
        ]
        assert c.list_groups(types_filter=["classic"]).groups == ()
        assert c.list_groups(states_filter=["empty"]).groups == ()

        described = c.describe_groups([GROUP])[0]
        assert (described.state, described.protocol_type, described.protocol) == (
            "Stable",
            "consumer",
            "uniform",
        )
        assert [m.member_id for m in described.members] == ["a"]
        assert described.members[0].assignment  # ConsumerProtocolAssignment bytes
        full = c.consumer_group_describe([GROUP, "nope"])
        assert full[0].group_epoch == 1 and full[0].members[0].member_type == 1
        assert full[1].error_code == E.group_id_not_found

        assert (await c.delete_groups([GROUP]))[0].error == E.non_empty_group
        left = await beat(c, "a", member_epoch=-1)
        assert left.error == 0
        assert (await c.delete_groups([GROUP]))[0].error == 0
        assert c.consumer.group(GROUP) is None
        assert c.fetch_offsets(GROUP, [("foo", 0)]).partitions[("foo", 0)].offset == -1
        # Gone from the log too: a new coordinator finds nothing.
        fresh = consumer_coordinator(log, topics, partitions=[])
        p = fresh.partition_for(GROUP)
        assert fresh.load_partition(p, log.log_batches(p)) == 0

    run(go())


def test_regex_subscriptions_follow_topic_creation_and_deletion() -> None:
    async def go() -> None:
        log, topics = FakeLog(), Topics({"orders-1": 1, "clicks": 1})
        c = consumer_coordinator(log, topics)
        first = await join(c, "a", regex="orders-.*")
        assert first.response is not None
        assert first.response.assignment == {topics.id("orders-1"): frozenset({0})}
        topics.add("orders-2", 2)
        await settle(c, ["a"])
        group = c.consumer.group(GROUP)
        assert group is not None
        assert group.members["a"].assigned == {
            topics.id("orders-1"): frozenset({0}),
            topics.id("orders-2"): frozenset({0, 1}),
        }
        topics.remove("orders-1")
        await settle(c, ["a"])
        assert group.members["a"].assigned == {topics.id("orders-2"): frozenset({0, 1})}

    run(go())


def test_a_timer_that_fires_after_a_heartbeat_rearmed_it_fences_nobody() -> None:
    async def go() -> None:
        log, topics = FakeLog(), Topics({"foo": 1})
        c = consumer_coordinator(log, topics)
        await join(c, "a")
        group = c.consumer.group(GROUP)
        assert group is not None
        # The session timer went off, and a heartbeat re-armed it before its task ran.
        stale = session_timer(GROUP, "a", 45_000)
        await c.consumer.fire(stale)
        assert "a" in group.members
        # Without a re-armed timer the same firing fences the member.
        c.consumer.apply_timers([CancelTimer(stale.key)])
        await c.consumer.fire(stale)
        group = c.consumer.group(GROUP)
        assert group is not None and "a" not in group.members
        await c.close()

    run(go())


def test_the_consumer_protocol_can_be_disabled() -> None:
    async def go() -> None:
        c = make_coordinator(FakeLog(), rebalance_protocols=("classic",))
        answer = await join(c, "a")
        assert answer.error == E.unsupported_version

    run(go())


def test_a_restarted_static_member_takes_its_partitions_back_without_a_rebalance() -> None:
    async def go() -> None:
        log, topics = FakeLog(), Topics({"foo": 4})
        c = consumer_coordinator(log, topics)
        await join(c, "a", instance_id="host-a")
        await join(c, "b", instance_id="host-b")
        await settle(c, ["a", "b"])
        group = c.consumer.group(GROUP)
        assert group is not None
        epoch, owned = group.group_epoch, group.members["a"].assigned
        # A rolling restart: leave for now (epoch -2), then a new process, same instance id.
        assert (await beat(c, "a", member_epoch=-2, instance_id="host-a")).error == 0
        back = await join(c, "a2", instance_id="host-a")
        assert back.response is not None and back.response.assignment == owned
        group = c.consumer.group(GROUP)
        assert group is not None and group.group_epoch == epoch  # nobody else moved
        assert set(group.members) == {"a2", "b"}
        # The old process, if it were still around, is fenced; a stranger may not take the id.
        assert (await beat(c, "a", member_epoch=epoch, topic_partitions=())).error == (
            E.unknown_member_id
        )
        assert (await join(c, "x", instance_id="host-b")).error == E.unreleased_instance_id

    run(go())
