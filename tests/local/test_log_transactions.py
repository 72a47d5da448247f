"""Log: transactions (KIP-98) — markers, the first unstable offset, the .txnindex written by
leader, follower and recovery alike, and the aborted transactions a fetch is told about."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tierlog.local.config import LogConfig
from tierlog.local.log import Log
from tierlog.local.producer_state import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    TransactionCoordinatorFencedError,
)
from tierlog.records.builder import Record, build_batch
from tierlog.records.errors import InvalidRecordError
from tierlog.records.txn_index_codec import AbortedTxn
from tierlog.util.clock import ManualClock

from .conftest import T0, LogFactory, assert_dense, crash, make_batch


class Producer:
    """A transactional producer's batches (sequences counted per producer)."""

    def __init__(self, pid: int, epoch: int = 0) -> None:
        self.pid, self.epoch, self.seq = pid, epoch, 0

    def batch(self, n: int = 1, *, txn: bool = True) -> bytes:
        records = [Record(b"k%d" % i, b"v", timestamp=T0) for i in range(n)]
        out = build_batch(
            records,
            producer_id=self.pid,
            producer_epoch=self.epoch,
            base_sequence=self.seq,
            transactional=txn,
        )
        self.seq += n
        return out


def entries(log: Log) -> list[list[AbortedTxn]]:
    return [seg.txn_index.entries for seg in log.segments]


def txn_files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.glob("*.txnindex"))}


def test_commit_and_abort(make_log: LogFactory) -> None:
    log = make_log()
    a, b = Producer(1), Producer(2)
    assert log.first_unstable_offset is None
    log.append(make_batch(2))  # 0-1, no producer
    assert log.append(a.batch(2)).first_offset == 2  # a's transaction: 2-3
    assert log.first_unstable_offset == 2
    log.append(b.batch())  # b's: 4
    info = log.append_marker(1, 0, 0, commit=True, leader_epoch=0)  # 5
    assert (info.first_offset, info.last_offset, info.record_count) == (5, 5, 1)
    assert info.batches[0].is_control and info.batches[0].is_transactional
    assert log.first_unstable_offset == 4  # b's transaction is still open
    assert entries(log) == [[]]  # a commit is not indexed
    assert not txn_files(log.directory)
    log.append_marker(2, 0, 0, commit=False, leader_epoch=0)  # 6
    assert log.first_unstable_offset is None
    assert entries(log) == [[AbortedTxn(2, 4, 6, 7)]]
    assert log.collect_aborted_transactions(0, 7) == [AbortedTxn(2, 4, 6, 7)]
    assert log.collect_aborted_transactions(0, 4) == []  # ends before b's started
    assert_dense(log)


def test_lso_in_the_entry_is_the_next_open_transaction(make_log: LogFactory) -> None:
    log = make_log()
    a, b = Producer(1), Producer(2)
    log.append(a.batch())  # 0
    log.append(b.batch())  # 1
    log.append_marker(2, 0, 0, commit=False, leader_epoch=0)  # 2: a's still open at 0
    assert entries(log) == [[AbortedTxn(2, 1, 2, 0)]]
    assert log.first_unstable_offset == 0


def test_marker_checks(make_log: LogFactory) -> None:
    log = make_log()
    a = Producer(1, epoch=3)
    log.append(a.batch())
    with pytest.raises(InvalidTxnStateError):
        log.append(a.batch(txn=False))
    with pytest.raises(InvalidProducerEpochError):
        log.append_marker(1, 2, 0, commit=True, leader_epoch=0)
    log.append_marker(1, 3, 5, commit=True, leader_epoch=0)
    with pytest.raises(TransactionCoordinatorFencedError):
        log.append_marker(1, 3, 4, commit=False, leader_epoch=0)
    assert log.log_end_offset == 2  # refused markers write nothing


