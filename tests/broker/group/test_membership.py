"""Tests for the coordinator's membership protocol: JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, rebalances, timers and static membership."""

from __future__ import annotations

import asyncio
import time

from tests.broker.group.helpers import PROTOCOLS, FakeLog, join, make_coordinator, run, stable_group
from tierlog.broker.group import GroupCoordinator, GroupState
from tierlog.protocol.errors import ErrorCode as E


def state(c: GroupCoordinator, group_id: str = "g") -> str:
    return c.describe_groups([group_id])[0].state


# ------------------------------------------------------------------ join and sync


def test_member_id_required_then_join_and_sync() -> None:
    async def go() -> None:
        c = make_coordinator()
        first = await join(c, require_known_member_id=True)
        assert first.error == E.member_id_required
        assert first.member_id.startswith("client-") and len(first.member_id) == len("client-") + 36
        assert state(c) == "Empty"  # KIP-394: nothing joined yet

        joined = await join(c, member_id=first.member_id, require_known_member_id=True)
        assert joined.error == E.none
        assert (joined.member_id, joined.leader, joined.generation_id) == (
            first.member_id,
            first.member_id,
            1,
        )
        assert (joined.protocol_type, joined.protocol_name) == ("consumer", "range")
        assert [(m.member_id, m.metadata) for m in joined.members] == [
            (first.member_id, b"range-meta")
        ]
        assert state(c) == "CompletingRebalance"

        synced = await c.sync_group("g", joined.member_id, 1, {joined.member_id: b"mine"})
        assert (synced.error, synced.assignment) == (E.none, b"mine")
        assert (synced.protocol_type, synced.protocol_name) == ("consumer", "range")
        assert state(c) == "Stable"
        await c.close()

    run(go())


def test_three_members_one_generation_and_assignments() -> None:
    async def go() -> None:
        log = FakeLog()
        c = make_coordinator(log, initial_rebalance_delay_ms=50)
        joins = []
        for i in range(3):
            joins.append(asyncio.ensure_future(join(c, client_id=f"c{i}")))
            await asyncio.sleep(0.01)
        results = await asyncio.gather(*joins)
        assert {r.error for r in results} == {E.none}
        assert {r.generation_id for r in results} == {1}
        leader_id = results[0].member_id  # the first to join leads
        assert {r.leader for r in results} == {leader_id}
        assert [m.member_id for m in results[0].members] == [r.member_id for r in results]
        assert all(m.metadata == b"range-meta" for m in results[0].members)
        assert results[1].members == () and results[2].members == ()

        # Followers sync first and wait for the leader's assignment.
        follower_syncs = [
            asyncio.ensure_future(c.sync_group("g", r.member_id, 1, {})) for r in results[1:]
        ]
        await asyncio.sleep(0.01)
        assert not any(f.done() for f in follower_syncs)
        assignment = {r.member_id: f"a{i}".encode() for i, r in enumerate(results)}
        leader_sync = await c.sync_group("g", leader_id, 1, assignment)
        assert leader_sync.assignment == b"a0"
        assert [(await f).assignment for f in follower_syncs] == [b"a1", b"a2"]
        assert state(c) == "Stable"
        # A late sync in Stable gets the stored assignment.
        late = await c.sync_group("g", results[2].member_id, 1, {})
        assert late.assignment == b"a2"
        assert log.calls == 1  # one group metadata record for the generation
        await c.close()

    run(go())


def test_missing_assignments_are_empty_and_sync_errors() -> None:
    async def go() -> None:
        c = make_coordinator()
        leader = await join(c)
        assert (await c.sync_group("g", leader.member_id, 2, {})).error == E.illegal_generation
        assert (await c.sync_group("g", "nobody", 1, {})).error == E.unknown_member_id
        assert (await c.sync_group("other", "x", 1, {})).error == E.unknown_member_id
        wrong = await c.sync_group("g", leader.member_id, 1, {}, protocol_name="roundrobin")
        assert wrong.error == E.inconsistent_group_protocol
        synced = await c.sync_group("g", leader.member_id, 1, {"stranger": b"x"})
        assert (synced.error, synced.assignment) == (E.none, b"")
        await c.close()

    run(go())


