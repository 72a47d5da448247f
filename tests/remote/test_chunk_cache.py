"""ChunkCache: aligned chunks, hit/miss accounting, LRU bound, restart, file slices."""

from __future__ import annotations

import os
import random
import threading
import uuid
from pathlib import Path

import pytest

from tierlog.remote.api import RemoteSegment, RemoteStorageError, SegmentState
from tierlog.remote.chunk_cache import ChunkCache, ChunkSlice

CHUNK = 1000


def make_segment(size: int, segment_id: str | None = None) -> RemoteSegment:
    return RemoteSegment(
        topic="orders",
        partition=0,
        topic_id=uuid.UUID(int=1),
        base_offset=0,
        end_offset=99,
        segment_id=segment_id or str(uuid.uuid4()),
        size_bytes=size,
        max_timestamp=-1,
        first_batch_timestamp=-1,
        leader_epochs=(),
        state=SegmentState.COPY_FINISHED,
        created_ms=0,
    )


class Source:
    """The remote object: deterministic bytes, and a record of every fetch."""

    def __init__(self, size: int, seed: int = 1) -> None:
        self.data = random.Random(seed).randbytes(size)
        self.fetches: list[tuple[int, int]] = []
        self._lock = threading.Lock()

    def __call__(self, start: int, end: int) -> bytes:
        with self._lock:
            self.fetches.append((start, end))
        return self.data[start:end]


def test_reads_whole_aligned_chunks_and_counts_hits(tmp_path: Path) -> None:
    cache = ChunkCache(tmp_path / "cache", max_bytes=10 * CHUNK, chunk_bytes=CHUNK)
    seg, src = make_segment(4500), Source(4500)
    assert cache.get(seg, 10, 100, src) == src.data[10:100]
    assert src.fetches == [(0, 1000)] and (cache.hits, cache.misses) == (0, 1)
    assert cache.get(seg, 500, 700, src) == src.data[500:700]
    assert (cache.hits, cache.misses) == (1, 1)
    assert cache.get(seg, 900, 2100, src) == src.data[900:2100]  # spans three chunks
    assert src.fetches == [(0, 1000), (1000, 2000), (2000, 3000)]
    assert (cache.hits, cache.misses) == (2, 3)
    # The last chunk is short; reads past the end are clipped.
    assert cache.get(seg, 4400, 9999, src) == src.data[4400:]
    assert src.fetches[-1] == (4000, 4500)
    assert cache.get(seg, 4500, 4600, src) == b""
    assert cache.size == 3 * CHUNK + 500 and len(cache) == 4


def test_eviction_keeps_the_size_bound_lru_first(tmp_path: Path) -> None:
    cache = ChunkCache(tmp_path / "cache", max_bytes=3 * CHUNK, chunk_bytes=CHUNK)
    seg, src = make_segment(10 * CHUNK), Source(10 * CHUNK)
    for index in range(3):
        cache.get(seg, index * CHUNK, index * CHUNK + 1, src)
    cache.get(seg, 0, 1, src)  # chunk 0 is now the most recent
    cache.get(seg, 3 * CHUNK, 3 * CHUNK + 1, src)  # evicts chunk 1, the LRU
    assert (seg.segment_id, 1) not in cache
    assert (seg.segment_id, 0) in cache and (seg.segment_id, 3) in cache
    for index in range(4, 10):
        cache.get(seg, index * CHUNK, (index + 1) * CHUNK, src)
        assert cache.size <= 3 * CHUNK
    files = list((tmp_path / "cache").iterdir())
    assert len(files) == 3 and sum(f.stat().st_size for f in files) == cache.size
    assert cache.evictions == 7


def test_restart_keeps_complete_chunks_and_drops_the_rest(tmp_path: Path) -> None:
    directory = tmp_path / "cache"
    cache = ChunkCache(directory, max_bytes=10 * CHUNK, chunk_bytes=CHUNK)
    seg, src = make_segment(2500), Source(2500)
    cache.get(seg, 0, 2500, src)
    cache.close()
    name = f"{seg.segment_id}.{CHUNK}.0.chunk"
    # A crash mid-write leaves a temp file; another chunk size, junk and a cut file too.
    (directory / f"{name}.tmp-0123abcd").write_bytes(b"partial")
    (directory / f"{seg.segment_id}.4096.0.chunk").write_bytes(b"x" * 10)
    (directory / "notes.txt").write_text("junk")
    (directory / f"{seg.segment_id}.{CHUNK}.7.chunk").write_bytes(b"")

    reopened = ChunkCache(directory, max_bytes=10 * CHUNK, chunk_bytes=CHUNK)
    assert sorted(p.name for p in directory.iterdir()) == sorted(
        f"{seg.segment_id}.{CHUNK}.{i}.chunk" for i in range(3)
    )
    assert len(reopened) == 3 and reopened.size == 2500
    fetched = len(src.fetches)
    assert reopened.get(seg, 0, 2500, src) == src.data
    assert len(src.fetches) == fetched and reopened.hits == 3


