"""TransactionIndex (a segment's ``.txnindex``) and how segments carry it."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from tierlog.compaction.segment_cleaner import CleanJob, SegmentFile, clean
from tierlog.local import segment_swap
from tierlog.local.log import Log
from tierlog.local.txn_index import TransactionIndex, txn_index_path
from tierlog.records.builder import Record, build_batch
from tierlog.records.txn_index_codec import AbortedTxn, decode_entries, encode_entries
from tierlog.util.clock import ManualClock

from .conftest import T0, LogFactory, make_batch

A = AbortedTxn(1, 0, 5, 6)
B = AbortedTxn(2, 3, 9, 10)
C = AbortedTxn(3, 10, 20, 21)


def test_no_file_until_the_first_entry(tmp_path: Path) -> None:
    path = txn_index_path(tmp_path, 42)
    assert path.name == "00000000000000000042.txnindex"
    index = TransactionIndex(path)
    assert index.entries == [] and not path.exists()
    index.append(A)
    index.append(B)
    index.flush()
    assert decode_entries(path.read_bytes()) == [A, B]
    index.close()
    assert TransactionIndex(path).entries == [A, B]


def test_entries_must_be_in_marker_order(tmp_path: Path) -> None:
    index = TransactionIndex(tmp_path / "0.txnindex")
    index.append(B)
    with pytest.raises(ValueError):
        index.append(A)
    assert index.entries == [B]


def test_truncate_drops_entries_ending_at_or_after_the_offset(tmp_path: Path) -> None:
    path = tmp_path / "0.txnindex"
    index = TransactionIndex(path)
    for txn in (A, B, C):
        index.append(txn)
    index.truncate_to(9)  # B's marker is at 9: it goes
    assert index.entries == [A]
    assert path.read_bytes() == encode_entries([A])
    index.append(C)  # appends continue after the kept entries
    assert decode_entries(path.read_bytes()) == [A, C]
    index.close()


def test_collect_stops_at_an_entry_whose_lso_reaches_the_upper_bound(tmp_path: Path) -> None:
    index = TransactionIndex(tmp_path / "0.txnindex")
    for txn in (A, B, C):
        index.append(txn)
    assert index.collect(0, 4) == ([A], True)  # A's LSO 6 >= 4: complete
    assert index.collect(6, 10) == ([B], True)  # A ended before 6; B overlaps
    assert index.collect(0, 100) == ([A, B, C], False)
    assert index.collect(21, 100) == ([], False)


def test_a_torn_file_is_reported_corrupt_and_read_as_empty(tmp_path: Path) -> None:
    path = tmp_path / "0.txnindex"
    path.write_bytes(encode_entries([A]) + b"\x00" * 5)
    index = TransactionIndex(path)
    assert index.corrupt and index.entries == []
    index.reset()
    assert not path.exists()


def test_rename_and_delete(tmp_path: Path) -> None:
    path = tmp_path / "0.txnindex"
    index = TransactionIndex(path)
    index.rename(tmp_path / "0.txnindex.deleted")  # no file yet: just the name
    index.append(A)
    assert (tmp_path / "0.txnindex.deleted").exists() and not path.exists()
    index.delete()
    assert list(tmp_path.iterdir()) == []


# -- with segments ------------------------------------------------------------------------


def test_segment_files_include_the_txnindex(make_log: LogFactory, log_dir: Path) -> None:
    log = make_log()
    log.append(make_batch(3))
    seg = log.active_segment
    assert not seg.txn_index.path.exists()  # no aborts: no file (as in Kafka)
    seg.txn_index.append(AbortedTxn(1, 0, 1, 2))
    seg.rename_for_delete()
    assert seg.txn_index.path.name.endswith(".txnindex.deleted")
    assert seg.txn_index.path.exists()
    seg.delete()
    assert not list(log_dir.glob("*.txnindex*"))
    log.closed = True


def test_segment_truncation_truncates_its_txnindex(make_log: LogFactory) -> None:
    log = make_log()
    for _ in range(4):
        log.append(make_batch(1))
    seg = log.active_segment
    seg.txn_index.append(AbortedTxn(1, 0, 1, 2))
    seg.txn_index.append(AbortedTxn(2, 0, 3, 4))
    seg.truncate_to(3)
    assert seg.txn_index.entries == [AbortedTxn(1, 0, 1, 2)]


def test_retention_deletes_the_txnindex(make_log: LogFactory, log_dir: Path) -> None:
    log = make_log()
    log.append(make_batch(2))
    log.active_segment.txn_index.append(AbortedTxn(1, 0, 1, 2))
    log.roll()
    log.append(make_batch(1))
    assert (log_dir / "00000000000000000000.txnindex").exists()
    log.advance_log_start_offset(2)
    assert log.delete_old_segments() == 1
    assert not (log_dir / "00000000000000000000.txnindex").exists()


def _compactable(make_log: LogFactory) -> tuple[Log, CleanJob]:
    log = make_log(segment_bytes=1 << 20)
    for i in range(20):
        log.append(build_batch([Record(b"k%d" % (i % 3), b"v%d" % i, timestamp=1)]))
    log.roll()
    for i in range(5):
        log.append(build_batch([Record(b"k%d" % (i % 3), b"w%d" % i, timestamp=1)]))
    log.roll()
    log.append(build_batch([Record(b"tail", b"x", timestamp=1)]))
    job = CleanJob(
        name=log.name,
        segments=tuple(
            SegmentFile(s.base_offset, str(s.path), s.size, nxt.base_offset)
            for s, nxt in itertools.pairwise(log.segments)
        ),
        log_start_offset=0,
        first_dirty_offset=0,
        now_ms=1,
        delete_retention_ms=0,
        segment_bytes=1 << 20,
        index_interval_bytes=64,
        max_index_size=4096,
        map_memory_bytes=1 << 16,
    )
    return log, job


def test_swap_carries_the_cleaned_txnindex(make_log: LogFactory, log_dir: Path) -> None:
    log, job = _compactable(make_log)
    log.segments[0].txn_index.append(AbortedTxn(7, 1, 2, 3))
    log.segments[1].txn_index.append(AbortedTxn(8, 20, 21, 22))
    result = clean(job)
    group = result.groups[0]
    kept = [AbortedTxn(8, 20, 21, 22)]
    (log_dir / ("00000000000000000000.txnindex" + segment_swap.CLEANED_SUFFIX)).write_bytes(
        encode_entries(kept)
    )
    replaced = [s for s in log.segments if s.base_offset in {f.base_offset for f in group.replaced}]
    new = log.replace_segments(replaced, [s.size for s in group.replaced])
    assert new.txn_index.entries == kept
    names = sorted(p.name for p in log_dir.iterdir() if "txnindex" in p.name)
    assert names == ["00000000000000000000.txnindex"]


def test_an_interrupted_swap_promotes_the_txnindex(make_log: LogFactory, log_dir: Path) -> None:
    log, job = _compactable(make_log)
    log.segments[1].txn_index.append(AbortedTxn(8, 20, 21, 22))
    log.close()
    result = clean(job)
    assert result.groups
    kept = [AbortedTxn(8, 20, 21, 22)]
    (log_dir / "00000000000000000000.txnindex.cleaned").write_bytes(encode_entries(kept))
    # Commit point reached, then a crash: every .cleaned renamed to .swap.
    for path in list(log_dir.iterdir()):
        if path.name.endswith(".cleaned"):
            path.rename(path.with_name(path.name.removesuffix(".cleaned") + ".swap"))
    reopened = Log(log_dir, log.config, clock=ManualClock(), had_clean_shutdown=True)
    try:
        assert reopened.segments[0].txn_index.entries == kept
        names = sorted(p.name for p in log_dir.iterdir() if "txnindex" in p.name)
        assert names == ["00000000000000000000.txnindex"]
    finally:
        reopened.close()


def test_swap_without_a_cleaned_txnindex_keeps_the_replaced_entries(
    make_log: LogFactory, log_dir: Path
) -> None:
    log, job = _compactable(make_log)
    first, second = AbortedTxn(7, 1, 2, 3), AbortedTxn(8, 20, 21, 22)
    log.segments[0].txn_index.append(first)
    log.segments[1].txn_index.append(second)
    group = clean(job).groups[0]
    replaced = [s for s in log.segments if s.base_offset in {f.base_offset for f in group.replaced}]
    new = log.replace_segments(replaced, [s.size for s in group.replaced])
    assert new.txn_index.entries == [first, second][: len(replaced)]
    assert len(replaced) == 2
    names = sorted(p.name for p in log_dir.iterdir() if "txnindex" in p.name)
    assert names == ["00000000000000000000.txnindex"]


def test_a_torn_txnindex_is_rebuilt_by_recovery(make_log: LogFactory, log_dir: Path) -> None:
    log = make_log()
    log.append(
        build_batch(
            [Record(b"k", b"v", timestamp=T0)],
            producer_id=5,
            producer_epoch=0,
            base_sequence=0,
            transactional=True,
        )
    )
    log.append_marker(5, 0, 0, commit=False, leader_epoch=0)
    log.close()
    path = log_dir / "00000000000000000000.txnindex"
    good = path.read_bytes()
    assert decode_entries(good) == [AbortedTxn(5, 0, 1, 2)]
    path.write_bytes(good + b"\x00\x01")  # a torn second entry
    reopened = make_log(had_clean_shutdown=True)
    assert reopened.segments[0].txn_index.entries == [AbortedTxn(5, 0, 1, 2)]
    assert path.read_bytes() == good
