"""FsspecRemoteStore on S3: moto's HTTP server on 127.0.0.1, reached through s3fs."""

from __future__ import annotations

import dataclasses
import logging
import time
from pathlib import Path
from typing import Any

import pytest

from tests.remote.conftest import (
    PARTITION,
    TOPIC,
    TOPIC_ID,
    S3Bucket,
    create_bucket,
    free_port,
    paths,
    remote_segment,
    s3_options,
    start_moto,
    stop_moto,
)
from tierlog.local.log import Log
from tierlog.remote import manifest as mf
from tierlog.remote.api import (
    CorruptManifestError,
    FencedLeaderEpochError,
    IndexKind,
    ManifestConflictError,
    RemoteResourceNotFoundError,
    RemoteStorageUnavailableError,
    SegmentState,
)
from tierlog.remote.chunk_cache import ChunkCache
from tierlog.remote.fsspec_storage import FsspecRemoteStore
from tierlog.remote.segment_reader import RemoteSegmentReader


def make_store(bucket: S3Bucket, **kwargs: Any) -> FsspecRemoteStore:
    return FsspecRemoteStore(bucket.url, bucket.options(), retries=0, **kwargs)


@pytest.mark.parametrize("single_object", [True, False], ids=["one-object", "separate"])
def test_segment_round_trip(
    s3_bucket: S3Bucket, closed_log: Log, tmp_path: Path, single_object: bool
) -> None:
    store = make_store(s3_bucket, single_object=single_object)
    local = closed_log.segments[1]
    segment = remote_segment(local, closed_log, state=SegmentState.COPY_FINISHED)
    segment = store.copy_segment(segment, *paths(local))
    data = local.path.read_bytes()
    assert store.fetch_range(segment, 0, None) == data
    assert store.fetch_range(segment, 123, 4567) == data[123:4567]
    assert store.fetch_range(segment, len(data) - 3, len(data) + 10) == data[-3:]
    assert store.fetch_index(segment, IndexKind.OFFSET) == local.offset_index.path.read_bytes()
    assert store.fetch_index(segment, IndexKind.TIME) == local.time_index.path.read_bytes()
    stem = f"{local.base_offset:020d}-{segment.segment_id}"
    names = (
        [f"{stem}.segment"]
        if single_object
        else [f"{stem}.index", f"{stem}.log", f"{stem}.timeindex"]
    )
    assert store.list_objects(TOPIC, PARTITION) == names
    suffix = ".segment" if single_object else ".log"
    assert store.url_of(store.object_path(segment, "log")) == (
        f"s3://{s3_bucket.name}/tiered/{TOPIC}-{PARTITION}/{stem}{suffix}"
    )
    # Reads through the segment reader and the chunk cache agree with the local segment.
    cache = ChunkCache(tmp_path / "cache", 1 << 20, chunk_bytes=4096)
    reader = RemoteSegmentReader(store, segment, cache)
    for offset in range(segment.base_offset, segment.end_offset + 1, 7):
        expected = local.read(offset, 1000)
        assert expected is not None
        # A remote read ends at the last whole batch: a partial one could not be checked.
        got = reader.read(offset, 1000)
        assert got and expected.read().startswith(got)
    store.delete_segment(segment)
    store.delete_segment(segment)
    assert store.list_objects(TOPIC, PARTITION) == []
    with pytest.raises(RemoteResourceNotFoundError):
        store.fetch_range(segment, 0, 10)


def test_empty_index_objects_upload(s3_bucket: S3Bucket, closed_log: Log, tmp_path: Path) -> None:
    store = make_store(s3_bucket)
    local = closed_log.segments[0]
    empty = tmp_path / "empty.index"
    empty.write_bytes(b"")
    segment = store.copy_segment(remote_segment(local, closed_log), local.path, empty, empty)
    assert store.fetch_index(segment, IndexKind.OFFSET) == b""