def test_join_errors() -> None:
    async def go() -> None:
        c = make_coordinator(max_session_timeout_ms=5000)
        assert (await join(c, group_id="")).error == E.invalid_group_id
        assert (await join(c, session_timeout_ms=5)).error == E.invalid_session_timeout
        assert (await join(c, session_timeout_ms=5001)).error == E.invalid_session_timeout
        assert (await join(c, member_id="ghost")).error == E.unknown_member_id
        assert (await join(c, protocol_type="")).error == E.inconsistent_group_protocol
        first = await join(c)
        other = await join(c, protocols=[("sticky", b"")])
        assert other.error == E.inconsistent_group_protocol
        wrong_type = await join(c, protocol_type="connect")
        assert wrong_type.error == E.inconsistent_group_protocol
        assert first.error == E.none
        await c.close()

    run(go())


def test_not_coordinator_and_loading() -> None:
    async def go() -> None:
        c = make_coordinator(partitions=[])
        assert (await join(c)).error == E.not_coordinator
        assert c.heartbeat("g", "m", 1).error == E.not_coordinator
        c.begin_loading(c.partition_for("g"))
        assert (await join(c)).error == E.coordinator_load_in_progress
        # Kafka: heartbeats pass blindly while loading; SyncGroup makes members rejoin.
        assert c.heartbeat("g", "m", 1).error == E.none
        assert (await c.sync_group("g", "m", 1, {})).error == E.rebalance_in_progress
        assert c.list_groups().error == E.coordinator_load_in_progress
        c.load_partition(c.partition_for("g"), [])
        assert (await join(c)).error == E.none
        await c.close()
        assert (await join(c)).error == E.coordinator_not_available

    run(go())


def test_group_max_size() -> None:
    async def go() -> None:
        c = make_coordinator(max_size=2)
        await stable_group(c, 2)
        third = await join(c)
        assert (third.error, third.member_id) == (E.group_max_size_reached, "")
        assert state(c) == "Stable"
        await c.close()

    run(go())


# ------------------------------------------------------------------ heartbeats and rebalances


def test_heartbeat_errors_and_rebalance_in_progress() -> None:
    async def go() -> None:
        c = make_coordinator()
        a, b = await stable_group(c, 2)
        assert c.heartbeat("g", a.member_id, 1).error == E.none
        assert c.heartbeat("g", a.member_id, 0).error == E.illegal_generation
        assert c.heartbeat("g", "ghost", 1).error == E.unknown_member_id
        assert c.heartbeat("nope", a.member_id, 1).error == E.unknown_member_id
        assert c.heartbeat("", a.member_id, 1).error == E.invalid_group_id

        # The leader rejoining starts a rebalance; the follower learns it by heartbeat.
        rejoin_a = asyncio.ensure_future(join(c, member_id=a.member_id))
        await asyncio.sleep(0)
        assert state(c) == "PreparingRebalance"
        assert c.heartbeat("g", b.member_id, 1).error == E.rebalance_in_progress
        assert (await c.sync_group("g", b.member_id, 1, {})).error == E.rebalance_in_progress
        rejoin_b = await join(c, member_id=b.member_id)
        ra = await rejoin_a
        assert ra.generation_id == rejoin_b.generation_id == 2
        assert c.heartbeat("g", b.member_id, 2).error == E.none  # CompletingRebalance
        await c.close()

    run(go())


def test_follower_with_same_metadata_gets_current_generation() -> None:
    async def go() -> None:
        c = make_coordinator()
        _, b = await stable_group(c, 2)
        again = await join(c, member_id=b.member_id, client_id="c1")
        assert (again.error, again.generation_id, again.members) == (E.none, 1, ())
        assert state(c) == "Stable"
        changed = asyncio.ensure_future(
            join(c, member_id=b.member_id, protocols=[("range", b"new-topics")])
        )
        await asyncio.sleep(0)
        assert state(c) == "PreparingRebalance"
        changed.cancel()
        await c.close()

    run(go())


