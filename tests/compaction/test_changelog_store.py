"""Reading a changelog straight from object storage when the remote segments hold what a
cleaned log holds: offset gaps inside and between segments, a batch claiming offsets past
its last record, and an empty batch. Gaps are not data loss: the reader moves past them
and ends at the remote end."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.compaction.test_changelog_decode import empty_batch, with_last_offset_delta
from tierlog.compaction.changelog import ChangelogReader, DictSink, SqliteSink
from tierlog.records.builder import Record, build_batch
from tierlog.remote.api import RemoteSegment, SegmentState
from tierlog.remote.fsspec_storage import FsspecRemoteStore
from tierlog.remote.manifest import committed_segments, empty, with_segment, without

TOPIC_ID = uuid.UUID("6f1c9f5e-0000-4000-8000-000000000003")


def upload(store: FsspecRemoteStore, work: Path, base: int, end: int, data: bytes) -> RemoteSegment:
    """``data`` as the committed-to-be remote segment ``[base, end]`` of users-0 (no index
    entries: readers scan batch headers from the start)."""
    segment = RemoteSegment(
        "users", 0, TOPIC_ID, base, end, uuid.uuid4().hex, len(data), 1, 1, ((0, base),),
        SegmentState.COPY_FINISHED, 1,
    )  # fmt: skip
    log, index, timeindex = (work / f"{base}.log", work / f"{base}.index", work / f"{base}.ti")
    log.write_bytes(data)
    index.write_bytes(b"")
    timeindex.write_bytes(b"")
    return store.copy_segment(segment, log, index, timeindex)


def first_segment() -> bytes:
    """Offsets 0..15: a=a1, b=b1, a=a2 at 0, 3, 7; b deleted at 9 (the batch claims up to
    12); an empty batch for 13..15."""
    return (
        build_batch(
            [Record(b"a", b"a1"), Record(b"b", b"b1"), Record(b"a", b"a2")],
            base_offset=0,
            offset_deltas=[0, 3, 7],
        )
        + with_last_offset_delta(
            build_batch([Record(b"b", None)], base_offset=9, offset_deltas=[0]), 3
        )
        + empty_batch(13, 2)
    )


@pytest.fixture
def remote_url(tmp_path: Path) -> str:
    """users-0 in the remote tier: segment [0, 15] and, after a gap, segment [20, 29]."""
    url = f"file://{tmp_path / 'remote'}"
    store = FsspecRemoteStore(url)
    first = first_segment()
    second = build_batch(
        [Record(b"c", b"c1"), Record(b"a", None)], base_offset=20, offset_deltas=[0, 1]
    ) + with_last_offset_delta(
        build_batch([Record(b"b", b"b2")], base_offset=27, offset_deltas=[0]), 2
    )
    manifest = empty("users", 0)
    for base, end, data in ((0, 15, first), (20, 29, second)):
        manifest = with_segment(manifest, upload(store, tmp_path, base, end, data))
    store.commit("users", 0, manifest, expected_version=0)
    return url


@pytest.mark.parametrize("chunk_bytes", [1 << 20, 64])
def test_gaps_and_an_empty_batch_are_read_past(remote_url: str, chunk_bytes: int) -> None:
    sink = DictSink()
    with ChangelogReader("users", remote_url=remote_url, store_chunk_bytes=chunk_bytes) as reader:
        stats = reader.catch_up(sink)
    assert sink.data == {b"c": b"c1", b"b": b"b2"}
    assert stats.changes == 7
    assert stats.tombstones == 2
    assert stats.positions == {0: 30}


def test_sqlite_from_the_store_resumes_at_the_remote_end(remote_url: str, tmp_path: Path) -> None:
    path = tmp_path / "users.db"
    for expected_changes in (7, 0):
        with SqliteSink(path) as sink, ChangelogReader("users", remote_url=remote_url) as reader:
            stats = reader.catch_up(sink)
            assert sink.to_dict() == {b"c": b"c1", b"b": b"b2"}
        assert stats.changes == expected_changes
        assert stats.positions == {0: 30}


def test_a_segment_cleaned_away_while_reading_is_read_from_the_new_manifest(
    remote_url: str, tmp_path: Path
) -> None:
    """The leader's cleaner replaces segment [0, 15] by a cleaned copy and deletes the old
    objects just as the reader reaches them: the reader takes the new manifest and goes on
    from where it was."""
    store = FsspecRemoteStore(remote_url)
    original = store.fetch_range
    replaced: list[str] = []

    def clean_then_fetch(segment: RemoteSegment, start: int, end: int | None) -> bytes:
        if segment.base_offset == 0 and not replaced:
            manifest = store.read_manifest("users", 0)
            cleaned = build_batch(
                [Record(b"a", b"a2"), Record(b"b", None)], base_offset=0, offset_deltas=[7, 9]
            ) + empty_batch(13, 2)
            work = tmp_path / "cleaned"
            work.mkdir()
            new = upload(store, work, 0, 15, cleaned)
            manifest = with_segment(without(manifest, segment.segment_id), new)
            store.commit("users", 0, manifest, expected_version=manifest.version)
            store.delete_segment(segment)
            replaced.append(segment.segment_id)
        return original(segment, start, end)

    store.fetch_range = clean_then_fetch  # type: ignore[method-assign]
    sink = DictSink()
    with ChangelogReader("users", store=store) as reader:
        stats = reader.catch_up(sink)
    assert replaced
    assert replaced[0] not in {
        s.segment_id for s in committed_segments(store.read_manifest("users", 0))
    }
    assert sink.data == {b"c": b"c1", b"b": b"b2"}
    assert stats.positions == {0: 30}
