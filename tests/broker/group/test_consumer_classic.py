"""Groups moving between the classic and the consumer protocol (KIP-848), through the
coordinator: an upgrade with classic members served by the consumer group
(``consumer_classic.py``), a downgrade back, an empty group converting, and a failover in
the middle."""

from __future__ import annotations

import asyncio

from tests.broker.group import helpers
from tests.broker.group.consumer_helpers import (
    GROUP,
    Topics,
    beat,
    classic_assignment,
    consumer_coordinator,
    join,
    subscription,
)
from tests.broker.group.helpers import FakeLog, run
from tierlog.broker.group import GroupCoordinator, JoinGroupResult
from tierlog.broker.group.consumer.config import MigrationPolicy
from tierlog.broker.group.consumer.embedded import decode_assignment
from tierlog.protocol.errors import ErrorCode

E = ErrorCode
FOO = {"foo": 4}


def classic_join(
    c: GroupCoordinator,
    member_id: str = "",
    owned: tuple[tuple[str, tuple[int, ...]], ...] = (),
    **kwargs: object,
) -> asyncio.Future[JoinGroupResult]:
    protocols = [("range", subscription(("foo",), owned))]
    return asyncio.ensure_future(
        helpers.join(c, GROUP, member_id, protocols=protocols, **kwargs)  # type: ignore[arg-type]
    )


async def classic_group(c: GroupCoordinator) -> list[JoinGroupResult]:
    """Two classic consumers, Stable, owning foo 0-1 and 2-3 (leader first)."""
    first, second = classic_join(c, client_id="c0"), None
    await asyncio.sleep(0)
    second = classic_join(c, client_id="c1")
    results = list(await asyncio.gather(first, second))
    leader = next(r for r in results if r.member_id == r.leader)
    other = next(r for r in results if r is not leader)
    plan = {
        leader.member_id: classic_assignment((("foo", (0, 1)),)),
        other.member_id: classic_assignment((("foo", (2, 3)),)),
    }
    syncs = await asyncio.gather(
        c.sync_group(GROUP, leader.member_id, leader.generation_id, plan),
        c.sync_group(GROUP, other.member_id, other.generation_id, {}),
    )
    assert all(s.error == 0 for s in syncs)
    return [leader, other]


def owned(result_assignment: bytes) -> tuple[tuple[str, tuple[int, ...]], ...]:
    return decode_assignment(result_assignment).partitions


async def rejoin_and_sync(
    c: GroupCoordinator, member_id: str, owning: tuple[tuple[str, tuple[int, ...]], ...]
) -> tuple[int, bytes]:
    """A classic member's JoinGroup then SyncGroup on a consumer group; returns its
    generation and assignment."""
    joined = await classic_join(c, member_id, owning)
    assert joined.error == 0, joined
    assert joined.protocol_type == "consumer" and joined.leader == ""
    synced = await c.sync_group(GROUP, member_id, joined.generation_id, {})
    if synced.error == E.rebalance_in_progress:
        return await rejoin_and_sync(c, member_id, owning)
    assert synced.error == 0, synced
    return joined.generation_id, synced.assignment


def test_classic_group_upgrades_online_and_its_members_are_served_by_it() -> None:
    async def go() -> None:
        log, topics = FakeLog(), Topics(FOO)
        c = consumer_coordinator(log, topics)
        a, b = await classic_group(c)
        generation = a.generation_id

        # The first consumer-protocol member converts the group.
        joined = await join(c, "new")
        assert joined.error == 0, joined
        group = c.consumer.group(GROUP)
        assert group is not None and set(group.members) == {a.member_id, b.member_id, "new"}
        assert group.members[a.member_id].member_epoch == generation
        assert c.list_groups().groups[0].group_type == "consumer"

        # The classic members learn about the rebalance from their heartbeats ...
        assert c.heartbeat(GROUP, a.member_id, generation).error == E.rebalance_in_progress
        # ... and rejoin through JoinGroup/SyncGroup, revoking first.
        holdings = {a.member_id: (("foo", (0, 1)),), b.member_id: (("foo", (2, 3)),)}
        for _ in range(6):
            for member_id in (a.member_id, b.member_id):
                _, assignment = await rejoin_and_sync(c, member_id, holdings[member_id])
                holdings[member_id] = owned(assignment)
            await beat(c, "new")
            group = c.consumer.group(GROUP)
            assert group is not None
            if group.state.value == "Stable":
                break
        assert group.state.value == "Stable"
        parts = [p for m in group.members.values() for ps in m.assigned.values() for p in ps]
        assert sorted(parts) == [0, 1, 2, 3]  # every partition, each owned once
        assert all(m.assigned for m in group.members.values())
        hb = c.heartbeat(GROUP, a.member_id, group.members[a.member_id].member_epoch)
        assert hb.error == 0

    run(go())


