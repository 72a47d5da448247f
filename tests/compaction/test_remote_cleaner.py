"""The remote compactor on S3 (moto's server through s3fs): a pass replaces the remote
segments in one manifest commit; a store failing mid-replacement (an upload, or the
commit) leaves the manifest and the committed objects as they were and no stray object."""

from __future__ import annotations

import dataclasses
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.remote.conftest import S3Bucket, s3_bucket, s3_server  # noqa: F401
from tierlog.compaction.remote_cleaner import RemoteCompactor
from tierlog.local.config import LogConfig
from tierlog.local.log import Log
from tierlog.records.builder import Record, build_batch
from tierlog.records.header import iter_batches
from tierlog.records.reader import iter_records
from tierlog.remote import manifest as mf
from tierlog.remote.api import RemoteSegment, RemoteStorageUnavailableError, SegmentState
from tierlog.remote.fsspec_storage import FsspecRemoteStore
from tierlog.util.clock import ManualClock

TOPIC, PARTITION = "users", 0
TOPIC_ID = uuid.UUID("0b5e1b1e-33a4-4c8e-9f1e-2d7f0e0c9a11")
T0 = 1_700_000_000_000


class FailingStore:
    """The real store, failing one chosen call (``fail`` = "copy:<n>" or "commit")."""

    def __init__(self, store: FsspecRemoteStore, fail: str) -> None:
        self.store = store
        self.fail = fail
        self.copies = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def copy_segment(self, *args: Any, **kwargs: Any) -> RemoteSegment:
        self.copies += 1
        if self.fail == f"copy:{self.copies}":
            raise RemoteStorageUnavailableError("injected: the store went away mid-upload")
        return self.store.copy_segment(*args, **kwargs)

    def commit(self, *args: Any, **kwargs: Any) -> mf.Manifest:
        if self.fail == "commit":
            raise RemoteStorageUnavailableError("injected: the commit did not reach the store")
        return self.store.commit(*args, **kwargs)


def _offloaded(tmp_path: Path, store: FsspecRemoteStore, clock: ManualClock) -> tuple[Log, dict]:
    """A compacted log whose closed segments are all committed to the remote tier, and
    every key's last (offset, value)."""
    config = LogConfig.from_props(
        {"cleanup.policy": "compact", "segment.bytes": 3000, "min.cleanable.dirty.ratio": 0.01}
    )
    log = Log(tmp_path / f"{TOPIC}-{PARTITION}", config, clock=clock)
    last = {}
    for i in range(600):
        key, value = b"user-%d" % (i % 23), (None if i % 41 == 0 else b"mail-%d" % i)
        info = log.append(build_batch([Record(key, value, timestamp=T0 + i)]))
        last[key] = (info.first_offset, value)
    log.roll()
    manifest = store.read_manifest(TOPIC, PARTITION)
    for segment in log.segments[:-1]:
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
        )
        remote = store.copy_segment(
            remote, segment.path, segment.offset_index.path, segment.time_index.path
        )
        manifest = store.commit(
            TOPIC, PARTITION, mf.with_segment(manifest, remote), manifest.version
        )
    return log, last


def _remote_records(store: FsspecRemoteStore) -> list[tuple[int, bytes | None, bytes | None]]:
    manifest = store.read_manifest(TOPIC, PARTITION)
    out = []
    for segment in mf.committed_segments(manifest):
        data = store.fetch_range(segment, 0, None)
        for position, header in iter_batches(data):
            batch = data[position : position + header.size]
            out.extend((r.offset, r.key, r.value) for r in iter_records(batch))
    return out


@pytest.mark.parametrize("fail", ["copy:1", "copy:3", "commit"])
def test_a_store_failing_mid_replacement_changes_nothing(
    fail: str,
    tmp_path: Path,
    s3_bucket: S3Bucket,  # noqa: F811
) -> None:
    clock = ManualClock(T0)
    store = FsspecRemoteStore(s3_bucket.url, s3_bucket.options())
    log, last = _offloaded(tmp_path, store, clock)
    before = store.read_manifest(TOPIC, PARTITION)
    objects_before = store.list_objects(TOPIC, PARTITION)
    records_before = _remote_records(store)
    compactor = RemoteCompactor(lambda t, p: tmp_path, delete_delay_ms=0, clock=clock)
    with pytest.raises(RemoteStorageUnavailableError):
        compactor.clean(FailingStore(store, fail), log, before, 0, {})  # type: ignore[arg-type]
    assert store.read_manifest(TOPIC, PARTITION) == before
    assert store.list_objects(TOPIC, PARTITION) == objects_before
    assert _remote_records(store) == records_before
    assert not (tmp_path / ".remote-cleaning" / f"{TOPIC}-{PARTITION}").exists()

    # The next pass, with the store back, replaces them all in one commit.
    stored = compactor.clean(store, log, before, 0, {})
    assert stored is not None and stored.version == before.version + 1
    remote = _remote_records(store)
    latest = {key: (offset, value) for offset, key, value in remote}
    assert latest == last
    assert len(remote) < len(records_before)
    # Segments with nothing to remove stay as they are; the others were replaced.
    kept_ids = {s.segment_id for s in stored.segments}
    replaced = {s.segment_id for s in before.segments} - kept_ids
    assert len(replaced) > len(before.segments) / 2
    # Replaced objects go after the delay (0 here), at the next call; nothing else does.
    compactor.delete_replaced(store)
    names = store.list_objects(TOPIC, PARTITION)
    assert not [n for n in names if any(i in n for i in replaced)]
    segment_objects = [n for n in names if not n.startswith("manifest")]
    assert {mf.parse_object_name(n)[1] for n in segment_objects} == kept_ids  # type: ignore[index]
    log.close()


def test_a_deposed_leader_cannot_commit_a_replacement(
    tmp_path: Path,
    s3_bucket: S3Bucket,  # noqa: F811
) -> None:
    clock = ManualClock(T0)
    store = FsspecRemoteStore(s3_bucket.url, s3_bucket.options())
    log, _ = _offloaded(tmp_path, store, clock)
    manifest = store.read_manifest(TOPIC, PARTITION)
    newer = store.commit(
        TOPIC, PARTITION, dataclasses.replace(manifest, leader_epoch=5), manifest.version
    )
    objects = store.list_objects(TOPIC, PARTITION)
    compactor = RemoteCompactor(lambda t, p: tmp_path, delete_delay_ms=0, clock=clock)
    with pytest.raises(Exception, match="epoch"):
        compactor.clean(store, log, newer, 3, {})
    assert store.read_manifest(TOPIC, PARTITION) == newer
    assert store.list_objects(TOPIC, PARTITION) == objects
    log.close()
