"""Tests for persistence through ``__consumer_offsets``: what is appended, and what a
fresh coordinator restores from it."""

from __future__ import annotations

import asyncio

from tests.broker.group.helpers import FakeLog, join, make_coordinator, run, stable_group
from tierlog.broker.group import GroupCoordinator
from tierlog.broker.group.offsets_codec import (
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
)
from tierlog.protocol.errors import ErrorCode as E
from tierlog.records.builder import Record, build_batch
from tierlog.records.header import parse_header
from tierlog.records.reader import decode_batch
from tierlog.util.clock import ManualClock

T1 = ("t", 1)


def reload(log: FakeLog) -> GroupCoordinator:
    """A fresh coordinator that loads every partition from ``log``."""
    c = make_coordinator(FakeLog(), partitions=[])
    for p in range(4):
        c.load_partition(p, log.log_batches(p))
    return c


def test_appended_records_decode_with_kafka_formats() -> None:
    async def go() -> None:
        log = FakeLog()
        clock = ManualClock()
        c = make_coordinator(log, clock=clock)
        leader, _ = await stable_group(c, 2, instance_ids=["i0", None])
        await c.commit_offsets("g", leader.member_id, 1, {T1: (42, 7, "meta")})

        partition = c.partition_for("g")
        assert set(log.batches) == {partition}  # everything lands on the group's partition
        for batch in log.batches[partition]:
            header = parse_header(batch)
            assert header.magic == 2 and not header.is_transactional
        (gkey, gvalue), (okey, ovalue) = log.decoded(partition)
        assert gkey == GroupMetadataKey("g")
        assert (gvalue.protocol_type, gvalue.generation, gvalue.protocol) == (
            "consumer",
            1,
            "range",
        )
        assert gvalue.leader == leader.member_id
        assert gvalue.current_state_timestamp == clock.milliseconds()
        first = gvalue.members[0]
        assert (first.member_id, first.group_instance_id, first.client_id) == (
            leader.member_id,
            "i0",
            "c0",
        )
        assert (first.session_timeout, first.rebalance_timeout) == (1000, 1000)
        assert (first.subscription, first.assignment) == (b"range-meta", b"assign-0")
        assert gvalue.members[1].group_instance_id is None
        assert okey == OffsetCommitKey("g", "t", 1)
        assert ovalue == OffsetCommitValue(42, 7, "meta", clock.milliseconds())
        await c.close()

    run(go())


def test_fresh_coordinator_restores_stable_group_and_offsets() -> None:
    async def go() -> None:
        log = FakeLog()
        c = make_coordinator(log)
        a, b = await stable_group(c, 2)
        await c.commit_offsets("g", a.member_id, 1, {T1: (42, 7, "meta")})
        await c.commit_offsets("g", a.member_id, 1, {T1: (43, 7, "later")})  # last wins
        await c.commit_offsets("simple", "", -1, {("s", 0): (5, -1, "")})
        await c.close()

        fresh = reload(log)
        offset = fresh.fetch_offsets("g", [T1]).partitions[T1]
        assert (offset.offset, offset.leader_epoch, offset.metadata) == (43, 7, "later")
        assert fresh.fetch_offsets("simple").partitions[("s", 0)].offset == 5
        described = fresh.describe_groups(["g"])[0]
        assert (described.state, described.protocol) == ("Stable", "range")
        assert [m.assignment for m in described.members] == [b"assign-0", b"assign-1"]
        # Members carry on with their generation; no rejoin needed (Kafka's loadGroup).
        assert fresh.heartbeat("g", a.member_id, 1).error == E.none
        synced = await fresh.sync_group("g", b.member_id, 1, {})
        assert synced.assignment == b"assign-1"
        assert (await fresh.commit_offsets("g", b.member_id, 1, {T1: (50, -1, "")})).error == 0
        # The next rebalance continues the generation sequence.
        rejoin = asyncio.ensure_future(
            join(fresh, member_id=a.member_id, protocols=[("range", b"changed")])
        )
        await asyncio.sleep(0)
        assert (await join(fresh, member_id=b.member_id)).generation_id == 2
        assert (await rejoin).generation_id == 2
        await fresh.close()

    run(go())


