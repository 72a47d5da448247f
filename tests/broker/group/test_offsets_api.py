"""Tests for OffsetCommit/OffsetFetch, List/Describe/DeleteGroups and offset expiration."""

from __future__ import annotations

import asyncio

from tests.broker.group.helpers import FakeLog, join, make_coordinator, run, stable_group
from tierlog.broker.group.offsets_codec import GroupMetadataKey, OffsetCommitKey
from tierlog.protocol.errors import ErrorCode as E
from tierlog.util.clock import ManualClock

T1 = ("t", 1)
T2 = ("t", 2)
MINUTE = 60_000


def test_simple_commit_and_fetch() -> None:
    async def go() -> None:
        log = FakeLog()
        c = make_coordinator(log)
        result = await c.commit_offsets("simple", "", -1, {T1: (10, 3, "md"), T2: (20, -1, None)})
        assert result.error == E.none and result.partitions == {T1: E.none, T2: E.none}
        fetched = c.fetch_offsets("simple", [T1, T2, ("other", 0)])
        assert fetched.error == E.none
        assert (fetched.partitions[T1].offset, fetched.partitions[T1].leader_epoch) == (10, 3)
        assert fetched.partitions[T1].metadata == "md"
        assert (fetched.partitions[T2].offset, fetched.partitions[T2].metadata) == (20, "")
        assert fetched.partitions[("other", 0)].offset == -1
        assert set(c.fetch_offsets("simple").partitions) == {T1, T2}  # all partitions
        assert c.fetch_offsets("unknown", [T1]).partitions[T1].offset == -1
        assert c.fetch_offsets("unknown").partitions == {}
        # An offsets-only group: listed Empty with no protocol type.
        listed = {g.group_id: g for g in c.list_groups().groups}
        assert (listed["simple"].state, listed["simple"].protocol_type) == ("Empty", "")
        assert log.calls == 1  # both partitions in one batch
        await c.close()

    run(go())


def test_group_commit_generation_fencing() -> None:
    async def go() -> None:
        c = make_coordinator()
        a, _ = await stable_group(c, 2)
        ok = await c.commit_offsets("g", a.member_id, 1, {T1: (5, -1, "")})
        assert ok.partitions == {T1: E.none}
        cases = [
            (a.member_id, 0, E.illegal_generation),
            ("ghost", 1, E.unknown_member_id),
            ("", -1, E.unknown_member_id),  # simple commits only for groups without members
        ]
        for member_id, generation, expected in cases:
            result = await c.commit_offsets("g", member_id, generation, {T1: (6, -1, "")})
            assert result.error == expected and result.partitions == {T1: expected}
        assert c.fetch_offsets("g", [T1]).partitions[T1].offset == 5
        assert (await c.commit_offsets("new", "m", 3, {T1: (1, -1, "")})).error == (
            E.illegal_generation
        )
        await c.close()

    run(go())


def test_commit_during_rebalance_phases() -> None:
    async def go() -> None:
        c = make_coordinator()
        a, b = await stable_group(c, 2)
        rejoin = asyncio.ensure_future(join(c, member_id=a.member_id))
        await asyncio.sleep(0)
        # PreparingRebalance: still accepted (the heartbeat tells the member to rejoin).
        assert (await c.commit_offsets("g", b.member_id, 1, {T1: (7, -1, "")})).error == E.none
        await join(c, member_id=b.member_id)
        await rejoin
        # CompletingRebalance: the member has no assignment yet.
        late = await c.commit_offsets("g", b.member_id, 2, {T1: (8, -1, "")})
        assert late.error == E.rebalance_in_progress
        await c.close()

    run(go())


def test_commit_waits_for_durability_and_maps_append_errors() -> None:
    async def go() -> None:
        log = FakeLog()
        c = make_coordinator(log)
        log.gate = asyncio.Event()
        commit = asyncio.ensure_future(c.commit_offsets("s", "", -1, {T1: (1, -1, "")}))
        await asyncio.sleep(0.02)
        assert not commit.done()
        assert c.fetch_offsets("s", [T1]).partitions[T1].offset == -1  # not yet durable
        log.gate.set()
        assert (await commit).error == E.none
        assert c.fetch_offsets("s", [T1]).partitions[T1].offset == 1

        failures: list[tuple[int | Exception, int]] = [
            (E.not_leader_or_follower, E.not_coordinator),
            (E.not_enough_replicas, E.coordinator_not_available),
            (E.record_list_too_large, E.invalid_commit_offset_size),
            (OSError("disk on fire"), E.coordinator_not_available),
        ]
        for raised, expected in failures:
            log.fail_with = raised
            result = await c.commit_offsets("s", "", -1, {T1: (99, -1, "")})
            assert result.partitions == {T1: expected}
        assert c.fetch_offsets("s", [T1]).partitions[T1].offset == 1  # nothing applied
        await c.close()

    run(go())


def test_metadata_too_large_only_fails_that_partition() -> None:
    async def go() -> None:
        c = make_coordinator(offset_metadata_max_bytes=4)
        result = await c.commit_offsets("s", "", -1, {T1: (1, -1, "12345"), T2: (2, -1, "1234")})
        assert result.partitions == {T1: E.offset_metadata_too_large, T2: E.none}
        await c.close()

    run(go())