def test_coordinator_appends_skip_sequences_but_track_transactions(make_log: LogFactory) -> None:
    log = make_log()
    offsets_commit = build_batch(
        [Record(b"group", b"offset", timestamp=T0)],
        producer_id=7,
        producer_epoch=1,
        base_sequence=-1,
        transactional=True,
    )
    with pytest.raises(InvalidRecordError):
        log.append(offsets_commit)  # from a client, sequence -1 is refused
    assert log.append(offsets_commit, coordinator=True).first_offset == 0
    assert log.append(offsets_commit, coordinator=True).first_offset == 1  # no dedup
    assert log.first_unstable_offset == 0
    log.append_marker(7, 1, 0, commit=True, leader_epoch=0)
    assert log.first_unstable_offset is None


def _transactional_history(log: Log) -> None:
    """Transactions spanning segments, aborted and committed, one left open."""
    a, b, c = Producer(1), Producer(2), Producer(3)
    log.append(a.batch(3))  # 0-2
    log.append(make_batch(1))  # 3
    log.append(b.batch())  # 4
    log.roll()
    log.append(c.batch(2))  # 5-6
    log.append_marker(1, 0, 0, commit=False, leader_epoch=0)  # 7: LSO 4 (b)
    log.append(a.batch())  # 8: a's next transaction
    log.append_marker(2, 0, 1, commit=True, leader_epoch=0)  # 9
    log.roll()
    log.append_marker(3, 0, 0, commit=False, leader_epoch=1)  # 10: LSO 8 (a)
    log.append(b.batch())  # 11
    log.append_marker(2, 0, 1, commit=False, leader_epoch=1)  # 12: LSO 8 (a)
    log.append(make_batch(2))  # 13-14; a's transaction from 8 stays open


EXPECTED = [
    [],
    [AbortedTxn(1, 0, 7, 4)],
    [AbortedTxn(3, 5, 10, 8), AbortedTxn(2, 11, 12, 8)],
]


def test_txnindex_across_segments_and_collect(make_log: LogFactory) -> None:
    log = make_log()
    _transactional_history(log)
    assert entries(log) == EXPECTED
    assert log.first_unstable_offset == 8
    # From the segment holding the fetch offset on, until an entry's LSO reaches the bound.
    both = [AbortedTxn(1, 0, 7, 4), AbortedTxn(3, 5, 10, 8)]
    assert log.collect_aborted_transactions(0, 8) == both  # 3's began at 5 < 8
    assert log.collect_aborted_transactions(5, 8) == both
    assert log.collect_aborted_transactions(0, 5) == [AbortedTxn(1, 0, 7, 4)]
    assert log.collect_aborted_transactions(5, 15) == [
        AbortedTxn(1, 0, 7, 4),
        AbortedTxn(3, 5, 10, 8),
        AbortedTxn(2, 11, 12, 8),
    ]
    assert log.collect_aborted_transactions(11, 15) == [AbortedTxn(2, 11, 12, 8)]
    # A transaction begun in the first segment whose marker is in a later one.
    assert log.collect_aborted_transactions(0, 3) == [AbortedTxn(1, 0, 7, 4)]


def test_recovery_rebuilds_txnindex_and_open_transactions(
    make_log: LogFactory, log_dir: Path
) -> None:
    log = make_log()
    _transactional_history(log)
    before = txn_files(log_dir)
    assert len(before) == 2
    log.flush()
    crash(log)
    for path in [*log_dir.glob("*.txnindex"), *log_dir.glob("*.snapshot")]:
        path.unlink()
    reopened = make_log(had_clean_shutdown=False, recovery_point=0)
    assert txn_files(log_dir) == before
    assert entries(reopened) == EXPECTED
    assert reopened.first_unstable_offset == 8
    assert dict(reopened.producer_state.ongoing_transactions) == {1: 8}


def test_recovery_of_the_tail_keeps_earlier_entries(make_log: LogFactory, log_dir: Path) -> None:
    """Only the segments from the recovery point on are re-indexed; the state there comes
    from a snapshot at or below them (later ones are dropped)."""
    log = make_log()
    _transactional_history(log)
    before = txn_files(log_dir)
    log.flush()
    crash(log)
    (log_dir / "00000000000000000010.txnindex").unlink()
    reopened = make_log(had_clean_shutdown=False, recovery_point=10)
    assert txn_files(log_dir) == before
    assert reopened.first_unstable_offset == 8


