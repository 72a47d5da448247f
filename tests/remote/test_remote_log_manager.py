"""RemoteLogManager on a real Log and FsspecRemoteStore (memory:// and file://): offload
order and eligibility, commit-after-upload, local and remote retention, orphans, a corrupt
manifest and leader-epoch fencing. Each cycle is driven by hand (``run_cycle``) on a
ManualClock, so nothing here waits on a timer."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.remote.conftest import (
    PARTITION,
    T0,
    TOPIC,
    TOPIC_ID,
    batch,
    paths,
    records_bytes,
    remote_segment,
)
from tierlog.local.checkpoint import decode_checkpoint
from tierlog.local.config import LogConfig
from tierlog.local.file_lease import FileSlice
from tierlog.local.log import Log
from tierlog.local.producer_state import snapshot_path
from tierlog.remote import manifest as mf
from tierlog.remote import manifest_json as mj
from tierlog.remote.api import (
    FencedLeaderEpochError,
    IndexKind,
    RemoteSegment,
    RemoteStorageError,
    RemoteStorageUnavailableError,
    SegmentState,
)
from tierlog.remote.fsspec_storage import FsspecRemoteStore
from tierlog.remote.remote_copy import COPY_PARALLELISM
from tierlog.remote.remote_log_manager import (
    ORPHAN_SCAN_EVERY,
    RemoteLogManager,
    TieredPartition,
)
from tierlog.util.clock import ManualClock
from tierlog.util.throttle import Throttle

BATCHES = 48  # 4 records each, ~300 bytes a batch: 7 segments of 2 KiB
BATCH_MS = 1000  # batch n has timestamps T0 + n * BATCH_MS (+ 7 ms per record)


@pytest.fixture(params=["memory", "file"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[FsspecRemoteStore]:
    if request.param == "memory":
        root = f"memory://tierlog-rlm-{uuid.uuid4().hex}"
        yield FsspecRemoteStore(root, retries=0)
        import fsspec

        fs = fsspec.filesystem("memory")
        if fs.exists(root):
            fs.rm(root, recursive=True)
    else:
        yield FsspecRemoteStore(f"file://{tmp_path}/remote", retries=0)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


def make_log(tmp_path: Path, clock: ManualClock, **props: Any) -> Log:
    """A tiered log of 2 KiB segments (a harness puts its high watermark at the log end)."""
    config = LogConfig.from_props(
        {
            "segment.bytes": 2048,
            "remote.storage.enable": True,
            "retention.ms": -1,
            "retention.bytes": -1,
            "local.retention.ms": -2,
            "local.retention.bytes": -2,
            "file.delete.delay.ms": 0,
            **props,
        }
    )
    log = Log(tmp_path / "data" / f"{TOPIC}-{PARTITION}", config, clock=clock)
    for n in range(BATCHES):
        log.append(batch(4, T0 + n * BATCH_MS), leader_epoch=0)
    assert len(log.segments) >= 6
    return log


# These tests check what is offloaded and read back, not the bound on one remote read:
# under a loaded full run, one read of a .txnindex from the S3 server took longer than
# Kafka's 500 ms default (remote.fetch.max.wait.ms) and the test failed on a TimeoutError.
FETCH_TIMEOUT_MS = 30_000


class Harness:
    """One manager tracking one log, driven cycle by cycle."""

    def __init__(
        self,
        store: FsspecRemoteStore,
        log: Log,
        tmp_path: Path,
        clock: ManualClock,
        fetch_throttle: Throttle | None = None,
    ) -> None:
        self.store, self.log, self.epoch = store, log, 0
        self.manager = RemoteLogManager(
            store,
            tmp_path / f"cache-{uuid.uuid4().hex}",
            0,
            clock=clock,
            fetch_throttle=fetch_throttle,
            fetch_timeout_ms=FETCH_TIMEOUT_MS,
        )
        # The partition's replication state owns the high watermark; tests move it here.
        self.high_watermark = log.log_end_offset
        self.state: TieredPartition = self.manager.track(
            TOPIC, PARTITION, TOPIC_ID, log, lambda: self.epoch, lambda: self.high_watermark
        )

    def cycle(self, times: int = 1) -> None:
        for _ in range(times):
            asyncio.run(self.manager.run_cycle())

    def stored(self) -> mf.Manifest:
        return self.store.read_manifest(TOPIC, PARTITION)

    def committed(self) -> list[RemoteSegment]:
        return mf.committed_segments(self.stored())

    def objects(self) -> list[str]:
        return self.store.list_objects(TOPIC, PARTITION)

    def close(self) -> None:
        self.manager.close()


@pytest.fixture
def harness(store: FsspecRemoteStore, tmp_path: Path, clock: ManualClock) -> Iterator[Harness]:
    log = make_log(tmp_path, clock)
    h = Harness(store, log, tmp_path, clock)
    try:
        yield h
    finally:
        h.close()
        log.close()


def local_bases(log: Log) -> list[int]:
    return [s.base_offset for s in log.segments]


def files_on_disk(log: Log) -> list[str]:
    return sorted(p.name for p in log.directory.glob("*.log"))


# -- offload ----------------------------------------------------------------------------


def test_offloads_closed_segments_below_the_high_watermark_in_order(harness: Harness) -> None:
    log = harness.log
    closed = log.segments[:-1]
    # The high watermark inside the fourth segment: only the first three are eligible.
    harness.high_watermark = closed[3].base_offset + 2
    assert harness.manager.stats()["cycles"] == 0
    harness.cycle()
    assert harness.manager.stats()["cycles"] == 1  # the metrics' tierlog_remote_cycles
    committed = harness.committed()
    assert [(s.base_offset, s.end_offset) for s in committed] == [
        (s.base_offset, s.next_offset - 1) for s in closed[:3]
    ]
    assert log.remote_end_offset == closed[3].base_offset
    # Once the high watermark reaches the log end, every closed segment goes, the active
    # one never does; nothing is uploaded twice.
    harness.high_watermark = log.log_end_offset
    harness.cycle(2)
    committed = harness.committed()
    assert [s.base_offset for s in committed] == [s.base_offset for s in closed]
    assert log.active_segment.base_offset not in {s.base_offset for s in committed}
    assert log.remote_end_offset == log.active_segment.base_offset
    assert harness.manager.uploaded_segments == len(closed)
    # The objects are the local files, byte for byte, and ordered versions were committed.
    for seg, local in zip(committed, closed, strict=True):
        assert harness.store.fetch_range(seg, 0, None) == local.path.read_bytes()
        assert seg.size_bytes == local.size and seg.state is SegmentState.COPY_FINISHED
        assert seg.leader_epochs == ((0, seg.base_offset),)
        # KIP-405's auxiliary state at the segment's end: the producer snapshot the log
        # took when it rolled past it, and the leader-epoch history up to it.
        assert seg.has_aux_state
        snapshot = snapshot_path(log.producer_state.directory, local.next_offset)
        assert harness.store.fetch_index(seg, IndexKind.PRODUCER_SNAPSHOT) == snapshot.read_bytes()
        epochs = harness.store.fetch_index(seg, IndexKind.LEADER_EPOCH)
        assert decode_checkpoint(epochs, 2, "uploaded") == [["0", "0"]]
    # A backlog is committed a batch of uploads at a time (issue 24): fewer manifest writes.
    batches = -(-len(closed) // COPY_PARALLELISM)
    assert harness.stored().version == harness.manager.copier.commits == batches < len(closed)
    segment_objects = [n for n in harness.objects() if not n.startswith("manifest")]
    # One object per segment: the log, its indexes and its auxiliary state (issue 24).
    assert len(segment_objects) == len(closed)
    assert all(name.endswith(".segment") for name in segment_objects)
    assert "manifest.json" in harness.objects()  # the pointer, beside one version per commit


def test_a_corrupt_segment_is_never_offloaded(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    log = harness.log
    closed = log.segments[:-1]
    # Flip a byte at the end of the third segment (inside its last record): its CRC fails.
    damaged = closed[2]
    with open(damaged.path, "r+b") as f:
        f.seek(damaged.size - 3)
        byte = f.read(1)
        f.seek(damaged.size - 3)
        f.write(bytes([byte[0] ^ 0xFF]))
    with caplog.at_level(logging.ERROR):
        harness.cycle(2)
    committed = harness.committed()
    # Offload stops before the damage: nothing from it on is remote, nothing has a gap.
    assert [s.base_offset for s in committed] == [s.base_offset for s in closed[:2]]
    assert log.remote_end_offset == damaged.base_offset
    assert not any(
        mf.parse_object_name(n) and n.startswith(f"{damaged.base_offset:020d}")
        for n in harness.objects()
    )
    assert harness.manager.copy_errors >= 1
    assert any("not offloaded" in r.getMessage() for r in caplog.records)


def test_a_segment_missing_offsets_is_never_offloaded(
    store: FsspecRemoteStore, tmp_path: Path, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 20, item 2: a segment file deleted locally is reported at the next start and
    the segment before it answers for its offsets; uploading that segment (its bytes check
    out) would have left the remote tier with a silent gap."""
    log = make_log(tmp_path, clock)
    before, gone = log.segments[1], log.segments[2]
    log.close()
    for path in log.directory.glob(f"{gone.base_offset:020d}.*"):
        path.unlink()
    log = Log(
        log.directory,
        log.config,
        clock=clock,
        recovery_point=log.recovery_point,
        had_clean_shutdown=True,
    )
    h = Harness(store, log, tmp_path, clock)
    try:
        with caplog.at_level(logging.ERROR):
            h.cycle(2)
        assert [s.base_offset for s in h.committed()] == [0]
        assert log.remote_end_offset == before.base_offset
        assert any(
            "not offloaded" in r.getMessage() and f"offsets {gone.base_offset}-" in r.getMessage()
            for r in caplog.records
        )
    finally:
        h.close()
        log.close()