def test_session_expiry_removes_member_and_rebalances() -> None:
    # Sessions of 1 s, heartbeats every 20 ms: a stall of the test's loop on a busy machine
    # must not expire the member that heartbeats (CI saw a's own session end at 200 ms).
    async def go() -> None:
        c = make_coordinator()
        a, _ = await stable_group(c, 2, session_timeout_ms=1000)
        seen = []
        deadline = time.monotonic() + 10
        # b never heartbeats: its session ends, and a is told to rejoin.
        while E.rebalance_in_progress not in seen and time.monotonic() < deadline:
            seen.append(c.heartbeat("g", a.member_id, 1).error)
            await asyncio.sleep(0.02)
        assert E.rebalance_in_progress in seen
        assert E.unknown_member_id not in seen  # a's own session never ended
        described = c.describe_groups(["g"])[0]
        assert described.state == "PreparingRebalance"
        assert [m.member_id for m in described.members] == [a.member_id]
        rejoined = await join(c, member_id=a.member_id, session_timeout_ms=1000)
        assert (rejoined.generation_id, rejoined.leader) == (2, a.member_id)
        assert [m.member_id for m in rejoined.members] == [a.member_id]
        await c.close()

    run(go(), timeout=20)


def test_member_that_does_not_rejoin_is_dropped_at_rebalance_timeout() -> None:
    async def go() -> None:
        c = make_coordinator()
        _, b = await stable_group(c, 2, rebalance_timeout_ms=100)
        started = time.monotonic()
        # New metadata (say, a new subscription) forces a rebalance; the leader is gone.
        result = await join(
            c, member_id=b.member_id, rebalance_timeout_ms=100, protocols=[("range", b"new")]
        )
        assert time.monotonic() - started >= 0.09
        assert (result.generation_id, result.leader) == (2, b.member_id)  # leader moved
        assert [m.member_id for m in result.members] == [b.member_id]
        await c.close()

    run(go())


def test_member_that_does_not_sync_is_removed() -> None:
    async def go() -> None:
        c = make_coordinator()
        joins = [asyncio.ensure_future(join(c, rebalance_timeout_ms=150)) for _ in range(2)]
        a, b = await asyncio.gather(*joins)
        leader = a if a.member_id == a.leader else b
        follower = b if leader is a else a
        await c.sync_group("g", leader.member_id, 1, {})
        assert state(c) == "Stable"
        # The follower never sends SyncGroup. The leader behaves like a client: it
        # heartbeats until told to rebalance, then rejoins.
        while c.heartbeat("g", leader.member_id, 1).error == E.none:
            await asyncio.sleep(0.005)
        assert follower.member_id not in [m.member_id for m in c.describe_groups(["g"])[0].members]
        again = await join(c, member_id=leader.member_id, rebalance_timeout_ms=150)
        assert (again.generation_id, [m.member_id for m in again.members]) == (
            2,
            [leader.member_id],
        )
        await c.close()

    run(go())


def test_pending_member_expires() -> None:
    async def go() -> None:
        c = make_coordinator()
        pending = await join(c, require_known_member_id=True, session_timeout_ms=50)
        await asyncio.sleep(0.1)
        late = await join(c, member_id=pending.member_id, require_known_member_id=True)
        assert late.error == E.unknown_member_id
        await c.close()

    run(go())


# ------------------------------------------------------------------ initial delay (KIP-134)


def test_initial_delay_is_extended_while_members_keep_joining() -> None:
    async def go() -> None:
        c = make_coordinator(initial_rebalance_delay_ms=100)
        started = time.monotonic()
        first = asyncio.ensure_future(join(c, rebalance_timeout_ms=1000))
        await asyncio.sleep(0.06)
        second = asyncio.ensure_future(join(c, rebalance_timeout_ms=1000))
        results = await asyncio.gather(first, second)
        elapsed = time.monotonic() - started
        # The second member joined inside the first delay: one more delay follows.
        assert 0.19 <= elapsed < 0.5, elapsed
        assert {r.generation_id for r in results} == {1}
        assert len(results[0].members) == 2
        await c.close()

    run(go())


