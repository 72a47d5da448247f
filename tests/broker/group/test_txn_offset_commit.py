"""Tests for transactional offset commits (KIP-98 TxnOffsetCommit, KIP-447): pending until
the marker, COMMIT/ABORT, ordering against OffsetCommit, loading with markers,
OffsetFetch require_stable, and deletion/expiry while a transaction is open."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tests.broker.group.helpers import FakeLog, make_coordinator, run, stable_group
from tierlog.broker.group import GroupCoordinator, OffsetCommitResult
from tierlog.broker.group.offsets_codec import OffsetCommitKey
from tierlog.protocol.errors import ErrorCode as E
from tierlog.records.header import NO_SEQUENCE, parse_header
from tierlog.util.clock import ManualClock

T1 = ("t", 1)
T2 = ("t", 2)
PID = 7000
EPOCH = 3
MINUTE = 60_000


async def txn_commit(
    c: GroupCoordinator,
    offsets: Mapping[tuple[str, int], int],
    *,
    group_id: str = "g",
    producer_id: int = PID,
    member_id: str = "",
    generation_id: int = -1,
    group_instance_id: str | None = None,
    metadata: str = "",
) -> OffsetCommitResult:
    return await c.txn_offset_commit(
        group_id,
        producer_id,
        EPOCH,
        member_id,
        generation_id,
        group_instance_id,
        {tp: (offset, -1, metadata) for tp, offset in offsets.items()},
    )


def committed(c: GroupCoordinator, tp: tuple[str, int] = T1, group_id: str = "g") -> int:
    return c.fetch_offsets(group_id, [tp]).partitions[tp].offset


def settle(c: GroupCoordinator, log: FakeLog, commit: bool, **kw: Any) -> None:
    """What WriteTxnMarkers does: append the marker, then tell the coordinator."""
    producer_id = kw.get("producer_id", PID)
    partition = c.partition_for(kw.get("group_id", "g"))
    log.marker(partition, producer_id, commit, EPOCH)
    c.complete_txn(partition, producer_id, commit)


def reload(log: FakeLog) -> GroupCoordinator:
    c = make_coordinator(FakeLog(), partitions=[])
    for p in range(4):
        c.load_partition(p, log.log_batches(p))
    return c


# ---------------------------------------------------------------- pending, commit, abort


def test_txn_offsets_are_written_as_one_transactional_batch_and_stay_pending() -> None:
    async def go() -> None:
        log = FakeLog()
        c = make_coordinator(log)
        result = await txn_commit(c, {T1: 10, T2: 20}, metadata="md")
        assert result.error == E.none and result.partitions == {T1: E.none, T2: E.none}
        partition = c.partition_for("g")
        (batch,) = log.batches[partition]
        header = parse_header(batch)
        assert header.is_transactional and not header.is_control
        assert (header.producer_id, header.producer_epoch) == (PID, EPOCH)
        assert header.base_sequence == NO_SEQUENCE and header.record_count == 2
        keys = [k for k, _ in log.decoded(partition)]
        assert keys == [OffsetCommitKey("g", "t", 1), OffsetCommitKey("g", "t", 2)]
        # Not visible before the marker, even for a group nobody has joined.
        assert committed(c, T1) == -1 and c.fetch_offsets("g").partitions == {}
        settle(c, log, commit=True)
        fetched = c.fetch_offsets("g", [T1, T2]).partitions
        assert (fetched[T1].offset, fetched[T1].metadata, fetched[T2].offset) == (10, "md", 20)
        await c.close()

    run(go())


def test_abort_drops_pending_offsets_and_keeps_the_committed_one() -> None:
    async def go() -> None:
        log = FakeLog()
        c = make_coordinator(log)
        await c.commit_offsets("g", "", -1, {T1: (5, -1, "")})
        await txn_commit(c, {T1: 10})
        settle(c, log, commit=False)
        assert committed(c, T1) == 5
        # The abort is final: a later COMMIT of the same producer applies nothing.
        settle(c, log, commit=True)
        assert committed(c, T1) == 5
        assert not c.fetch_offsets("g", [T1], require_stable=True).partitions[T1].error
        await c.close()

    run(go())


def test_complete_txn_touches_only_that_producer_and_partition() -> None:
    async def go() -> None:
        log = FakeLog()
        c = make_coordinator(log)
        other_group = next(
            g for g in ("h", "i", "j", "k") if c.partition_for(g) != c.partition_for("g")
        )
        await txn_commit(c, {T1: 10})
        await txn_commit(c, {T2: 20}, producer_id=PID + 1)
        await txn_commit(c, {T1: 30}, group_id=other_group)
        c.complete_txn(c.partition_for(other_group), PID + 1, True)  # nothing there
        assert committed(c, T2) == -1
        c.complete_txn(c.partition_for("g"), PID, True)
        assert (committed(c, T1), committed(c, T2)) == (10, -1)
        assert committed(c, T1, other_group) == -1  # its marker goes to its own partition
        c.complete_txn(c.partition_for(other_group), PID, True)
        assert committed(c, T1, other_group) == 30
        c.complete_txn(c.partition_for("g"), PID + 1, True)
        assert committed(c, T2) == 20
        c.complete_txn(99, PID, True)  # a partition not coordinated here: ignored
        await c.close()

    run(go())


def test_later_txn_commit_of_a_partition_replaces_the_earlier_one() -> None:
    async def go() -> None:
        log = FakeLog()
        c = make_coordinator(log)
        await txn_commit(c, {T1: 10})
        await txn_commit(c, {T1: 11, T2: 21})
        settle(c, log, commit=True)
        assert (committed(c, T1), committed(c, T2)) == (11, 21)
        await c.close()

    run(go())


# ---------------------------------------------------------------- ordering vs OffsetCommit


def test_offset_commit_appended_after_the_txn_commit_wins() -> None:
    async def go() -> None:
        log = FakeLog()
        c = make_coordinator(log)
        await txn_commit(c, {T1: 10, T2: 20})
        await c.commit_offsets("g", "", -1, {T1: (50, -1, "")})
        settle(c, log, commit=True)
        # T1's OffsetCommit was appended after the transaction's: it stays (Kafka compares
        # the log offsets); T2 had nothing later.
        assert (committed(c, T1), committed(c, T2)) == (50, 20)
        await c.close()

    run(go())


def test_txn_commit_appended_after_the_offset_commit_wins() -> None:
    async def go() -> None:
        log = FakeLog()
        c = make_coordinator(log)
        await c.commit_offsets("g", "", -1, {T1: (50, -1, "")})
        await txn_commit(c, {T1: 10})
        assert committed(c, T1) == 50  # the last committed one until the marker
        settle(c, log, commit=True)
        assert committed(c, T1) == 10
        await c.close()

    run(go())


# ---------------------------------------------------------------- validation


def test_member_checks_from_v3_and_unknown_groups() -> None:
    async def go() -> None:
        c = make_coordinator()
        a, _ = await stable_group(c, 2, instance_ids=["i0", None])
        ok = await txn_commit(c, {T1: 1}, member_id=a.member_id, generation_id=1)
        assert ok.error == E.none
        ok = await txn_commit(
            c, {T1: 1}, member_id=a.member_id, generation_id=1, group_instance_id="i0"
        )
        assert ok.error == E.none
        cases = [
            dict(member_id=a.member_id, generation_id=0),
            dict(member_id="ghost", generation_id=1),
            dict(member_id="ghost", generation_id=1, group_instance_id="i0"),
            dict(group_id="nobody", member_id="m", generation_id=2),
            dict(group_id="nobody", generation_id=0),
        ]
        expected = [
            E.illegal_generation,
            E.unknown_member_id,
            E.fenced_instance_id,
            E.unknown_member_id,
            E.unknown_member_id,
        ]
        for kw, error in zip(cases, expected, strict=True):
            result = await txn_commit(c, {T1: 2}, **kw)  # type: ignore[arg-type]
            assert result.error == error and result.partitions == {T1: error}, kw
        assert c.describe_groups(["nobody"])[0].state == "Dead"  # not created
        # v0-v2 carry no member: accepted even though the group has members (unlike a
        # simple OffsetCommit).
        assert (await txn_commit(c, {T1: 3})).error == E.none
        await c.close()

    run(go())


def test_coordinator_errors_and_append_failures() -> None:
    async def go() -> None:
        log = FakeLog()
        c = make_coordinator(log, partitions=[])
        assert (await txn_commit(c, {T1: 1})).partitions == {T1: E.not_coordinator}
        c.begin_loading(c.partition_for("g"))
        assert (await txn_commit(c, {T1: 1})).partitions == {T1: E.coordinator_load_in_progress}
        c.load_partition(c.partition_for("g"), [])
        assert (await txn_commit(c, {T1: 1}, group_id="")).error == E.invalid_group_id

        log.fail_with = E.producer_fenced  # the log fenced the producer's epoch
        result = await txn_commit(c, {T1: 1, T2: 2})
        assert result.partitions == {T1: E.producer_fenced, T2: E.producer_fenced}
        log.fail_with = E.not_leader_or_follower
        assert (await txn_commit(c, {T1: 1})).error == E.not_coordinator
        log.fail_with = None
        # Nothing of the failed commits is pending.
        fetched = c.fetch_offsets("g", [T1, T2], require_stable=True).partitions
        assert not fetched[T1].error and not fetched[T2].error
        c.complete_txn(c.partition_for("g"), PID, True)
        assert committed(c, T1) == -1

        big = await txn_commit(c, {T1: 1}, metadata="x" * 5000)
        assert big.partitions == {T1: E.offset_metadata_too_large}
        await c.close()

    run(go())


def test_fenced_commit_with_the_same_producer_id_keeps_the_pending_offset() -> None:
    async def go() -> None:
        log = FakeLog()
        c = make_coordinator(log)
        await txn_commit(c, {T1: 10})
        log.fail_with = E.invalid_producer_epoch  # a zombie of the same producer id
        assert (await txn_commit(c, {T1: 99, T2: 99})).error == E.invalid_producer_epoch
        log.fail_with = None
        fetched = c.fetch_offsets("g", [T1, T2], require_stable=True).partitions
        assert (fetched[T1].error, fetched[T2].error) == (E.unstable_offset_commit, E.none)
        settle(c, log, commit=True)
        assert (committed(c, T1), committed(c, T2)) == (10, -1)
        await c.close()

    run(go())


def test_guard_is_checked_just_before_the_append() -> None:
    async def go() -> None:
        log = FakeLog()
        c = make_coordinator(log)
        entries = {T1: (10, -1, "")}
        refused = await c.txn_offset_commit(
            "g", PID, EPOCH, "", -1, None, entries, guard=lambda: False
        )
        assert refused.partitions == {T1: E.invalid_txn_state}
        assert not log.batches[c.partition_for("g")]
        assert not c.fetch_offsets("g", [T1], require_stable=True).partitions[T1].error
        ok = await c.txn_offset_commit("g", PID, EPOCH, "", -1, None, entries, guard=lambda: True)
        assert ok.error == E.none and len(log.batches[c.partition_for("g")]) == 1
        await c.close()

    run(go())


# ---------------------------------------------------------------- OffsetFetch require_stable


def test_require_stable_reports_pending_partitions() -> None:
    async def go() -> None:
        log = FakeLog()
        c = make_coordinator(log)
        await c.commit_offsets("g", "", -1, {T1: (5, 2, "old"), T2: (6, -1, "")})
        await txn_commit(c, {T1: 10})
        stable = c.fetch_offsets("g", [T1, T2], require_stable=True)
        assert stable.error == E.none
        assert stable.partitions[T1].error == E.unstable_offset_commit
        assert stable.partitions[T1].offset == -1
        assert (stable.partitions[T2].error, stable.partitions[T2].offset) == (E.none, 6)
        every = c.fetch_offsets("g", None, require_stable=True).partitions
        assert every[T1].error == E.unstable_offset_commit and every[T2].offset == 6
        # Without require_stable: the last committed offset.
        plain = c.fetch_offsets("g", [T1]).partitions[T1]
        assert (plain.offset, plain.leader_epoch, plain.metadata, plain.error) == (5, 2, "old", 0)
        settle(c, log, commit=True)
        after = c.fetch_offsets("g", [T1], require_stable=True).partitions[T1]
        assert (after.offset, after.error) == (10, E.none)
        await c.close()

    run(go())


# ---------------------------------------------------------------- deletion and expiry


def test_open_transaction_keeps_the_group_from_deletion_and_expiry() -> None:
    async def go() -> None:
        log = FakeLog()
        clock = ManualClock()
        c = make_coordinator(log, clock=clock, offsets_retention_ms=MINUTE)
        await txn_commit(c, {T1: 10})
        assert [r.error for r in await c.delete_groups(["g"])] == [E.non_empty_group]
        clock.advance(2 * MINUTE)
        await c.cleanup_expired_offsets()
        assert c.describe_groups(["g"])[0].state == "Empty"  # still there
        settle(c, log, commit=True)
        assert committed(c, T1) == 10
        assert [r.error for r in await c.delete_groups(["g"])] == [E.none]
        await c.close()

    run(go())


# ---------------------------------------------------------------- loading


def test_load_applies_committed_drops_aborted_and_keeps_open_transactions() -> None:
    async def go() -> None:
        log = FakeLog()
        c = make_coordinator(log)
        await c.commit_offsets("g", "", -1, {T1: (1, -1, ""), T2: (2, -1, "")})
        await txn_commit(c, {T1: 10}, producer_id=1)  # committed
        await txn_commit(c, {T2: 20}, producer_id=2)  # aborted
        await txn_commit(c, {("u", 0): 30}, producer_id=3)  # still open
        await txn_commit(c, {T1: 40}, producer_id=4)  # older than the OffsetCommit below
        await c.commit_offsets("g", "", -1, {T1: (45, -1, "")})
        settle(c, log, commit=True, producer_id=1)
        settle(c, log, commit=False, producer_id=2)
        settle(c, log, commit=True, producer_id=4)
        before = c.fetch_offsets("g").partitions
        await c.close()

        fresh = reload(log)
        after = fresh.fetch_offsets("g").partitions
        assert after == before
        assert {tp: f.offset for tp, f in after.items()} == {T1: 45, T2: 2}
        stable = fresh.fetch_offsets("g", [("u", 0)], require_stable=True).partitions
        assert stable[("u", 0)].error == E.unstable_offset_commit
        # The open transaction's marker arrives after the load.
        settle(fresh, log, commit=True, producer_id=3)
        assert committed(fresh, ("u", 0)) == 30
        # Commits written after a load order after the loaded ones.
        await txn_commit(fresh, {T1: 60}, producer_id=5)
        settle(fresh, log, commit=True, producer_id=5)
        assert committed(fresh, T1) == 60
        await fresh.close()

    run(go())


def test_load_group_with_only_pending_txn_offsets_and_abort_after_load() -> None:
    async def go() -> None:
        log = FakeLog()
        c = make_coordinator(log)
        await txn_commit(c, {T1: 10}, group_id="fresh")
        await c.close()
        loaded = reload(log)
        assert loaded.describe_groups(["fresh"])[0].state == "Empty"
        assert [r.error for r in await loaded.delete_groups(["fresh"])] == [E.non_empty_group]
        settle(loaded, log, commit=False, group_id="fresh")
        assert committed(loaded, T1, "fresh") == -1
        # A second load sees the ABORT marker and drops the offsets there too.
        again = reload(log)
        assert again.describe_groups(["fresh"])[0].state == "Dead"
        await loaded.close()
        await again.close()

    run(go())