def test_upgrade_refused_when_the_policy_disables_it() -> None:
    async def go() -> None:
        log, topics = FakeLog(), Topics(FOO)
        c = consumer_coordinator(log, topics, migration_policy=MigrationPolicy.DOWNGRADE)
        await classic_group(c)
        refused = await join(c, "new")
        assert refused.error == E.group_id_not_found
        assert refused.message is not None and "upgrade is disabled" in refused.message
        assert c.consumer.group(GROUP) is None

    run(go())


def test_last_consumer_member_leaving_downgrades_to_a_classic_rebalance() -> None:
    async def go() -> None:
        log, topics = FakeLog(), Topics(FOO)
        c = consumer_coordinator(log, topics)
        a, b = await classic_group(c)
        await join(c, "new")
        left = await beat(c, "new", member_epoch=-1)
        assert left.error == 0
        assert c.consumer.group(GROUP) is None
        classic = c.group(GROUP)
        assert classic is not None
        assert set(classic.members) == {a.member_id, b.member_id}
        assert classic.state.value == "PreparingRebalance"
        # The classic members rejoin a classic rebalance.
        first = classic_join(c, a.member_id)
        second = classic_join(c, b.member_id)
        results = await asyncio.gather(first, second)
        assert all(r.error == 0 for r in results)
        assert any(r.leader == r.member_id for r in results)  # a classic leader again

        # A new coordinator finds a classic group, not a consumer one.
        await c.close()
        fresh = consumer_coordinator(log, topics, partitions=[])
        p = fresh.partition_for(GROUP)
        fresh.load_partition(p, log.log_batches(p))
        assert fresh.consumer.group(GROUP) is None
        reloaded = fresh.group(GROUP)
        assert reloaded is not None and reloaded.protocol_type == "consumer"
        await fresh.close()

    run(go())


def test_a_classic_member_turns_an_empty_consumer_group_classic() -> None:
    async def go() -> None:
        log, topics = FakeLog(), Topics(FOO)
        c = consumer_coordinator(log, topics)
        await join(c, "a")
        await beat(c, "a", member_epoch=-1)  # empty consumer group, still there
        group = c.consumer.group(GROUP)
        assert group is not None and group.is_empty
        joined = await classic_join(c)
        assert joined.error == 0 and joined.leader == joined.member_id
        assert c.consumer.group(GROUP) is None
        assert [g.group_type for g in c.list_groups().groups] == ["classic"]

    run(go())


def test_classic_members_of_a_consumer_group_survive_a_failover() -> None:
    async def go() -> None:
        log, topics = FakeLog(), Topics(FOO)
        c = consumer_coordinator(log, topics)
        a, _ = await classic_group(c)
        await join(c, "new")
        await c.close()

        fresh = consumer_coordinator(log, topics, partitions=[])
        p = fresh.partition_for(GROUP)
        fresh.load_partition(p, log.log_batches(p))
        group = fresh.consumer.group(GROUP)
        assert group is not None
        member = group.members[a.member_id]
        assert member.classic_metadata is not None
        assert fresh.heartbeat(GROUP, a.member_id, member.member_epoch).error == (
            E.rebalance_in_progress
        )
        _, assignment = await rejoin_and_sync(fresh, a.member_id, (("foo", (0, 1)),))
        assert set(owned(assignment)[0][1]) <= {0, 1}
        await fresh.close()

    run(go())


def test_classic_leave_and_unknown_members_of_a_consumer_group() -> None:
    async def go() -> None:
        log, topics = FakeLog(), Topics(FOO)
        c = consumer_coordinator(log, topics)
        a, _ = await classic_group(c)
        await join(c, "new")
        # A new classic member needs a member id first (JoinGroup v4+, KIP-394).
        required = await classic_join(c, require_known_member_id=True)
        assert required.error == E.member_id_required and required.member_id
        # A consumer-protocol member cannot use the classic APIs.
        assert c.heartbeat(GROUP, "new", 1).error == E.unknown_member_id
        assert c.heartbeat(GROUP, a.member_id, 99).error == E.illegal_generation
        left = await c.leave_group(GROUP, [(a.member_id, None), ("ghost", None)])
        assert [m.error for m in left.members] == [0, E.unknown_member_id]
        group = c.consumer.group(GROUP)
        assert group is not None and a.member_id not in group.members

    run(go())