def test_restart_with_a_smaller_bound_evicts_least_recent(tmp_path: Path) -> None:
    directory = tmp_path / "cache"
    cache = ChunkCache(directory, max_bytes=10 * CHUNK, chunk_bytes=CHUNK)
    seg, src = make_segment(4 * CHUNK), Source(4 * CHUNK)
    for index in range(4):
        cache.get(seg, index * CHUNK, index * CHUNK + 1, src)
        path = directory / f"{seg.segment_id}.{CHUNK}.{index}.chunk"
        os.utime(path, (1_000_000 + index, 1_000_000 + index))
    os.utime(directory / f"{seg.segment_id}.{CHUNK}.0.chunk", (2_000_000, 2_000_000))
    cache.close()
    smaller = ChunkCache(directory, max_bytes=2 * CHUNK, chunk_bytes=CHUNK)
    assert smaller.size == 2 * CHUNK
    assert (seg.segment_id, 0) in smaller and (seg.segment_id, 3) in smaller


def test_restart_after_a_crash_starts_empty(tmp_path: Path) -> None:
    """Chunks are not fsynced: without a clean close, none of them is trusted."""
    directory = tmp_path / "cache"
    cache = ChunkCache(directory, max_bytes=10 * CHUNK, chunk_bytes=CHUNK)
    seg, src = make_segment(2500), Source(2500)
    cache.get(seg, 0, 2500, src)  # no close(): as if the broker died
    reopened = ChunkCache(directory, max_bytes=10 * CHUNK, chunk_bytes=CHUNK)
    assert len(reopened) == 0 and list(directory.iterdir()) == []
    assert reopened.get(seg, 0, 2500, src) == src.data  # fetched again, correct


def test_short_fetch_is_an_error_and_caches_nothing(tmp_path: Path) -> None:
    cache = ChunkCache(tmp_path / "cache", max_bytes=10 * CHUNK, chunk_bytes=CHUNK)
    seg = make_segment(3000)
    with pytest.raises(RemoteStorageError, match="expected 1000"):
        cache.get(seg, 0, 10, lambda start, end: b"short")
    assert len(cache) == 0 and not list((tmp_path / "cache").iterdir())


def test_chunk_files_for_sendfile(tmp_path: Path) -> None:
    cache = ChunkCache(tmp_path / "cache", max_bytes=10 * CHUNK, chunk_bytes=CHUNK)
    seg, src = make_segment(2500), Source(2500)
    whole = cache.chunk_file(seg, 2, src)
    assert whole == ChunkSlice(whole.path, 0, 500)
    assert whole.path.read_bytes() == src.data[2000:2500]
    part = cache.file_slice(seg, 1200, 2300, src)
    assert (part.position, part.length) == (200, 800)
    with open(part.path, "rb") as f:
        f.seek(part.position)
        assert f.read(part.length) == src.data[1200:2000]
    with pytest.raises(ValueError):
        cache.chunk_file(seg, 3, src)


def test_remove_segment_and_clear(tmp_path: Path) -> None:
    cache = ChunkCache(tmp_path / "cache", max_bytes=10 * CHUNK, chunk_bytes=CHUNK)
    a, b = make_segment(2000), make_segment(1000)
    cache.get(a, 0, 2000, Source(2000))
    cache.get(b, 0, 1000, Source(1000, seed=2))
    assert cache.remove_segment(a.segment_id) == 2
    assert cache.size == 1000 and len(list((tmp_path / "cache").iterdir())) == 1
    cache.clear()
    assert cache.size == 0 and not list((tmp_path / "cache").iterdir())


def test_needs_room_for_one_chunk(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least one chunk"):
        ChunkCache(tmp_path, max_bytes=10, chunk_bytes=CHUNK)


def test_concurrent_readers_see_right_bytes_within_the_bound(tmp_path: Path) -> None:
    cache = ChunkCache(tmp_path / "cache", max_bytes=5 * CHUNK, chunk_bytes=CHUNK)
    segments = [make_segment(20 * CHUNK) for _ in range(3)]
    sources = [Source(20 * CHUNK, seed=n) for n in range(3)]
    failures: list[str] = []

    def reader(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(200):
            n = rng.randrange(3)
            start = rng.randrange(20 * CHUNK)
            end = start + rng.randrange(1, 3 * CHUNK)
            if cache.get(segments[n], start, end, sources[n]) != sources[n].data[start:end]:
                failures.append(f"{n} {start} {end}")

    threads = [threading.Thread(target=reader, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not failures
    assert cache.size <= 5 * CHUNK
    on_disk = sum(p.stat().st_size for p in (tmp_path / "cache").iterdir())
    assert on_disk == cache.size