def test_list_and_describe_groups() -> None:
    async def go() -> None:
        c = make_coordinator()
        await stable_group(c, 2)
        await c.commit_offsets("simple", "", -1, {T1: (1, -1, "")})
        groups = {(g.group_id, g.protocol_type, g.state) for g in c.list_groups().groups}
        assert groups == {("g", "consumer", "Stable"), ("simple", "", "Empty")}
        assert [g.group_id for g in c.list_groups(states_filter=["stable"]).groups] == ["g"]
        assert c.list_groups(types_filter=["consumer"]).groups == ()  # all are "classic"

        described, unknown = c.describe_groups(["g", "nope"])
        assert (described.state, described.protocol_type, described.protocol) == (
            "Stable",
            "consumer",
            "range",
        )
        assert [(m.client_id, m.client_host, m.metadata) for m in described.members] == [
            ("c0", "/127.0.0.1", b"range-meta"),
            ("c1", "/127.0.0.1", b"range-meta"),
        ]
        assert [m.assignment for m in described.members] == [b"assign-0", b"assign-1"]
        assert (unknown.error, unknown.state) == (E.none, "Dead")
        strict = c.describe_groups(["nope"], not_found_error=True)[0]
        assert strict.error == E.group_id_not_found
        await c.close()

    run(go())


def test_delete_groups() -> None:
    async def go() -> None:
        log = FakeLog()
        c = make_coordinator(log)
        await stable_group(c, 1, group_id="busy")
        await c.commit_offsets("idle", "", -1, {T1: (1, -1, "")})
        results = await c.delete_groups(["idle", "busy", "missing", "idle"])
        assert [(r.group_id, r.error) for r in results] == [
            ("idle", E.none),
            ("busy", E.non_empty_group),
            ("missing", E.group_id_not_found),
        ]
        assert c.fetch_offsets("idle", [T1]).partitions[T1].offset == -1
        assert "idle" not in [g.group_id for g in c.list_groups().groups]
        # An offsets-only group (generation 0) has no metadata record to delete.
        assert (OffsetCommitKey("idle", "t", 1), None) in log.all_decoded()
        assert (GroupMetadataKey("idle"), None) not in log.all_decoded()
        await c.close()

    run(go())


def test_delete_emptied_group_writes_group_tombstone_and_failure_keeps_it() -> None:
    async def go() -> None:
        log = FakeLog()
        c = make_coordinator(log)
        (a,) = await stable_group(c, 1)
        await c.commit_offsets("g", a.member_id, 1, {T1: (4, -1, "")})
        await c.leave_group("g", [(a.member_id, None)])
        await asyncio.sleep(0.01)
        log.fail_with = E.not_leader_or_follower
        assert (await c.delete_groups(["g"]))[0].error == E.not_coordinator
        assert c.fetch_offsets("g", [T1]).partitions[T1].offset == 4  # still there
        log.fail_with = None
        assert (await c.delete_groups(["g"]))[0].error == E.none
        assert (GroupMetadataKey("g"), None) in log.all_decoded()
        await c.close()

    run(go())


def test_expiration_of_empty_groups_and_simple_groups() -> None:
    async def go() -> None:
        log = FakeLog()
        clock = ManualClock()
        c = make_coordinator(log, clock=clock, offsets_retention_ms=10 * MINUTE)
        (a,) = await stable_group(c, 1)
        await c.commit_offsets("g", a.member_id, 1, {T1: (4, -1, "")})
        await c.commit_offsets("simple", "", -1, {T1: (9, -1, "")})
        clock.advance(9 * MINUTE)
        await c.leave_group("g", [(a.member_id, None)])  # "g" is Empty from now on
        await asyncio.sleep(0.01)
        assert await c.cleanup_expired_offsets() == 0
        clock.advance(MINUTE)
        # The simple group counts from its commit (10 min ago); "g" from becoming Empty.
        assert await c.cleanup_expired_offsets() == 1
        assert c.fetch_offsets("simple", [T1]).partitions[T1].offset == -1
        assert "simple" not in [g.group_id for g in c.list_groups().groups]
        assert c.fetch_offsets("g", [T1]).partitions[T1].offset == 4
        clock.advance(9 * MINUTE)
        assert await c.cleanup_expired_offsets() == 1
        assert c.list_groups().groups == ()
        tail = log.all_decoded()[-2:]
        assert tail == [(OffsetCommitKey("g", "t", 1), None), (GroupMetadataKey("g"), None)]
        await c.close()

    run(go())


def test_stable_consumer_group_expires_only_unsubscribed_topics() -> None:
    async def go() -> None:
        clock = ManualClock()
        c = make_coordinator(clock=clock, offsets_retention_ms=MINUTE)
        # ConsumerProtocolSubscription v0: version, topics ["t"], user data null.
        subscription = bytes.fromhex("0000 00000001 0001 74 ffffffff".replace(" ", ""))
        (a,) = await stable_group(c, 1, protocols=[("range", subscription)])
        await c.commit_offsets("g", a.member_id, 1, {T1: (1, -1, ""), ("gone", 0): (2, -1, "")})
        clock.advance(MINUTE)
        assert await c.cleanup_expired_offsets() == 1
        assert set(c.fetch_offsets("g").partitions) == {T1}
        await c.close()

    run(go())