def test_restored_members_that_never_return_expire_and_group_empties() -> None:
    async def go() -> None:
        log = FakeLog()
        c = make_coordinator(log)
        await stable_group(c, 2, session_timeout_ms=50)
        await c.close()

        fresh = reload(log)
        await asyncio.sleep(0.15)  # nobody heartbeats after the failover
        described = fresh.describe_groups(["g"])[0]
        assert (described.state, described.members) == ("Empty", ())
        rejoined = await join(fresh)
        assert rejoined.generation_id == 3  # 1 restored, 2 when it emptied, 3 now
        await fresh.close()

    run(go())


def test_empty_group_comes_back_empty_with_its_generation() -> None:
    async def go() -> None:
        log = FakeLog()
        c = make_coordinator(log)
        (a,) = await stable_group(c, 1)
        await c.commit_offsets("g", a.member_id, 1, {T1: (3, -1, "")})
        await c.leave_group("g", [(a.member_id, None)])
        await asyncio.sleep(0.01)
        await c.close()

        fresh = reload(log)
        assert fresh.describe_groups(["g"])[0].state == "Empty"
        assert fresh.fetch_offsets("g", [T1]).partitions[T1].offset == 3
        listed = fresh.list_groups().groups
        assert [(g.group_id, g.protocol_type) for g in listed] == [("g", "consumer")]
        rejoined = await join(fresh)
        assert rejoined.generation_id == 3  # continues after the stored generation 2
        await fresh.close()

    run(go())


def test_tombstones_delete_on_load() -> None:
    async def go() -> None:
        log = FakeLog()
        c = make_coordinator(log)
        await c.commit_offsets("gone", "", -1, {T1: (1, -1, "")})
        await c.commit_offsets("kept", "", -1, {T1: (2, -1, "")})
        await c.delete_groups(["gone"])
        await c.close()

        fresh = reload(log)
        assert [g.group_id for g in fresh.list_groups().groups] == ["kept"]
        assert fresh.fetch_offsets("gone", [T1]).partitions[T1].offset == -1
        await fresh.close()

    run(go())


def test_load_skips_foreign_and_broken_records() -> None:
    async def go() -> None:
        c = make_coordinator(partitions=[])
        good_key = bytes.fromhex("0001 0001 67 0001 74 00000001".replace(" ", ""))
        good_value = bytes.fromhex(
            "0003 000000000000000b ffffffff 0000 00000000000003e8".replace(" ", "")
        )
        records = [
            Record(bytes.fromhex("0003 0001 67"), b"kip-848 stuff"),
            Record(good_key, b"\x00\x09garbage"),
            Record(None, b"no key"),
            Record(good_key, good_value),
        ]
        batches = [decode_batch(build_batch(records))]
        assert c.load_partition(c.partition_for("g"), batches) == 1
        assert c.fetch_offsets("g", [T1]).partitions[T1].offset == 11
        await c.close()

    run(go())


def test_records_written_by_hand_load_like_kafkas() -> None:
    # A batch as Kafka would write it for an offset commit (key v1, value v3).
    async def go() -> None:
        key = bytes.fromhex("0001 0001 67 0001 74 00000001".replace(" ", ""))
        value = bytes.fromhex(
            "0003 0000000000000064 00000002 0002 6d64 00000000000003e8".replace(" ", "")
        )
        batch = build_batch([Record(key, value)], base_timestamp=1000)
        log = FakeLog()
        log.batches[make_coordinator(partitions=[]).partition_for("g")].append(batch)
        fresh = reload(log)
        offset = fresh.fetch_offsets("g", [T1]).partitions[T1]
        assert (offset.offset, offset.leader_epoch, offset.metadata) == (100, 2, "md")
        await fresh.close()

    run(go())