def test_commit_comes_after_the_upload(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    store, log = harness.store, harness.log
    real_copy, real_commit = store.copy_segment, store.commit
    failures = [RemoteStorageUnavailableError("store down")]

    def copy_segment(segment: RemoteSegment, *files: Path) -> RemoteSegment:
        # The first segment's upload (a batch's uploads run at once, in any order).
        if failures and segment.base_offset == log.segments[0].base_offset:
            real_copy(segment, *files)  # the data lands, then the upload fails
            raise failures.pop()
        return real_copy(segment, *files)

    seen_at_commit: list[set[str]] = []

    def commit(topic: str, partition: int, manifest: mf.Manifest, expected: int) -> mf.Manifest:
        # Every committed segment's objects must already be in the store.
        present = set(store.list_objects(topic, partition))
        for seg in mf.committed_segments(manifest):
            assert mf.stored_object_names(seg) <= present, "committed before uploaded"
        seen_at_commit.append(present)
        return real_commit(topic, partition, manifest, expected)

    monkeypatch.setattr(store, "copy_segment", copy_segment)
    monkeypatch.setattr(store, "commit", commit)
    harness.cycle()
    # The failed upload committed nothing, so nothing counts as remote and local retention
    # keeps every segment.
    assert harness.stored().version == 0 and harness.committed() == []
    assert log.remote_end_offset == 0
    assert harness.state.problem is not None and "store down" in harness.state.problem
    # The failed attempt's object, and those of the batch uploaded beside it (issue 24):
    # orphans, for now.
    assert 1 <= len(harness.objects()) <= COPY_PARALLELISM
    assert log.delete_old_segments() == 0
    harness.cycle()
    committed = harness.committed()
    assert [s.base_offset for s in committed] == [s.base_offset for s in log.segments[:-1]]
    assert seen_at_commit and harness.state.problem is None


# -- local retention --------------------------------------------------------------------


def test_local_retention_deletes_only_committed_segments_never_the_active_one(
    store: FsspecRemoteStore, tmp_path: Path, clock: ManualClock
) -> None:
    log = make_log(tmp_path, clock, **{"local.retention.bytes": 0})
    h = Harness(store, log, tmp_path, clock)
    try:
        before = local_bases(log)
        # Tracked, manifest not read yet: nothing is provably remote.
        assert log.remote_end_offset == 0 and log.delete_old_segments() == 0
        h.high_watermark = log.segments[2].base_offset  # two segments eligible
        h.cycle()
        assert log.delete_old_segments() == 2
        assert local_bases(log) == before[2:]
        assert log.log_start_offset == before[2]
        # Everything committed: local.retention.bytes=0 empties the local tier but for the
        # active segment.
        h.high_watermark = log.log_end_offset
        h.cycle()
        assert log.delete_old_segments() == len(before) - 3
        assert local_bases(log) == [before[-1]]
        assert files_on_disk(log) == [log.active_segment.path.name]
        assert log.delete_old_segments() == 0
    finally:
        h.close()
        log.close()


def test_local_retention_by_time_waits_for_the_upload(
    store: FsspecRemoteStore, tmp_path: Path, clock: ManualClock
) -> None:
    log = make_log(tmp_path, clock, **{"local.retention.ms": 1000})
    h = Harness(store, log, tmp_path, clock)
    try:
        clock.advance(BATCHES * BATCH_MS + 10_000)  # every segment is past local.retention.ms
        h.high_watermark = log.segments[1].base_offset
        h.cycle()
        assert log.delete_old_segments() == 1  # only the committed one
        assert local_bases(log)[0] == log.log_start_offset == h.committed()[-1].next_offset
    finally:
        h.close()
        log.close()


# -- remote retention -------------------------------------------------------------------


def test_remote_retention_by_time_marks_then_deletes_objects_then_entries(
    store: FsspecRemoteStore, tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = make_log(tmp_path, clock, **{"retention.ms": 20 * BATCH_MS, "local.retention.bytes": 0})
    h = Harness(store, log, tmp_path, clock)
    try:
        h.cycle()
        log.delete_old_segments()
        committed = h.committed()
        assert local_bases(log) == [log.active_segment.base_offset]  # the rest is remote-only
        # Each deletion: the entry is DELETE_STARTED in the stored manifest while its
        # objects are deleted; afterwards objects and entry are gone.
        real_delete = store.delete_segment
        order: list[tuple[str, SegmentState | None, bool]] = []

        def delete_segment(segment: RemoteSegment) -> None:
            stored = {s.segment_id: s.state for s in h.stored().segments}
            present = mf.segment_part(segment, "log").object in h.objects()
            order.append((segment.segment_id, stored.get(segment.segment_id), present))
            real_delete(segment)

        monkeypatch.setattr(store, "delete_segment", delete_segment)
        # Segments whose newest record is older than retention.ms go, oldest first; the
        # ones within it stay.
        clock.advance(BATCHES * BATCH_MS - 20 * BATCH_MS + 1)
        now = clock.milliseconds()
        expired = [s for s in committed if now - s.max_timestamp > 20 * BATCH_MS]
        kept = committed[len(expired) :]
        assert expired and kept
        h.cycle()
        assert order == [(s.segment_id, SegmentState.DELETE_STARTED, True) for s in expired]
        stored = h.stored()
        assert [s.segment_id for s in stored.segments] == [s.segment_id for s in kept]
        assert stored.log_start_offset == expired[-1].next_offset
        assert h.state.earliest_offset() == expired[-1].next_offset
        names = set(h.objects())
        for seg in expired:
            assert not mf.stored_object_names(seg) & names
        for seg in kept:
            assert mf.stored_object_names(seg) <= names
        assert h.manager.deleted_segments == len(expired)
    finally:
        h.close()
        log.close()


def test_remote_retention_by_size_counts_the_whole_log(
    store: FsspecRemoteStore, tmp_path: Path, clock: ManualClock
) -> None:
    log = make_log(tmp_path, clock, **{"retention.bytes": 7000, "local.retention.bytes": 2500})
    h = Harness(store, log, tmp_path, clock)
    try:
        assert log.size > 7000
        h.cycle()
        assert log.delete_old_segments() > 0
        local_before = local_bases(log)
        committed = h.committed()
        remote_only = [s for s in committed if s.next_offset <= log.log_start_offset]
        # Kafka's rule, oldest first: drop a segment while the rest still fills
        # retention.bytes (remote-only segments and the local log together).
        total = sum(s.size_bytes for s in remote_only) + log.size
        expected = []
        for seg in remote_only:
            if total - seg.size_bytes < 7000:
                break
            expected.append(seg)
            total -= seg.size_bytes
        assert expected and len(expected) < len(remote_only)
        h.cycle()
        stored = h.stored()
        assert mf.committed_segments(stored) == committed[len(expected) :]
        assert stored.log_start_offset == expected[-1].next_offset
        assert h.manager.deleted_segments == len(expected)
        # Segments still held locally are never deleted remotely, nor locally by it.
        assert local_bases(log) == local_before
        h.cycle()
        assert h.manager.deleted_segments == len(expected)
    finally:
        h.close()
        log.close()


# -- orphans and half-finished deletions ------------------------------------------------


def test_no_orphan_is_removed_while_a_newer_manifest_version_exists(
    store: FsspecRemoteStore,
    tmp_path: Path,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A writer that died between creating a manifest version and moving the pointer left
    a commit the pointer does not name: the segments it commits look orphaned from the
    manifest read. The orphan scan sees the newer version in its listing and waits."""
    log = make_log(tmp_path, clock)
    first = Harness(store, log, tmp_path, clock)
    first.high_watermark = log.segments[2].base_offset
    first.cycle()
    first.close()
    stored = first.stored()
    # Its upload and version landed, its pointer did not.
    local = log.segments[2]
    segment = store.copy_segment(
        remote_segment(local, log, state=SegmentState.COPY_FINISHED), *paths(local)
    )
    newer = dataclasses.replace(mf.with_segment(stored, segment), version=stored.version + 1)
    store.fs.pipe_file(
        store.manifests.version_path(TOPIC, PARTITION, newer.version), mj.encode(newer)
    )
    uploaded = mf.stored_object_names(segment)
    restarted = Harness(store, log, tmp_path, clock)
    try:
        restarted.high_watermark = log.segments[2].base_offset  # nothing new to offload
        with caplog.at_level(logging.WARNING):
            restarted.cycle()  # the first cycle scans for orphans
        assert "orphan cleanup waits" in caplog.text
        assert restarted.manager.orphans_removed == 0
        assert uploaded <= set(restarted.objects())
    finally:
        restarted.close()
        log.close()


def test_orphans_of_an_interrupted_upload_are_removed(
    store: FsspecRemoteStore, tmp_path: Path, clock: ManualClock
) -> None:
    log = make_log(tmp_path, clock)
    first = Harness(store, log, tmp_path, clock)
    first.high_watermark = log.segments[2].base_offset
    first.cycle()
    first.close()
    committed = first.committed()
    assert len(committed) == 2
    # A crash mid-upload of the third segment: its objects, no manifest entry; plus the
    # temp file of a manifest write that never got renamed.
    local = log.segments[2]
    orphan = remote_segment(local, log, segment_id=str(uuid.uuid4()))
    orphan = store.copy_segment(orphan, *paths(local))
    stray = f"{store.partition_path(TOPIC, PARTITION)}/manifest.json.tmp-{uuid.uuid4().hex}"
    store.fs.pipe_file(stray, b"half a manifest")
    orphan_names = mf.stored_object_names(orphan) | {stray.rsplit("/", 1)[1]}
    assert orphan_names <= set(store.list_objects(TOPIC, PARTITION))

    restarted = Harness(store, log, tmp_path, clock)
    try:
        restarted.high_watermark = log.log_end_offset
        restarted.cycle()
        assert restarted.manager.orphans_removed == len(orphan_names)
        names = set(restarted.objects())
        assert not orphan_names & names
        # The segment is uploaded again under a new id; the committed ones are untouched.
        now = restarted.committed()
        assert now[:2] == committed
        assert now[2].base_offset == local.base_offset
        assert now[2].segment_id != orphan.segment_id
        for seg in now:
            assert mf.stored_object_names(seg) <= names
    finally:
        restarted.close()
        log.close()


def test_a_deletion_interrupted_by_a_crash_is_finished(
    store: FsspecRemoteStore, tmp_path: Path, clock: ManualClock
) -> None:
    log = make_log(tmp_path, clock)
    first = Harness(store, log, tmp_path, clock)
    first.cycle()
    first.close()
    committed = first.committed()
    # A crash between marking the oldest segment DELETE_STARTED and dropping its entry:
    # its .log is still there, its indexes are gone.
    doomed = committed[0]
    marked = mf.mark(first.stored(), doomed.segment_id, SegmentState.DELETE_STARTED)
    store.commit(TOPIC, PARTITION, marked, marked.version)
    store.delete_object(TOPIC, PARTITION, mf.segment_part(doomed, "index").object)

    restarted = Harness(store, log, tmp_path, clock)
    try:
        restarted.cycle()
        stored = restarted.stored()
        assert doomed.segment_id not in {s.segment_id for s in stored.segments}
        assert not mf.stored_object_names(doomed) & set(restarted.objects())
        assert stored.log_start_offset == doomed.next_offset
        assert mf.committed_segments(stored) == committed[1:]
    finally:
        restarted.close()
        log.close()


# -- a corrupt manifest -----------------------------------------------------------------


def current_version_path(store: FsspecRemoteStore) -> str:
    """The version object the pointer names: the manifest proper."""
    version = store.read_manifest(TOPIC, PARTITION).version
    return store.manifests.version_path(TOPIC, PARTITION, version)


def test_corrupt_manifest_is_reported_with_its_path_and_no_local_data_is_deleted(
    store: FsspecRemoteStore,
    tmp_path: Path,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    log = make_log(tmp_path, clock, **{"local.retention.bytes": 0})
    path = store.manifest_path(TOPIC, PARTITION)
    store.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
    store.fs.pipe_file(path, b"{not json")
    h = Harness(store, log, tmp_path, clock)
    try:
        before = files_on_disk(log)
        with caplog.at_level(logging.WARNING):
            h.cycle(3)
        errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert len(errors) == 1  # reported once, not once per cycle
        message = errors[0].getMessage()
        assert store.url_of(path) in message and "corrupt remote manifest" in message
        # Nothing uploaded, nothing deleted: the manifest cannot prove anything is remote.
        assert log.remote_end_offset == 0
        assert log.delete_old_segments() == 0
        assert files_on_disk(log) == before
        assert store.fs.cat_file(path) == b"{not json"  # and it is not overwritten
        assert store.list_objects(TOPIC, PARTITION) == ["manifest.json"]
    finally:
        h.close()
        log.close()


def test_manifest_corrupted_under_a_running_manager_stops_local_deletion(
    store: FsspecRemoteStore,
    tmp_path: Path,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    log = make_log(tmp_path, clock, **{"local.retention.bytes": 0})
    h = Harness(store, log, tmp_path, clock)
    try:
        h.high_watermark = log.segments[3].base_offset
        h.cycle()  # three segments committed, none deleted locally yet
        assert log.remote_end_offset == log.segments[3].base_offset
        # The manifest proper: the version the pointer names (tierlog.remote.manifest).
        path = current_version_path(store)
        good = store.fs.cat_file(path)
        store.fs.pipe_file(path, b"\x00garbage")
        h.high_watermark = log.log_end_offset
        before = files_on_disk(log)
        with caplog.at_level(logging.ERROR):
            h.cycle(2)
        errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        assert len(errors) == 1 and store.url_of(path) in errors[0]
        # The manager no longer vouches for any remote data: local retention keeps it all.
        assert log.remote_end_offset == 0
        assert log.delete_old_segments() == 0
        assert files_on_disk(log) == before
        assert store.fs.cat_file(path) == b"\x00garbage"  # never overwritten
        # Reads of the remote range keep using the last good manifest.
        assert h.state.manifest is not None and len(h.state.committed()) == 3
        # Repaired: offload resumes where the good manifest left off.
        store.fs.pipe_file(path, good)
        h.cycle()
        assert h.state.problem is None
        assert log.remote_end_offset == log.active_segment.base_offset
        assert [s.base_offset for s in h.committed()] == [s.base_offset for s in log.segments[:-1]]
    finally:
        h.close()
        log.close()


def test_an_idle_partition_notices_a_corrupted_manifest(
    store: FsspecRemoteStore, tmp_path: Path, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    log = make_log(tmp_path, clock)
    h = Harness(store, log, tmp_path, clock)
    try:
        h.cycle()  # everything closed is committed; nothing left to commit
        assert log.remote_end_offset == log.active_segment.base_offset
        store.fs.pipe_file(current_version_path(store), b"[]")
        with caplog.at_level(logging.ERROR):
            h.cycle(ORPHAN_SCAN_EVERY)  # the manifest is re-read at the next orphan scan
        assert any("corrupt remote manifest" in r.getMessage() for r in caplog.records)
        assert log.remote_end_offset == 0
    finally:
        h.close()
        log.close()


# -- fencing ----------------------------------------------------------------------------


def test_a_newer_leader_epoch_fences_the_manager_without_local_deletion(
    store: FsspecRemoteStore,
    tmp_path: Path,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log = make_log(tmp_path, clock, **{"local.retention.bytes": 0})
    h = Harness(store, log, tmp_path, clock)
    try:
        h.high_watermark = 0
        h.cycle()  # the manager reads the (empty) manifest at epoch 0
        assert h.state.manifest is not None and h.state.manifest.version == 0
        # A newer leader (epoch 5) commits meanwhile.
        newer = dataclasses.replace(mf.empty(TOPIC, PARTITION, TOPIC_ID), leader_epoch=5)
        store.commit(TOPIC, PARTITION, newer, 0)
        errors: list[BaseException] = []
        real_commit = store.commit

        def commit(*args: Any) -> mf.Manifest:
            try:
                return real_commit(*args)
            except FencedLeaderEpochError as exc:
                errors.append(exc)
                raise

        monkeypatch.setattr(store, "commit", commit)
        h.high_watermark = log.log_end_offset
        before = files_on_disk(log)
        with caplog.at_level(logging.WARNING):
            h.cycle(3)
        # Each cycle reads the stored manifest first: the newer epoch fences the manager
        # before it uploads or commits anything.
        assert errors == []
        assert any("fenced" in r.getMessage() for r in caplog.records)
        stored = h.stored()
        assert stored.leader_epoch == 5 and stored.segments == ()
        assert log.remote_end_offset == 0
        assert log.delete_old_segments() == 0
        assert files_on_disk(log) == before
        # Deposed, it uploads nothing (no orphans): the other leader's manifest only.
        assert h.objects() == ["manifest-00000000000000000001.json", "manifest.json"]
        # Promoted to a newer epoch, the same manager offloads again.
        h.epoch = 6
        h.cycle()
        assert len(h.committed()) == len(before) - 1
        assert h.stored().leader_epoch == 6
    finally:
        h.close()
        log.close()


def test_aux_state_comes_from_the_remote_segment_holding_the_offset_below(
    harness: Harness,
) -> None:
    """A new leader's local segments need not end where the uploads did: the replica
    restarts at the end of the remote segment holding ``offset - 1``."""
    harness.cycle()
    committed = harness.committed()
    second = committed[1]
    manager = harness.manager
    for offset in (second.next_offset, second.base_offset + 2):
        aux = asyncio.run(manager.aux_state_before(TOPIC, PARTITION, TOPIC_ID, offset))
        assert aux.segment.segment_id == second.segment_id
        assert aux.producer_snapshot is not None
        assert aux.leader_epochs and aux.leader_epochs[0].start_offset == 0
    # Past the remote end: not there yet, retriable.
    with pytest.raises(RemoteStorageError) as raised:
        asyncio.run(
            manager.aux_state_before(TOPIC, PARTITION, TOPIC_ID, committed[-1].next_offset + 5)
        )
    assert raised.value.retriable


def test_remote_fetches_are_held_to_the_fetch_quota(
    store: FsspecRemoteStore, tmp_path: Path, clock: ManualClock
) -> None:
    """remote.log.manager.fetch.max.bytes.per.second (KIP-956): while the quota is used up
    a remote read answers nothing (b"", read again later), not "no batches from here on"."""
    log = make_log(tmp_path, clock)
    rate = 1000
    throttle = Throttle(rate, clock, burst_bytes=rate, initial_bytes=rate)
    h = Harness(store, log, tmp_path, clock, fetch_throttle=throttle)
    try:
        h.cycle()
        assert h.committed()
        manager = h.manager
        first = records_bytes(asyncio.run(manager.read(h.state, 0, 1500)))
        assert first and len(first) > 0  # within the credit: read whole, its bytes counted
        assert asyncio.run(manager.read(h.state, 0, 1500)) == b""
        assert manager.fetches_throttled == 1
        clock.advance(len(first) * 1000 // rate + 1)  # the debt paid: credit again
        # Read again: from the chunk cache now, a slice of the chunk file to send (a
        # store on the local file system is read in place, without the cache).
        again = asyncio.run(manager.read(h.state, 0, 1500))
        assert isinstance(again, bytes if store.is_local else FileSlice)
        assert records_bytes(again) == first
    finally:
        h.close()
        log.close()