def test_initial_delay_without_new_members_and_cap_by_rebalance_timeout() -> None:
    async def go() -> None:
        c = make_coordinator(initial_rebalance_delay_ms=200)
        started = time.monotonic()
        await join(c, group_id="solo", rebalance_timeout_ms=2000)
        assert 0.19 <= time.monotonic() - started < 0.39  # one delay, not extended

        # Rebalance timeout 300: after the first 200 ms only 100 remain for the extension.
        started = time.monotonic()
        first = asyncio.ensure_future(join(c, group_id="capped", rebalance_timeout_ms=300))
        await asyncio.sleep(0.05)
        second = asyncio.ensure_future(join(c, group_id="capped", rebalance_timeout_ms=300))
        await asyncio.gather(first, second)
        assert 0.29 <= time.monotonic() - started < 0.39
        await c.close()

    run(go())


# ------------------------------------------------------------------ leave


def test_leave_triggers_rebalance_and_last_leave_empties_group() -> None:
    async def go() -> None:
        log = FakeLog()
        c = make_coordinator(log)
        a, b = await stable_group(c, 2)
        left = await c.leave_group("g", [(b.member_id, None), ("ghost", None)])
        assert left.error == E.none
        assert [m.error for m in left.members] == [E.none, E.unknown_member_id]
        assert state(c) == "PreparingRebalance"
        again = await join(c, member_id=a.member_id)
        assert (again.generation_id, len(again.members)) == (2, 1)
        await c.sync_group("g", a.member_id, 2, {})

        assert (await c.leave_group("g", [(a.member_id, None)])).members[0].error == E.none
        await asyncio.sleep(0.01)  # the join phase ends at once: nobody is left
        assert state(c) == "Empty"
        _, last_value = log.all_decoded()[-1]
        assert (last_value.generation, last_value.members, last_value.protocol) == (3, (), None)
        assert (await c.leave_group("nope", [("x", None)])).members[0].error == E.unknown_member_id
        await c.close()

    run(go())


def test_leave_during_join_answers_waiting_join() -> None:
    async def go() -> None:
        c = make_coordinator(initial_rebalance_delay_ms=200)
        waiting = asyncio.ensure_future(join(c))
        await asyncio.sleep(0.01)
        member_id = c.describe_groups(["g"])[0].members[0].member_id
        assert (await c.leave_group("g", [(member_id, None)])).members[0].error == E.none
        assert (await waiting).error == E.unknown_member_id
        await c.close()

    run(go())


# ------------------------------------------------------------------ static membership (KIP-345)


def test_static_member_rejoin_without_rebalance_and_fencing() -> None:
    async def go() -> None:
        log = FakeLog()
        c = make_coordinator(log)
        leader, follower = await stable_group(c, 2, instance_ids=["i0", "i1"])
        old_id = follower.member_id
        assert old_id.startswith("i1-")  # static ids derive from the instance id
        writes = log.calls

        rejoined = await join(c, group_instance_id="i1", client_id="c1")
        assert rejoined.error == E.none
        assert rejoined.member_id != old_id and rejoined.member_id.startswith("i1-")
        assert (rejoined.generation_id, rejoined.leader) == (1, leader.member_id)
        assert state(c) == "Stable"  # no rebalance
        assert log.calls == writes + 1  # the new member id is persisted
        _, value = log.all_decoded()[-1]
        assert rejoined.member_id in [m.member_id for m in value.members]

        # The old incarnation is fenced everywhere; the new one carries on.
        assert c.heartbeat("g", old_id, 1, "i1").error == E.fenced_instance_id
        assert (await c.sync_group("g", old_id, 1, {}, group_instance_id="i1")).error == (
            E.fenced_instance_id
        )
        assert (await join(c, member_id=old_id, group_instance_id="i1")).error == (
            E.fenced_instance_id
        )
        assert c.heartbeat("g", rejoined.member_id, 1, "i1").error == E.none
        synced = await c.sync_group("g", rejoined.member_id, 1, {}, group_instance_id="i1")
        assert synced.assignment == b"assign-1"  # keeps the old incarnation's assignment
        await c.close()

    run(go())


def test_static_leader_rejoin_keeps_old_leader_id_unless_skip_assignment() -> None:
    async def go() -> None:
        c = make_coordinator()
        leader, _ = await stable_group(c, 2, instance_ids=["i0", "i1"])
        old = await join(c, group_instance_id="i0", client_id="c0")
        assert old.leader == leader.member_id != old.member_id  # not told it leads
        new = await join(c, group_instance_id="i0", client_id="c0", supports_skip_assignment=True)
        assert (new.leader, new.skip_assignment, len(new.members)) == (new.member_id, True, 2)
        assert state(c) == "Stable"
        await c.close()

    run(go())


