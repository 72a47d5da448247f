"""RemoteLogManager and KIP-98: each segment's ``.txnindex`` uploaded beside it and in the
manifest, deleted with it, served back by ``aborted_transactions`` with Kafka's stop rule;
segments at or above the last stable offset stay local. On memory://, file:// and S3
(moto's server)."""

from __future__ import annotations

import asyncio
import dataclasses
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.remote.conftest import PARTITION, TOPIC, S3Bucket
from tests.remote.test_remote_log_manager import BATCH_MS, BATCHES, Harness, make_log
from tests.txn_data import append_transactions
from tierlog.local.config import LogConfig
from tierlog.local.log import Log
from tierlog.records.txn_index_codec import TXN_INDEX_SUFFIX, AbortedTxn, encode_entries
from tierlog.remote import manifest as mf
from tierlog.remote.api import IndexKind, RemoteSegment, RemoteStorageError
from tierlog.remote.fsspec_storage import FsspecRemoteStore
from tierlog.remote.remote_txn_index import RemoteTxnIndexes
from tierlog.util.clock import ManualClock


@pytest.fixture(params=["memory", "file", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[FsspecRemoteStore]:
    if request.param == "memory":
        root = f"memory://tierlog-txn-{uuid.uuid4().hex}"
        yield FsspecRemoteStore(root, retries=0)
        import fsspec

        fs = fsspec.filesystem("memory")
        if fs.exists(root):
            fs.rm(root, recursive=True)
    elif request.param == "file":
        yield FsspecRemoteStore(f"file://{tmp_path}/remote", retries=0)
    else:
        bucket: S3Bucket = request.getfixturevalue("s3_bucket")
        yield FsspecRemoteStore(bucket.url, bucket.options(), retries=0)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_700_000_000_000)


def write_index(log: Log, n: int, entries: list[AbortedTxn]) -> bytes:
    data = encode_entries(entries)
    log.segments[n].path.with_suffix(TXN_INDEX_SUFFIX).write_bytes(data)
    return data


def txn(pid: int, first: int, last: int, lso: int) -> AbortedTxn:
    return AbortedTxn(pid, first, last, lso)


def test_txn_index_is_uploaded_beside_its_segment_and_named_in_the_manifest(
    store: FsspecRemoteStore, tmp_path: Path, clock: ManualClock
) -> None:
    log = make_log(tmp_path, clock)
    data = write_index(log, 1, [txn(7, 3, 9, 10), txn(8, 5, 11, 12)])
    # An empty index (Kafka leaves one per segment) is as good as none: not uploaded.
    log.segments[2].path.with_suffix(TXN_INDEX_SUFFIX).write_bytes(b"")
    h = Harness(store, log, tmp_path, clock)
    try:
        h.cycle()
        committed = h.committed()
        assert len(committed) == len(log.segments) - 1
        assert [s.has_txn_index for s in committed] == [n == 1 for n in range(len(committed))]
        with_index = committed[1]
        # In the segment's one object (issue 24), after the log and its other indexes.
        part = mf.segment_part(with_index, mf.TXN_INDEX_KIND)
        name = part.object
        assert name == f"{with_index.base_offset:020d}-{with_index.segment_id}.segment"
        assert part.offset > 0 and part.size == len(data)
        assert name in h.objects()
        assert store.fetch_index(with_index, IndexKind.TRANSACTION) == data
        # The orphan scan of the first cycle left it alone, and so do later scans.
        h.state.cycles = 0
        h.cycle()
        assert name in h.objects() and h.manager.orphans_removed == 0
        assert [s.has_txn_index for s in h.committed()].count(True) == 1
    finally:
        h.close()
        log.close()


def test_a_corrupt_txn_index_stops_the_offload_before_its_segment(
    store: FsspecRemoteStore, tmp_path: Path, clock: ManualClock
) -> None:
    log = make_log(tmp_path, clock)
    log.segments[2].path.with_suffix(TXN_INDEX_SUFFIX).write_bytes(b"\0" * 33)
    h = Harness(store, log, tmp_path, clock)
    try:
        h.cycle()
        assert [s.base_offset for s in h.committed()] == [s.base_offset for s in log.segments[:2]]
        assert h.state.problem is not None and "txnindex" in h.state.problem
    finally:
        h.close()
        log.close()


def test_remote_retention_deletes_the_txn_index_with_its_segment(
    store: FsspecRemoteStore, tmp_path: Path, clock: ManualClock
) -> None:
    log = make_log(tmp_path, clock, **{"retention.ms": 20 * BATCH_MS, "local.retention.bytes": 0})
    write_index(log, 0, [txn(7, 1, 2, 3)])
    write_index(log, len(log.segments) - 2, [txn(7, 150, 160, 161)])
    h = Harness(store, log, tmp_path, clock)
    try:
        h.cycle()
        log.delete_old_segments()
        first, *_, last = h.committed()
        assert first.has_txn_index and last.has_txn_index
        clock.advance(BATCHES * BATCH_MS - 20 * BATCH_MS + 1)
        h.cycle()
        remaining = {s.segment_id for s in h.committed()}
        assert first.segment_id not in remaining and last.segment_id in remaining
        names = set(h.objects())
        assert mf.segment_part(first, mf.TXN_INDEX_KIND).object not in names
        assert mf.segment_part(last, mf.TXN_INDEX_KIND).object in names
    finally:
        h.close()
        log.close()


def test_topic_deletion_deletes_the_txn_indexes(
    store: FsspecRemoteStore, tmp_path: Path, clock: ManualClock
) -> None:
    log = make_log(tmp_path, clock)
    write_index(log, 0, [txn(7, 1, 2, 3)])
    h = Harness(store, log, tmp_path, clock)
    try:
        h.cycle()
        assert any(s.has_txn_index for s in h.committed())
        h.manager.untrack(TOPIC, PARTITION, topic_deleted=True)
        h.cycle()
        assert h.objects() == []
    finally:
        h.close()
        log.close()


def aborted(h: Harness, fetch: int, upper: int) -> list[AbortedTxn]:
    async def ask() -> list[AbortedTxn]:
        return await h.manager.aborted_transactions(TOPIC, PARTITION, fetch, upper)

    return asyncio.run(ask())


def test_aborted_transactions_walk_the_remote_indexes_with_kafkas_stop_rule(
    store: FsspecRemoteStore, tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = make_log(tmp_path, clock)
    bases = [s.base_offset for s in log.segments]
    b1, b3, b4 = bases[1], bases[3], bases[4]
    t1 = txn(1, b1 + 1, b1 + 5, b1 + 2)  # ends before a fetch from b1 + 6
    t2 = txn(2, b1 + 2, b3 + 1, b1 + 3)  # open across segments 1-3, marker in 3
    t3 = txn(3, b3 + 2, b3 + 4, b3 + 5)
    t4 = txn(4, b4 + 1, b4 + 2, b4 + 90)  # its LSO reaches far: later entries are never read
    t5 = txn(5, b1, b4 + 20, b4 + 95)  # overlaps everything but comes after the stop
    write_index(log, 1, [t1])
    write_index(log, 3, [t2, t3])  # segment 2 has no index: skipped
    write_index(log, 4, [t4, t5])
    h = Harness(store, log, tmp_path, clock)
    try:
        h.cycle()
        fetched: list[RemoteSegment] = []
        real_fetch = store.fetch_index

        def fetch_index(segment: RemoteSegment, kind: IndexKind) -> Any:
            fetched.append(segment)
            return real_fetch(segment, kind)

        monkeypatch.setattr(store, "fetch_index", fetch_index)
        # From segment 1 on: t1 is below the fetch, t2 reaches into it; t3 and t4 overlap;
        # t4's LSO is past the upper bound, so t5 is never looked at.
        assert aborted(h, b1 + 6, b4 + 10) == [t2, t3, t4]
        # Until the bound: t2's LSO is below it, t3's reaches it (t3 itself starts at it).
        assert aborted(h, b1, b3 + 2) == [t1, t2]
        # A fetch from segment 3 does not look at segment 1's index.
        assert aborted(h, b3, b3 + 3) == [t2, t3]
        # No remote segment holds the offset, or an empty range: nothing.
        assert aborted(h, log.log_end_offset, log.log_end_offset + 10) == []
        assert aborted(h, b1, b1) == []
        # Each index was fetched once, then served from memory.
        assert sorted(s.base_offset for s in fetched) == [b1, b3, b4]
    finally:
        h.close()
        log.close()


def test_segments_at_or_above_the_last_stable_offset_stay_local(
    store: FsspecRemoteStore, tmp_path: Path, clock: ManualClock
) -> None:
    class TxnLog(Log):
        # The earliest open transaction's first offset (KIP-98); the local log will have
        # it, set by hand here. Shadows a property of the class, should it have one.
        first_unstable_offset: int | None = None

    config = LogConfig.from_props(
        {"segment.bytes": 2048, "remote.storage.enable": True, "file.delete.delay.ms": 0}
    )
    log = TxnLog(tmp_path / "data" / f"{TOPIC}-{PARTITION}", config, clock=clock)
    written = append_transactions(log)
    h = Harness(store, log, tmp_path, clock)
    try:
        closed = log.segments[:-1]
        assert len(closed) >= 4
        # A transaction open from inside the third segment: only the first two go.
        log.first_unstable_offset = closed[2].base_offset + 1
        h.cycle()
        assert [s.base_offset for s in h.committed()] == [s.base_offset for s in closed[:2]]
        # The open transaction begins right at a segment's base: the one before it goes.
        log.first_unstable_offset = closed[3].base_offset
        h.cycle()
        assert [s.base_offset for s in h.committed()] == [s.base_offset for s in closed[:3]]
        # Nothing open: the high watermark alone bounds the offload again.
        log.first_unstable_offset = None
        h.cycle()
        committed = h.committed()
        assert [s.base_offset for s in committed] == [s.base_offset for s in closed]
        # Every segment an abort marker went into carries its index remotely, and the
        # remote answer for the whole remote range is every abort with a marker in it.
        remote_end = committed[-1].next_offset
        expected = [t for t in written.aborted if t.last_offset < remote_end]
        assert all(s.has_txn_index for s in committed)
        assert aborted(h, 0, remote_end) == expected
    finally:
        h.close()
        log.close()


def test_a_corrupt_or_missing_remote_index_fails_the_read_loudly(
    store: FsspecRemoteStore, tmp_path: Path, clock: ManualClock
) -> None:
    log = make_log(tmp_path, clock)
    write_index(log, 1, [txn(1, 5, 9, 10)])
    h = Harness(store, log, tmp_path, clock)
    try:
        h.cycle()
        segment = h.committed()[1]
        part = mf.segment_part(segment, mf.TXN_INDEX_KIND)
        path = f"{store.partition_path(TOPIC, PARTITION)}/{part.object}"
        whole = bytes(store.fs.cat_file(path))
        store.delete_object(TOPIC, PARTITION, part.object)
        with pytest.raises(RemoteStorageError):
            aborted(h, segment.base_offset, segment.next_offset)
        assert h.manager.fetch_errors == 1
        # The object back, its txn index part zeroed.
        end = part.offset + part.size
        store.fs.pipe_file(path, whole[: part.offset] + b"\0" * part.size + whole[end:])
        # Caught by the CRC-32C the manifest recorded at upload, before it is decoded.
        with pytest.raises(RemoteStorageError, match="the manifest recorded"):
            aborted(h, segment.base_offset, segment.next_offset)
        assert h.manager.fetch_errors == 2
    finally:
        h.close()
        log.close()


def _python_calls(run: Any) -> int:
    """Python-level function calls (comprehensions included) made while ``run()`` runs:
    a measure of work that does not depend on the machine's speed."""
    calls = 0

    def profile(_frame: Any, event: str, _arg: Any) -> None:
        nonlocal calls
        if event == "call":
            calls += 1

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return calls


def test_collecting_aborted_transactions_costs_nothing_without_indexes() -> None:
    """Issue 26, item 4: a read_committed replay from the remote tier walked every
    segment from the fetch offset on, building the committed list again at each step
    (~10 ms of the event loop per fetch at 125 segments). Without a ``.txnindex`` the
    walk must not depend on the number of segments, and with a few, only on them."""
    from tests.remote.test_manifest import seg

    def manifest(n: int, with_index: set[int]) -> mf.Manifest:
        segments = tuple(
            dataclasses.replace(seg(10 * i, 10 * i + 9), has_txn_index=i in with_index)
            for i in range(n)
        )
        return mf.Manifest("orders", 3, segments[0].topic_id, segments=segments)

    fetched: list[int] = []

    class Indexes:
        def fetch_index(self, segment: RemoteSegment, kind: IndexKind) -> bytes:
            fetched.append(segment.base_offset)
            # An entry whose LSO is past every fetch: the walk stops at the first index.
            return encode_entries([txn(9, segment.base_offset, segment.base_offset + 1, 10**9)])

    async def off_loop(call: Any) -> Any:
        return call()

    indexes = RemoteTxnIndexes(Indexes(), off_loop)  # type: ignore[arg-type]

    def collect(m: mf.Manifest, fetch: int) -> list[AbortedTxn]:
        return asyncio.run(indexes.collect(m, fetch, fetch + 5))

    small, large = manifest(10, set()), manifest(5000, set())
    assert collect(large, 0) == [] and fetched == []
    loop_calls = _python_calls(lambda: collect(small, 0))
    # The same work on 500 times the segments (asyncio.run's own calls are in both).
    assert _python_calls(lambda: collect(large, 0)) <= loop_calls + 5
    assert _python_calls(lambda: collect(large, 20_000)) <= loop_calls + 5

    # Indexes on two segments near the end: only they are looked at, the first one ends
    # the walk (its entry's LSO reaches the bound), whatever lies before them.
    indexed = manifest(5000, {4990, 4995})
    assert collect(indexed, 100) == [] and fetched == [49_900]
    assert collect(indexed, 49_900) == [txn(9, 49_900, 49_901, 10**9)]
    assert collect(indexed, 49_920) == [] and fetched == [49_900, 49_950]