def test_manifest_cas_and_fencing(s3_bucket: S3Bucket, closed_log: Log) -> None:
    store = make_store(s3_bucket)
    assert store.manifests.conditional_writes
    assert store.read_manifest(TOPIC, PARTITION) == mf.empty(TOPIC, PARTITION)
    m = mf.empty(TOPIC, PARTITION, TOPIC_ID)
    for local in closed_log.segments[:3]:
        m = mf.with_segment(m, remote_segment(local, closed_log, state=SegmentState.COPY_FINISHED))
    m = dataclasses.replace(m, leader_epoch=3)
    stored = store.commit(TOPIC, PARTITION, m, 0)
    other = make_store(s3_bucket)  # e.g. Spark planning a read, no broker involved
    assert other.read_manifest(TOPIC, PARTITION) == stored
    with pytest.raises(ManifestConflictError):
        store.commit(TOPIC, PARTITION, m, 0)
    with pytest.raises(FencedLeaderEpochError):
        store.commit(TOPIC, PARTITION, dataclasses.replace(stored, leader_epoch=2), 1)
    assert store.commit(TOPIC, PARTITION, mf.with_log_start_offset(stored, 10), 1).version == 2


def test_conditional_write_catches_a_race_after_the_check(
    s3_bucket: S3Bucket, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writer A reads and checks; B commits before A's PUT; A's If-None-Match PUT of the
    next version fails (the version creation is the compare-and-set)."""
    a, b = make_store(s3_bucket), make_store(s3_bucket)
    base = a.commit(TOPIC, PARTITION, mf.empty(TOPIC, PARTITION, TOPIC_ID), 0)
    real_create = a.manifests._create

    def b_commits_then_create(*args: Any) -> Any:
        b.commit(TOPIC, PARTITION, mf.with_log_start_offset(base, 7), base.version)
        return real_create(*args)

    monkeypatch.setattr(a.manifests, "_create", b_commits_then_create)
    with pytest.raises(ManifestConflictError, match="created by another writer"):
        a.commit(TOPIC, PARTITION, mf.with_log_start_offset(base, 3), base.version)
    monkeypatch.undo()
    assert a.read_manifest(TOPIC, PARTITION).log_start_offset == 7


def test_conditional_first_write_catches_a_race(
    s3_bucket: S3Bucket, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = make_store(s3_bucket), make_store(s3_bucket)
    real_read = a.manifests._read

    def load_then_b_creates(*args: Any) -> Any:
        loaded = real_read(*args)
        b.commit(TOPIC, PARTITION, mf.empty(TOPIC, PARTITION, TOPIC_ID), 0)
        return loaded

    monkeypatch.setattr(a.manifests, "_read", load_then_b_creates)
    with pytest.raises(ManifestConflictError):
        a.commit(TOPIC, PARTITION, mf.empty(TOPIC, PARTITION, TOPIC_ID), 0)


def test_without_conditional_writes_the_version_check_still_applies(
    s3_bucket: S3Bucket,
) -> None:
    store = make_store(s3_bucket, conditional_writes=False)
    stored = store.commit(TOPIC, PARTITION, mf.empty(TOPIC, PARTITION, TOPIC_ID), 0)
    with pytest.raises(ManifestConflictError):
        store.commit(TOPIC, PARTITION, stored, 0)
    assert store.commit(TOPIC, PARTITION, stored, 1).version == 2


def test_corrupt_manifest_names_its_s3_url(s3_bucket: S3Bucket) -> None:
    store = make_store(s3_bucket)
    store.fs.pipe_file(store.manifest_path(TOPIC, PARTITION), b"garbage")
    with pytest.raises(CorruptManifestError) as info:
        store.read_manifest(TOPIC, PARTITION)
    where = f"s3://{s3_bucket.name}/tiered/{TOPIC}-{PARTITION}/manifest.json"
    assert info.value.where == where
    assert str(info.value).startswith(f"{where}: corrupt remote manifest:")


def test_unreachable_store_is_a_quick_retriable_error(closed_log: Log) -> None:
    endpoint = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    store = FsspecRemoteStore("s3://bucket/tiered", s3_options(endpoint), retries=1, backoff_ms=10)
    local = closed_log.segments[0]
    segment = remote_segment(local, closed_log)
    calls = [
        lambda: store.fetch_range(segment, 0, 10),
        lambda: store.fetch_index(segment, IndexKind.TIME),
        lambda: store.read_manifest(TOPIC, PARTITION),
        lambda: store.copy_segment(segment, *paths(local)),
        lambda: store.commit(TOPIC, PARTITION, mf.empty(TOPIC, PARTITION), 0),
        lambda: store.delete_segment(segment),
        lambda: store.list_objects(TOPIC, PARTITION),
    ]
    for call in calls:
        started = time.monotonic()
        with pytest.raises(RemoteStorageUnavailableError) as info:
            call()
        assert info.value.retriable
        assert "s3://bucket/tiered/" in str(info.value)  # names what it tried to reach
        assert time.monotonic() - started < 5


def test_store_going_away_and_coming_back(closed_log: Log) -> None:
    """Stop the S3 server: reads fail with a retriable error; restart it on the same
    port (moto keeps its state in the process): the same store works again."""
    server, endpoint = start_moto()
    port = int(endpoint.rsplit(":", 1)[1])
    try:
        create_bucket(endpoint, "comeback")
        store = FsspecRemoteStore("s3://comeback/tiered", s3_options(endpoint), retries=0)
        local = closed_log.segments[0]
        segment = store.copy_segment(remote_segment(local, closed_log), *paths(local))
        stop_moto(server)
        with pytest.raises(RemoteStorageUnavailableError):
            store.fetch_range(segment, 0, 100)
        with pytest.raises(RemoteStorageUnavailableError):
            store.copy_segment(segment, *paths(local))
        from moto.server import ThreadedMotoServer

        server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        server.start()
        assert store.fetch_range(segment, 0, 100) == local.path.read_bytes()[:100]
    finally:
        stop_moto(server)


def test_a_reader_that_listed_the_partition_sees_versions_created_since(
    s3_bucket: S3Bucket, caplog: pytest.LogCaptureFixture
) -> None:
    """s3fs answers "not found" for a key missing from a directory listing it cached (an
    orphan scan, a tool's listing): the manifest read must not trust that listing for a
    version created after it."""
    writer, reader = make_store(s3_bucket), make_store(s3_bucket)
    first = writer.commit(TOPIC, PARTITION, mf.empty(TOPIC, PARTITION, TOPIC_ID), 0)
    assert "manifest.json" in reader.list_objects(TOPIC, PARTITION)  # cached by s3fs
    second = writer.commit(TOPIC, PARTITION, mf.with_log_start_offset(first, 4), 1)
    with caplog.at_level(logging.WARNING):
        assert reader.read_manifest(TOPIC, PARTITION) == second
    assert reader.manifests.torn_reads == 0 and "listed instead" not in caplog.text


# -- one object per segment, multipart in parallel parts (issue 24) ----------------------------


def _big_segment(closed_log: Log, tmp_path: Path, size: int) -> tuple[Any, list[Path]]:
    """A remote segment of ``size`` bytes of random ``.log`` (a byte-level upload test:
    the bytes need not be batches) and its local files."""
    import os

    local = closed_log.segments[0]
    log_path, index, timeindex = tmp_path / "big.log", tmp_path / "big.index", tmp_path / "big.ti"
    log_path.write_bytes(os.urandom(size))
    index.write_bytes(os.urandom(4096))
    timeindex.write_bytes(os.urandom(1200))
    segment = dataclasses.replace(remote_segment(local, closed_log), size_bytes=size)
    return segment, [log_path, index, timeindex]


def test_a_large_segment_is_one_multipart_object_sent_in_parallel_parts(
    s3_bucket: S3Bucket, closed_log: Log, tmp_path: Path
) -> None:
    part = 5 << 20  # S3's smallest part
    store = make_store(s3_bucket, copy_chunk_bytes=part, upload_parallelism=3)
    segment, files = _big_segment(closed_log, tmp_path, 3 * part + 12345)
    before = store.requests.puts
    segment = store.copy_segment(segment, *files)
    # 4 parts (the indexes ride in the last): start + 4 parts + complete.
    assert store.requests.puts - before == 6
    name = f"{segment.base_offset:020d}-{segment.segment_id}.segment"
    assert store.list_objects(TOPIC, PARTITION) == [name]
    sizes = [f.stat().st_size for f in files]
    assert [(p.kind, p.object, p.offset, p.size) for p in segment.parts] == [
        ("log", name, 0, sizes[0]),
        ("index", name, sizes[0], sizes[1]),
        ("timeindex", name, sizes[0] + sizes[1], sizes[2]),
    ]
    assert store.fetch_range(segment, 0, None) == files[0].read_bytes()  # CRC-checked
    assert (
        store.fetch_range(segment, part - 10, part + 10)
        == files[0].read_bytes()[part - 10 : part + 10]
    )
    assert store.fetch_index(segment, IndexKind.OFFSET) == files[1].read_bytes()
    assert store.fetch_index(segment, IndexKind.TIME) == files[2].read_bytes()


def test_a_failed_multipart_upload_leaves_no_object_and_no_pending_parts(
    s3_bucket: S3Bucket, closed_log: Log, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    part = 5 << 20
    store = make_store(s3_bucket, copy_chunk_bytes=part, upload_parallelism=2)
    segment, files = _big_segment(closed_log, tmp_path, 3 * part)
    real = store.uploads._put_part
    sent: list[int] = []

    def breaks_at_the_third_part(ids: dict[str, str], number: int, data: bytes) -> str:
        if number == 3:
            raise PermissionError("the upload is killed half-way")
        sent.append(number)
        return real(ids, number, data)

    monkeypatch.setattr(store.uploads, "_put_part", breaks_at_the_third_part)
    with pytest.raises(Exception, match="killed half-way"):
        store.copy_segment(segment, *files)
    assert sent  # some parts went up before the failure
    assert store.list_objects(TOPIC, PARTITION) == []  # nothing visible
    pending = store.fs.call_s3("list_multipart_uploads", Bucket=s3_bucket.name)
    assert pending.get("Uploads", []) == []  # aborted, not left behind
    monkeypatch.undo()
    segment = store.copy_segment(segment, *files)  # the retry starts over
    assert store.fetch_range(segment, 0, None) == files[0].read_bytes()


def test_a_tier_written_in_the_old_layout_reads_with_the_new_store(
    s3_bucket: S3Bucket, closed_log: Log
) -> None:
    old = make_store(s3_bucket, single_object=False)
    manifest = mf.empty(TOPIC, PARTITION, TOPIC_ID)
    for local in closed_log.segments[:-1]:
        segment = remote_segment(local, closed_log, state=SegmentState.COPY_FINISHED)
        segment = old.copy_segment(segment, *paths(local))
        manifest = old.commit(
            TOPIC, PARTITION, mf.with_segment(manifest, segment), manifest.version
        )
    new = make_store(s3_bucket)
    read = new.read_manifest(TOPIC, PARTITION)
    assert read.format_version == mf.LEGACY_FORMAT_VERSION
    for segment, local in zip(mf.committed_segments(read), closed_log.segments, strict=False):
        assert new.fetch_range(segment, 0, None) == local.path.read_bytes()
        assert new.fetch_index(segment, IndexKind.OFFSET) == local.offset_index.path.read_bytes()
    # New uploads beside old ones: a manifest mixing the layouts reads both.
    last = closed_log.segments[-2]
    mixed = dataclasses.replace(
        remote_segment(last, closed_log, state=SegmentState.COPY_FINISHED), segment_id="fresh-one"
    )
    mixed = new.copy_segment(mixed, *paths(last))
    assert new.fetch_range(mixed, 0, None) == last.path.read_bytes()