def test_static_rejoin_with_new_protocols_rebalances_and_absent_static_member_stays() -> None:
    async def go() -> None:
        c = make_coordinator()
        await stable_group(c, 2, instance_ids=["i0", "i1"], rebalance_timeout_ms=100)
        # i1 comes back supporting only roundrobin: the selected protocol must change.
        changed = await join(
            c, group_instance_id="i1", protocols=[PROTOCOLS[1]], rebalance_timeout_ms=100
        )
        assert changed.protocol_name == "roundrobin"
        # i0 never rejoins: static members keep their place through the rebalance.
        assert changed.generation_id == 2
        assert len(c.describe_groups(["g"])[0].members) == 2
        await c.close()

    run(go())


def test_admin_leave_by_instance_id() -> None:
    async def go() -> None:
        c = make_coordinator()
        await stable_group(c, 2, instance_ids=["i0", "i1"])
        left = await c.leave_group("g", [("", "i1"), ("", "unknown")])
        assert [m.error for m in left.members] == [E.none, E.unknown_member_id]
        assert len(c.describe_groups(["g"])[0].members) == 1
        await c.close()

    run(go())


# ------------------------------------------------------------------ failures and unloading


def test_assignment_store_failure_fails_sync_and_rebalances() -> None:
    async def go() -> None:
        log = FakeLog()
        c = make_coordinator(log)
        a = await join(c)
        log.fail_with = E.not_leader_or_follower
        synced = await c.sync_group("g", a.member_id, 1, {a.member_id: b"x"})
        assert synced.error == E.not_coordinator  # Kafka's storeGroup mapping
        assert c.describe_groups(["g"])[0].state in ("PreparingRebalance", "CompletingRebalance")
        await c.close()

    run(go())


def test_unload_answers_waiters_not_coordinator() -> None:
    async def go() -> None:
        c = make_coordinator(initial_rebalance_delay_ms=1000)
        waiting = asyncio.ensure_future(join(c))
        await asyncio.sleep(0.01)
        c.unload_partition(c.partition_for("g"))
        assert (await waiting).error == E.not_coordinator
        assert c.describe_groups(["g"])[0].error == E.not_coordinator
        assert c.owned_partitions() == frozenset(range(4)) - {c.partition_for("g")}
        await c.close()

    run(go())


def test_group_state_enum_is_exported() -> None:
    assert GroupState.STABLE.value == "Stable"


def test_static_rejoin_store_failure_reverts_to_old_member_id() -> None:
    async def go() -> None:
        log = FakeLog()
        c = make_coordinator(log)
        _, follower = await stable_group(c, 2, instance_ids=["i0", "i1"])
        log.fail_with = E.not_enough_replicas
        failed = await join(c, group_instance_id="i1", client_id="c1")
        assert (failed.error, failed.member_id) == (E.coordinator_not_available, "")
        assert c.heartbeat("g", follower.member_id, 1, "i1").error == E.none  # old id lives
        assert state(c) == "Stable"
        await c.close()

    run(go())


def test_cancelled_join_does_not_block_the_rebalance() -> None:
    async def go() -> None:
        c = make_coordinator(initial_rebalance_delay_ms=50)
        gone = asyncio.ensure_future(join(c, client_id="gone"))
        stays = asyncio.ensure_future(join(c, client_id="stays"))
        await asyncio.sleep(0.01)
        gone.cancel()  # the client disconnected while waiting
        result = await stays
        assert (result.error, result.generation_id) == (E.none, 1)
        await c.close()

    run(go())


def test_reloading_a_partition_answers_old_waiters() -> None:
    async def go() -> None:
        c = make_coordinator(initial_rebalance_delay_ms=1000)
        waiting = asyncio.ensure_future(join(c))
        await asyncio.sleep(0.01)
        c.load_partition(c.partition_for("g"), [])
        assert (await waiting).error == E.not_coordinator
        assert c.describe_groups(["g"])[0].state == "Dead"  # unknown after the reload
        await c.close()

    run(go())