def test_clean_restart_keeps_open_transactions(make_log: LogFactory, log_dir: Path) -> None:
    log = make_log()
    _transactional_history(log)
    log.close()
    reopened = make_log(had_clean_shutdown=True)
    assert entries(reopened) == EXPECTED
    assert reopened.first_unstable_offset == 8
    with pytest.raises(InvalidTxnStateError):
        reopened.append(
            build_batch(
                [Record(b"k", b"v", timestamp=T0)],
                producer_id=1,
                producer_epoch=0,
                base_sequence=4,
            )
        )


def test_truncation_drops_entries_and_reopens_transactions(make_log: LogFactory) -> None:
    log = make_log()
    _transactional_history(log)
    log.truncate_to(12)  # the abort of b at 12 goes
    assert entries(log) == [[], [AbortedTxn(1, 0, 7, 4)], [AbortedTxn(3, 5, 10, 8)]]
    assert dict(log.producer_state.ongoing_transactions) == {1: 8, 2: 11}
    log.truncate_to(7)  # a's abort and everything after it go
    assert entries(log) == [[], []]
    assert dict(log.producer_state.ongoing_transactions) == {1: 0, 2: 4, 3: 5}
    assert log.first_unstable_offset == 0
    log.truncate_fully_and_start_at(100)
    assert entries(log) == [[]]
    assert log.first_unstable_offset is None
    assert not txn_files(log.directory)


def test_follower_replay_writes_the_leaders_txnindex_bytes(
    make_log: LogFactory, tmp_path: Path
) -> None:
    leader = make_log()
    _transactional_history(leader)
    follower = make_log(tmp_path / "follower-0")
    for n, segment in enumerate(leader.segments):
        if n:
            follower.roll()
        follower.append_as_follower(segment.path.read_bytes())
    assert [s.base_offset for s in follower.segments] == [s.base_offset for s in leader.segments]
    assert txn_files(follower.directory) == txn_files(leader.directory)
    assert follower.first_unstable_offset == leader.first_unstable_offset == 8
    # All in one fetch too: the same entries, batch after batch.
    single = make_log(tmp_path / "single-0", segment_bytes=1 << 20)
    single.append_as_follower(b"".join(s.path.read_bytes() for s in leader.segments))
    assert single.active_segment.txn_index.entries == [e for seg in EXPECTED for e in seg]


def test_append_marker_timestamps_and_epochs(make_log: LogFactory) -> None:
    log = make_log()
    a = Producer(1)
    log.append(a.batch())
    info = log.append_marker(1, 0, 0, commit=True, leader_epoch=4, timestamp_ms=T0 + 5)
    assert info.max_timestamp == T0 + 5
    assert info.batches[0].partition_leader_epoch == 4
    assert log.leader_epoch_cache.latest_epoch == 4


