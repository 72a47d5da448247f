"""RemoteSegmentReader answers exactly what the local segment and Log answer."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from tests.remote.conftest import paths, remote_segment
from tierlog.local.file_lease import FileSlice
from tierlog.local.log import Log
from tierlog.local.segment import LogSegment
from tierlog.records.header import peek_size
from tierlog.remote import manifest as mf
from tierlog.remote.api import (
    CorruptRemoteDataError,
    IndexKind,
    RemoteSegment,
    RemoteStorageError,
    SegmentState,
)
from tierlog.remote.chunk_cache import ChunkCache, ChunkNotCached
from tierlog.remote.fsspec_storage import FsspecRemoteStore
from tierlog.remote.segment_reader import RemoteSegmentReader

MAX_BYTES = (1, 61, 300, 4096, 20_000)


class CountingStore(FsspecRemoteStore):
    """Counts requests to the store, to check what the cache and the index save."""

    ranges = 0
    indexes = 0

    def fetch_range(self, segment: RemoteSegment, start: int, end: int | None) -> bytes:
        self.ranges += 1
        return super().fetch_range(segment, start, end)

    def fetch_index(self, segment: RemoteSegment, kind: IndexKind) -> bytes:
        self.indexes += 1
        return super().fetch_index(segment, kind)


@pytest.fixture
def store() -> CountingStore:
    return CountingStore(f"memory://reader-{uuid.uuid4().hex}")


def whole_batches_end(data: bytes) -> tuple[int, int]:
    """(bytes of the leading whole batches, -1): what a checked remote read keeps."""
    end = 0
    while (found := peek_size(data, end)) is not None and end + found[1] <= len(data):
        end += found[1]
    return end, -1


def upload(store: FsspecRemoteStore, log: Log) -> list[tuple[LogSegment, RemoteSegment]]:
    out = []
    for local in log.segments[:-1]:
        segment = remote_segment(local, log, state=SegmentState.COPY_FINISHED)
        segment = store.copy_segment(segment, *paths(local))
        out.append((local, segment))
    return out


@pytest.mark.parametrize("cached", [False, True], ids=["direct", "cached"])
def test_positions_and_reads_match_the_local_segment(
    store: CountingStore, closed_log: Log, tmp_path: Path, cached: bool
) -> None:
    cache = ChunkCache(tmp_path / "cache", 1 << 20, chunk_bytes=2048) if cached else None
    for local, segment in upload(store, closed_log):
        reader = RemoteSegmentReader(store, segment, cache, scan_bytes=4096)
        for offset in range(segment.base_offset - 1, segment.end_offset + 2):
            assert reader.find_position(offset) == local.position_of(offset), offset
            for max_bytes in MAX_BYTES:
                expected = local.read(max(offset, local.base_offset), max_bytes)
                got = reader.read(offset, max_bytes)
                # The local slice's whole batches: a remote read never ends in a partial
                # batch, which could not be checked before it is served.
                whole = expected.read() if expected else b""
                whole = whole[: whole_batches_end(whole)[0]]
                assert got == (whole or None), (offset, max_bytes)
        assert reader.read(segment.end_offset + 1, 100) is None
        first = local.path.read_bytes()
        fits = first[: whole_batches_end(first[:100])[0]]
        assert reader.read(segment.base_offset, 100, min_one_batch=False) == fits


def test_index_is_fetched_once_and_the_cache_saves_requests(
    store: CountingStore, closed_log: Log, tmp_path: Path
) -> None:
    (_, segment), *_ = upload(store, closed_log)
    cache = ChunkCache(tmp_path / "cache", 1 << 20, chunk_bytes=64 << 10)
    reader = RemoteSegmentReader(store, segment, cache)
    for offset in range(segment.base_offset, segment.end_offset + 1):
        reader.read(offset, 1000)
    assert store.indexes == 1
    assert store.ranges == 1  # the whole segment is one chunk
    again = RemoteSegmentReader(store, segment, cache)
    again.read(segment.end_offset, 1000)
    assert store.ranges == 1 and cache.hits > 0


@pytest.mark.parametrize("max_bytes", [1, 700, 1 << 20])
def test_a_replay_front_to_back_needs_no_index(
    store: CountingStore, closed_log: Log, max_bytes: int
) -> None:
    for local, segment in upload(store, closed_log):
        reader = RemoteSegmentReader(store, segment, None, scan_bytes=4096)
        got, offset = b"", segment.base_offset
        while (data := reader.read(offset, max_bytes)) is not None:
            got += data
            offset = reader._resume[0]  # what a consumer asks for next
        assert got == local.path.read_bytes()
    assert store.indexes == 0


def test_a_cached_only_read_sends_no_request_and_raises_when_it_would_wait(
    store: CountingStore, closed_log: Log, tmp_path: Path
) -> None:
    (_, segment), (_, following), *_ = upload(store, closed_log)
    cache = ChunkCache(tmp_path / "cache", 1 << 20, chunk_bytes=2048)
    reader = RemoteSegmentReader(store, segment, cache, scan_bytes=4096)
    with pytest.raises(ChunkNotCached):
        reader.read(segment.base_offset, 5000, cached_only=True)
    middle = segment.base_offset + 3
    with pytest.raises(ChunkNotCached):  # the offset index is not fetched yet
        reader.read(middle, 5000, cached_only=True)
    assert (store.ranges, store.indexes) == (0, 0)
    expected = reader.read(middle, 5000)
    requests = store.ranges, store.indexes
    assert reader.read(middle, 5000, cached_only=True) == expected
    assert (store.ranges, store.indexes) == requests
    with pytest.raises(ChunkNotCached):  # the next segment shares the cache, not its bytes
        RemoteSegmentReader(store, following, cache).read(
            following.base_offset, 100, cached_only=True
        )
    uncached = RemoteSegmentReader(store, segment, None)
    with pytest.raises(ChunkNotCached):
        uncached.read(segment.base_offset, 100, cached_only=True)


def test_a_cached_read_is_a_slice_of_one_chunk_file_holding_what_a_read_gives(
    store: CountingStore, closed_log: Log, tmp_path: Path
) -> None:
    chunk = 2048
    cache = ChunkCache(tmp_path / "cache", 1 << 20, chunk_bytes=chunk)
    buffer = bytearray()
    slices = answered_with_bytes = 0
    for _, segment in upload(store, closed_log):
        reader = RemoteSegmentReader(store, segment, cache, scan_bytes=4096)
        reader.read(segment.base_offset, 1 << 20)  # every chunk of the segment cached
        reader.find_position(segment.end_offset)  # and its index fetched
        requests = store.ranges, store.indexes
        for offset in range(segment.base_offset, segment.end_offset + 1):
            expected = reader.read(offset, 3000)
            assert expected
            got = reader.read_cached(offset, 3000, buffer)
            if isinstance(got, bytes):  # the first batch crosses into the next chunk file
                answered_with_bytes += 1
                assert got == expected
                continue
            assert isinstance(got, FileSlice)
            slices += 1
            position = reader.find_position(offset)
            assert position // chunk == (position + got.size - 1) // chunk  # one file
            assert got.position == position % chunk
            assert 0 < got.size <= len(expected) and got.read() == expected[: got.size]
            fd = got.fd
            got.release()
            with pytest.raises(OSError):  # the slice owned its file: released, closed
                os.fstat(fd)
        assert (store.ranges, store.indexes) == requests
    assert slices and answered_with_bytes


def test_timestamp_lookups_match_the_local_log(store: CountingStore, closed_log: Log) -> None:
    uploaded = upload(store, closed_log)
    m = mf.empty("orders", 3)
    for _, segment in uploaded:
        m = mf.with_segment(m, segment)
    readers = {s.segment_id: RemoteSegmentReader(store, s) for _, s in uploaded}
    remote_end = mf.end_offset(m)
    first = min(s.first_batch_timestamp for _, s in uploaded) - 100
    last = max(s.max_timestamp for _, s in uploaded) + 100
    checked = 0
    for timestamp in range(first, last, 37):
        expected = closed_log.offset_for_timestamp(timestamp)
        got = None
        for segment in mf.segments_for_timestamp(m, timestamp):
            got = readers[segment.segment_id].offset_for_timestamp(timestamp)
            if got is not None:
                break
        if got is None:
            # Only the active (local) segment, or nothing, holds the answer.
            assert expected is None or expected[0] >= remote_end, timestamp
        else:
            assert got == expected, timestamp
            checked += 1
    assert checked > 50


def test_timestamp_lookup_respects_the_log_start(store: CountingStore, closed_log: Log) -> None:
    (_, segment), *_ = upload(store, closed_log)
    reader = RemoteSegmentReader(store, segment)
    start = segment.base_offset + 3
    found = reader.offset_for_timestamp(-1, log_start_offset=start)
    assert found is not None and found[0] == start
    assert reader.offset_for_timestamp(segment.max_timestamp + 1) is None
    assert reader.offset_for_timestamp(0, log_start_offset=segment.end_offset + 1) is None


def test_large_batches_are_skipped_without_reading_them(
    store: CountingStore, closed_log: Log
) -> None:
    """Scanning headers reads only header windows: a batch larger than the window is
    stepped over by its length."""
    for local, segment in upload(store, closed_log):
        sizes = [h.size for _, h in local.batches()]
        if max(sizes) <= 4096:
            continue
        reader = RemoteSegmentReader(store, segment, scan_bytes=512)
        assert [(p, h) for p, h in reader.batches()] == list(local.batches())
        return
    pytest.fail("the fixture log has no large batch")


def test_damaged_indexes_fall_back_to_scanning(closed_log: Log, tmp_path: Path) -> None:
    # Segments described before parts were (no CRC-32C recorded), one object per part.
    store = FsspecRemoteStore(f"file://{tmp_path}/remote", single_object=False)
    local = closed_log.segments[1]
    segment = remote_segment(local, closed_log, state=SegmentState.COPY_FINISHED)
    store.copy_segment(segment, *paths(local))
    for kind in ("index", "timeindex"):
        Path(store.object_path(segment, kind)).write_bytes(b"\x00" * 5)
    reader = RemoteSegmentReader(store, segment)
    for offset in range(segment.base_offset, segment.end_offset + 1):
        assert reader.find_position(offset) == local.position_of(offset)


def test_corrupt_batch_header_is_a_storage_error(closed_log: Log, tmp_path: Path) -> None:
    store = FsspecRemoteStore(f"file://{tmp_path}/remote")
    local = closed_log.segments[0]
    segment = remote_segment(local, closed_log, state=SegmentState.COPY_FINISHED)
    segment = store.copy_segment(segment, *paths(local))
    path = Path(store.object_path(segment, "log"))
    data = bytearray(path.read_bytes())
    data[16] = 7  # magic of the first batch
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptRemoteDataError, match="the batch at byte 0 of") as info:
        RemoteSegmentReader(store, segment).read(segment.base_offset, 100)
    assert isinstance(info.value, RemoteStorageError) and info.value.retriable
    assert info.value.object_url == store.object_url(segment)


@pytest.mark.parametrize("ahead", [0, 1, 3])
@pytest.mark.parametrize("chunk_bytes", [700, 4096, 1 << 20])
def test_chunks_give_the_segment_whole_with_ranges_fetched_ahead(
    store: CountingStore, closed_log: Log, ahead: int, chunk_bytes: int
) -> None:
    for local, segment in upload(store, closed_log):
        data = local.path.read_bytes()
        for offset in (segment.base_offset, (segment.base_offset + segment.end_offset) // 2):
            position = local.position_of(offset)
            reader = RemoteSegmentReader(store, segment)
            got = b"".join(bytes(c) for c in reader.chunks(offset, chunk_bytes, ahead=ahead))
            assert got == data[position:]


class ShortReadStore(CountingStore):
    """Answers one range short, as a store whose object ends early would."""

    short_at: int | None = None

    def fetch_range(self, segment: RemoteSegment, start: int, end: int | None) -> bytes:
        data = super().fetch_range(segment, start, end)
        if start == self.short_at:
            return data[: len(data) // 2]
        return data


@pytest.mark.parametrize("ahead", [0, 2])
def test_a_short_range_is_continued_from_where_it_ended(closed_log: Log, ahead: int) -> None:
    store = ShortReadStore(f"memory://reader-{uuid.uuid4().hex}")
    local, segment = upload(store, closed_log)[0]
    store.short_at = 1400
    reader = RemoteSegmentReader(store, segment)
    got = b"".join(bytes(c) for c in reader.chunks(segment.base_offset, 1400, ahead=ahead))
    assert got == local.path.read_bytes()


def test_a_caller_that_stops_early_leaves_no_range_thread_waiting(
    store: CountingStore, closed_log: Log
) -> None:
    local, segment = upload(store, closed_log)[0]
    fetched = []
    for ahead in (0, 3):
        before = store.ranges
        chunks = RemoteSegmentReader(store, segment).chunks(segment.base_offset, 512, ahead=ahead)
        first = next(chunks)
        assert bytes(first) == local.path.read_bytes()[: len(first)]
        chunks.close()  # the Spark split reached its end
        fetched.append(store.ranges - before)
    # Ranges fetched for the first whole batches, and at most `ahead` beyond them.
    assert fetched[0] < fetched[1] <= fetched[0] + 3
    assert local.size > 512 * (fetched[0] + 3)  # there was more to fetch