def test_failed_expiration_keeps_offsets() -> None:
    async def go() -> None:
        log = FakeLog()
        clock = ManualClock()
        c = make_coordinator(log, clock=clock, offsets_retention_ms=MINUTE)
        await c.commit_offsets("simple", "", -1, {T1: (9, -1, "")})
        clock.advance(MINUTE)
        log.fail_with = E.not_enough_replicas
        assert await c.cleanup_expired_offsets() == 0
        assert c.fetch_offsets("simple", [T1]).partitions[T1].offset == 9
        log.fail_with = None
        assert await c.cleanup_expired_offsets() == 1
        await c.close()

    run(go())


def test_empty_group_id_is_allowed_for_offsets_only() -> None:
    async def go() -> None:
        c = make_coordinator()
        assert (await c.commit_offsets("", "", -1, {T1: (1, -1, "")})).error == E.none
        assert c.fetch_offsets("", [T1]).partitions[T1].offset == 1
        assert (await join(c, group_id="")).error == E.invalid_group_id
        assert (await c.leave_group("", [("m", None)])).error == E.invalid_group_id
        await c.close()

    run(go())


def test_commit_is_applied_even_if_the_client_goes_away() -> None:
    async def go() -> None:
        log = FakeLog()
        c = make_coordinator(log)
        log.gate = asyncio.Event()
        commit = asyncio.ensure_future(c.commit_offsets("s", "", -1, {T1: (5, -1, "")}))
        await asyncio.sleep(0.01)
        commit.cancel()
        log.gate.set()
        await asyncio.sleep(0.01)
        assert c.fetch_offsets("s", [T1]).partitions[T1].offset == 5
        await c.close()

    run(go())


def test_group_config_from_broker_properties() -> None:
    from tierlog.broker.config import BrokerConfig
    from tierlog.broker.group import GroupConfig

    config = GroupConfig.from_properties(
        BrokerConfig({"offsets.retention.minutes": "2", "group.max.size": "7"}).values
    )
    assert (config.offsets_retention_ms, config.max_size) == (2 * MINUTE, 7)
    assert (config.num_partitions, config.initial_rebalance_delay_ms) == (50, 3000)
    assert config.min_session_timeout_ms == 6000


def test_offset_delete() -> None:
    """OffsetDelete (KIP-496): Kafka's rules for Empty groups, consumer groups with
    members (subscribed topics kept) and other groups with members."""

    async def go() -> None:
        log = FakeLog()
        c = make_coordinator(log)
        other = ("u", 0)
        await c.commit_offsets("idle", "", -1, {T1: (1, -1, ""), T2: (2, -1, "")})
        error, partitions = await c.delete_offsets("idle", [T1, ("nothing", 0)])
        assert (error, partitions) == (E.none, {T1: E.none, ("nothing", 0): E.none})
        assert c.fetch_offsets("idle", [T1]).partitions[T1].offset == -1
        assert c.fetch_offsets("idle", [T2]).partitions[T2].offset == 2
        assert (OffsetCommitKey("idle", "t", 1), None) in log.all_decoded()
        # The last offset of an Empty group goes: so does the group.
        assert (await c.delete_offsets("idle", [T2]))[0] == E.none
        assert "idle" not in [g.group_id for g in c.list_groups().groups]
        assert (await c.delete_offsets("idle", [T2]))[0] == E.group_id_not_found

        # A consumer group with a member subscribed to "t": those offsets stay.
        subscription = bytes.fromhex("0000 00000001 0001 74 ffffffff".replace(" ", ""))
        (a,) = await stable_group(c, 1, protocols=[("range", subscription)])
        await c.commit_offsets("g", a.member_id, 1, {T1: (4, -1, ""), other: (5, -1, "")})
        error, partitions = await c.delete_offsets("g", [T1, other])
        assert error == E.none
        assert partitions == {T1: E.group_subscribed_to_topic, other: E.none}
        fetched = c.fetch_offsets("g", [T1, other]).partitions
        assert (fetched[T1].offset, fetched[other].offset) == (4, -1)

        # Members of a group that is not a consumer group: nothing can be told apart.
        await stable_group(c, 1, group_id="connect", protocol_type="connect")
        assert (await c.delete_offsets("connect", [T1]))[0] == E.non_empty_group
        assert (await c.delete_offsets("g", [other]))[0] == E.none  # nothing left to delete
        # A failed write keeps the offsets.
        await c.commit_offsets("g", a.member_id, 1, {other: (6, -1, "")})
        log.fail_with = E.not_leader_or_follower
        assert (await c.delete_offsets("g", [other]))[0] == E.not_coordinator
        assert c.fetch_offsets("g", [other]).partitions[other].offset == 6
        await c.close()

    run(go())
