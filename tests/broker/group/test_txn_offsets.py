"""Tests for ``PendingTxnOffsets`` and how ``GroupMetadata`` settles it."""

from __future__ import annotations

from tierlog.broker.group.group import GroupMetadata
from tierlog.broker.group.offsets_codec import OffsetCommitValue
from tierlog.broker.group.txn_offsets import CommitRecord, PendingTxnOffsets

T1 = ("t", 1)
T2 = ("t", 2)


def rec(offset: int, order: int) -> CommitRecord:
    return CommitRecord(OffsetCommitValue(offset, -1, "", 0), order)


def test_prepare_fail_restores_what_it_replaced() -> None:
    pending = PendingTxnOffsets()
    assert not pending
    first = {T1: rec(1, 1)}
    assert pending.prepare(7, first) == {}
    second = {T1: rec(2, 2), T2: rec(3, 2)}
    replaced = pending.prepare(7, second)
    assert replaced == first
    assert pending.has_partition(T2) and not pending.has_partition(("u", 0))
    pending.fail(7, second, replaced)
    assert pending.get(7) == first
    pending.fail(7, first, {})
    assert not pending and list(pending.producers()) == []
    pending.fail(7, first, {})  # nothing left: no error


def test_fail_leaves_an_entry_a_later_commit_replaced() -> None:
    pending = PendingTxnOffsets()
    a = {T1: rec(1, 1)}
    pending.prepare(7, a)
    b = {T1: rec(2, 2)}
    pending.prepare(7, b)
    pending.fail(7, a, {})  # a's append failed after b replaced it
    assert pending.get(7) == b


def test_loaded_pending_and_pop() -> None:
    pending = PendingTxnOffsets({1: {T1: rec(1, 5)}, 2: {}})
    assert list(pending.producers()) == [1]
    assert pending.pop(1) == {T1: rec(1, 5)}
    assert pending.pop(1) == {} and not pending


def test_group_complete_txn_orders_by_log_position() -> None:
    group = GroupMetadata("g", 0)
    group.apply_offset(T1, rec(50, 10).value, 10)
    group.pending_txn_offsets.prepare(7, {T1: rec(5, 9), T2: rec(6, 9)})
    assert group.has_offsets()
    assert group.complete_txn(7, commit=True) == 1  # T1's current one is newer
    assert (group.offsets[T1].offset, group.offsets[T2].offset) == (50, 6)
    group.pending_txn_offsets.prepare(8, {T1: rec(70, 11)})
    assert group.complete_txn(8, commit=False) == 0
    assert group.offsets[T1].offset == 50 and not group.pending_txn_offsets
    # An offset removed (expired, deleted) no longer blocks an older pending one.
    del group.offsets[T1]
    group.pending_txn_offsets.prepare(9, {T1: rec(1, 3)})
    assert group.complete_txn(9, commit=True) == 1 and group.offsets[T1].offset == 1
