"""The remote compactor on a transactional tiered log (KIP-98): the same rules as the local
pass, with the aborted transactions read from the remote ``.txnindex`` objects and the
cleaned segments uploaded with theirs; a transaction whose marker is not offloaded yet
stops the pass before it."""

from __future__ import annotations

import random
import uuid
from pathlib import Path

from tierlog.compaction.remote_cleaner import RemoteCompactor
from tierlog.local.config import LogConfig
from tierlog.local.log import Log
from tierlog.records.aborted_filter import filter_aborted
from tierlog.records.builder import Record, build_batch
from tierlog.records.header import iter_batches
from tierlog.records.reader import decode_batch, iter_records
from tierlog.records.txn_index_codec import decode_entries
from tierlog.remote import manifest as mf
from tierlog.remote.api import IndexKind, RemoteSegment, SegmentState
from tierlog.remote.fsspec_storage import FsspecRemoteStore
from tierlog.util.clock import ManualClock

from .test_transactions import Producer, fill

TOPIC, PARTITION = "orders", 0
TOPIC_ID = uuid.UUID("4f1c2d3e-5a6b-4c7d-8e9f-0a1b2c3d4e5f")
T0 = 1_700_000_000_000
HOUR = 3_600_000
Row = tuple[int, bytes | None, bytes | None]


def _log(tmp_path: Path, clock: ManualClock) -> Log:
    config = LogConfig.from_props(
        {
            "cleanup.policy": "compact",
            "segment.bytes": 4096,
            "min.cleanable.dirty.ratio": 0.01,
            "delete.retention.ms": HOUR,
        }
    )
    return Log(tmp_path / f"{TOPIC}-{PARTITION}", config, clock=clock)


def _offload(log: Log, store: FsspecRemoteStore, upto: int | None = None) -> mf.Manifest:
    """Commit the closed segments (those ending at or below ``upto``) with their
    .txnindex, as the remote log manager uploads them."""
    manifest = store.read_manifest(TOPIC, PARTITION)
    for segment in log.segments[:-1]:
        if upto is not None and segment.next_offset > upto:
            break
        txn = segment.txn_index.path.read_bytes() if segment.txn_index.path.exists() else b""
        remote = RemoteSegment(
            TOPIC,
            PARTITION,
            TOPIC_ID,
            segment.base_offset,
            segment.next_offset - 1,
            str(uuid.uuid4()),
            segment.size,
            segment.max_timestamp,
            -1,
            ((0, segment.base_offset),),
            SegmentState.COPY_FINISHED,
            T0,
            has_txn_index=bool(txn),
        )
        remote = store.copy_segment(
            remote,
            segment.path,
            segment.offset_index.path,
            segment.time_index.path,
            {IndexKind.TRANSACTION: txn} if txn else None,
        )
        manifest = store.commit(
            TOPIC, PARTITION, mf.with_segment(manifest, remote), manifest.version
        )
    return manifest


def _remote(store: FsspecRemoteStore) -> tuple[bytes, list]:
    """The remote log's bytes, and its aborted transactions from the .txnindex objects."""
    manifest = store.read_manifest(TOPIC, PARTITION)
    data, aborted = b"", []
    for segment in mf.committed_segments(manifest):
        data += store.fetch_range(segment, 0, None)
        if segment.has_txn_index:
            aborted += decode_entries(store.fetch_index(segment, IndexKind.TRANSACTION))
    return data, aborted


def _committed(data: bytes, aborted: list) -> list[Row]:
    out: list[Row] = []
    for start, end in filter_aborted(data, aborted):
        position = start
        while position < end:
            header, records = decode_batch(data, position)
            out.extend((r.offset, r.key, r.value) for r in records)
            position += header.size
    return out


def test_remote_pass_drops_aborted_records_and_rewrites_the_txn_indexes(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    store = FsspecRemoteStore(f"file://{tmp_path / 'remote'}")
    log = _log(tmp_path, clock)
    written = fill(log, clock, random.Random(7))
    log.roll()
    log.append(build_batch([Record(b"tail", b"x", timestamp=T0)]))
    manifest = _offload(log, store)
    data_before, aborted_before = _remote(store)
    before = _committed(data_before, aborted_before)
    compactor = RemoteCompactor(lambda t, p: tmp_path, delete_delay_ms=0, clock=clock)
    stored = compactor.clean(store, log, manifest, 0, {})
    assert stored is not None
    data, aborted = _remote(store)
    after = _committed(data, aborted)
    assert set(after) <= set(before)
    latest_before = {r[1]: r for r in before}
    latest_after = {r[1]: r for r in after}
    assert {k: r for k, r in latest_after.items() if r[2] is not None} == {
        k: r for k, r in latest_before.items() if r[2] is not None
    }
    offsets = {
        r.offset
        for pos, h in iter_batches(data)
        if not h.is_control
        for r in iter_records(data[pos : pos + h.size])
    }
    assert not offsets & written["aborted"]
    # Every entry left has its marker in the remote log, and the replaced segments'
    # objects (their .txnindex included) go.
    markers = {h.base_offset for _, h in iter_batches(data) if h.is_control and h.record_count}
    assert aborted and all(e.last_offset in markers for e in aborted)
    # A first pass sees every aborted transaction's data: every entry stays (Kafka's rule),
    # in the new segments' uploaded indexes.
    assert sorted(aborted) == sorted(aborted_before)
    compactor.delete_replaced(store)
    ids = {s.segment_id for s in stored.segments}
    names = [n for n in store.list_objects(TOPIC, PARTITION) if not n.startswith("manifest")]
    assert {mf.parse_object_name(n)[1] for n in names} == ids  # type: ignore[index]
    log.close()


def test_a_transaction_whose_marker_is_not_offloaded_stops_the_pass(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    store = FsspecRemoteStore(f"file://{tmp_path / 'remote'}")
    log = _log(tmp_path, clock)
    for i in range(60):
        log.append(build_batch([Record(b"k%d" % (i % 3), b"%d" % i, timestamp=T0)]))
    log.roll()
    p = Producer(9)
    first, _ = p.send(log, [(b"k1", b"aborted-later")], clock)
    for i in range(60):
        log.append(build_batch([Record(b"k%d" % (i % 3), b"late-%d" % i, timestamp=T0)]))
    log.roll()
    boundary = log.log_end_offset
    p.end(log, commit=False)  # the marker stays local
    log.roll()
    log.append(build_batch([Record(b"tail", b"x", timestamp=T0)]))
    manifest = _offload(log, store, upto=boundary)
    segments = mf.committed_segments(manifest)
    untouched = {
        s.base_offset: store.fetch_range(s, 0, None) for s in segments if s.end_offset >= first
    }
    compactor = RemoteCompactor(lambda t, p: tmp_path, delete_delay_ms=0, clock=clock)
    stored = compactor.clean(store, log, manifest, 0, {})
    assert stored is not None
    after = {
        s.base_offset: store.fetch_range(s, 0, None)
        for s in mf.committed_segments(stored)
        if s.end_offset >= first
    }
    assert after == untouched
    data, _ = _remote(store)
    values = [
        r.value for pos, h in iter_batches(data) for r in iter_records(data[pos : pos + h.size])
    ]
    assert b"aborted-later" in values  # not known to be aborted: left as it is
    assert values.count(b"0") == 0  # the part below it was cleaned
    log.close()