def open_txn_indexes() -> list[str]:
    """The .txnindex files this process holds a descriptor on."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.endswith(".txnindex"):
                found.append(target)
    return found


def test_txnindex_files_hold_no_descriptor(make_log: LogFactory, log_dir: Path) -> None:
    """Issue 20, item 8: a descriptor per file adds up over thousands of partitions; the
    entries are in memory and the file is opened for each write only."""
    log = make_log()
    _transactional_history(log)
    assert [len(s.txn_index) > 0 for s in log.segments] == [False, True, True]
    assert open_txn_indexes() == []
    log.flush()
    crash(log)
    (log_dir / "00000000000000000005.txnindex").unlink()
    reopened = make_log(had_clean_shutdown=False, recovery_point=0)
    assert open_txn_indexes() == []
    assert entries(reopened) == EXPECTED
    reopened.truncate_to(12)  # the active segment's file is cut, the others untouched
    assert entries(reopened) == [[], [AbortedTxn(1, 0, 7, 4)], [AbortedTxn(3, 5, 10, 8)]]


# -- a model of the rules, against leader, follower and recovery ---------------------------

_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("data"), st.integers(1, 3), st.integers(1, 3)),
        st.tuples(st.just("marker"), st.integers(1, 3), st.booleans()),
        st.tuples(st.just("plain"), st.just(0), st.integers(1, 2)),
        st.tuples(st.just("roll"), st.just(0), st.just(0)),
    ),
    max_size=30,
)


@settings(max_examples=40, deadline=None)
@given(ops=_OPS)
def test_leader_follower_and_recovery_agree_with_the_model(
    ops: list[tuple[str, int, object]],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        config = LogConfig()
        leader = Log(root / "leader-0", config, clock=ManualClock(T0))
        producers = {pid: Producer(pid) for pid in (1, 2, 3)}
        open_txns: dict[int, int] = {}  # the model: pid -> first offset, in opening order
        expected: list[AbortedTxn] = []
        for kind, pid, arg in ops:
            end = leader.log_end_offset
            if kind == "data":
                leader.append(producers[pid].batch(int(arg)))  # type: ignore[call-overload]
                open_txns.setdefault(pid, end)
            elif kind == "marker":
                leader.append_marker(pid, 0, 0, commit=bool(arg), leader_epoch=0)
                first = open_txns.pop(pid, None)
                if first is not None and not arg:
                    lso = min(open_txns.values(), default=end + 1)
                    expected.append(AbortedTxn(pid, first, end, lso))
            elif kind == "plain":
                leader.append(make_batch(int(arg)))  # type: ignore[call-overload]
            else:
                leader.roll()
            assert leader.first_unstable_offset == min(open_txns.values(), default=None)
        assert [e for seg in entries(leader) for e in seg] == expected
        assert leader.collect_aborted_transactions(0, leader.log_end_offset + 1) == expected
        leader.flush()

        follower = Log(root / "follower-0", config, clock=ManualClock(T0))
        for n, segment in enumerate(leader.segments):
            if n:
                follower.roll(segment.base_offset)
            if segment.size:
                follower.append_as_follower(segment.path.read_bytes())
        assert txn_files(follower.directory) == txn_files(leader.directory)
        assert dict(follower.producer_state.ongoing_transactions) == open_txns
        follower.close()

        crash(leader)
        for path in [*leader.directory.glob("*.txnindex"), *leader.directory.glob("*.snapshot")]:
            path.unlink()
        recovered = Log(leader.directory, config, clock=ManualClock(T0), had_clean_shutdown=False)
        assert [e for seg in entries(recovered) for e in seg] == expected
        assert dict(recovered.producer_state.ongoing_transactions) == open_txns
        recovered.close()


@settings(max_examples=40, deadline=None)
@given(ops=_OPS, cut=st.floats(0, 1))
def test_truncation_leaves_what_a_replay_of_the_rest_gives(
    ops: list[tuple[str, int, object]], cut: float
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        config = LogConfig()
        leader = Log(root / "leader-0", config, clock=ManualClock(T0))
        producers = {pid: Producer(pid) for pid in (1, 2, 3)}
        for kind, pid, arg in ops:
            if kind == "data":
                leader.append(producers[pid].batch(int(arg)))  # type: ignore[call-overload]
            elif kind == "marker":
                leader.append_marker(pid, 0, 0, commit=bool(arg), leader_epoch=0)
            elif kind == "plain":
                leader.append(make_batch(int(arg)))  # type: ignore[call-overload]
            else:
                leader.roll()
        leader.truncate_to(int(leader.log_end_offset * cut))
        replayed = Log(root / "replayed-0", config, clock=ManualClock(T0))
        for n, segment in enumerate(leader.segments):
            if n:
                replayed.roll(segment.base_offset)
            if segment.size:
                replayed.append_as_follower(segment.path.read_bytes())
        assert entries(replayed) == entries(leader)
        assert dict(replayed.producer_state.ongoing_transactions) == dict(
            leader.producer_state.ongoing_transactions
        )
        assert replayed.first_unstable_offset == leader.first_unstable_offset
        replayed.close()
        leader.close()
