"""ReadAhead: the window per partition, the global memory cap, and chunks fetched once."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from concurrent.futures import Executor, Future
from pathlib import Path
from typing import Any

from tierlog.remote.api import RemoteSegment, SegmentState
from tierlog.remote.chunk_cache import ChunkCache
from tierlog.remote.read_ahead import ReadAhead

CHUNK = 1000


class HeldExecutor(Executor):
    """Runs nothing until told: the test sees exactly what is in flight."""

    def __init__(self) -> None:
        self.queued: list[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]]] = []

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        self.queued.append((future, fn, args))
        return future

    def run_one(self) -> None:
        future, fn, args = self.queued.pop(0)
        try:
            future.set_result(fn(*args))
        except Exception as exc:
            future.set_exception(exc)


def segment(name: str, size: int, base: int = 0) -> RemoteSegment:
    return RemoteSegment(
        "t", 0, uuid.UUID(int=1), base, base + 9, name, size, 1, 1, ((0, base),),
        SegmentState.COPY_FINISHED, 0,
    )  # fmt: skip


class Store:
    """Ranged fetches of made-up bytes, counted."""

    def __init__(self) -> None:
        self.fetched: list[tuple[str, int, int]] = []

    def fetch_of(self, seg: RemoteSegment) -> Callable[[int, int], bytes]:
        def fetch(start: int, end: int) -> bytes:
            self.fetched.append((seg.segment_id, start, end))
            return bytes(end - start)

        return fetch


def test_the_window_runs_ahead_of_the_read_and_into_the_next_segment(tmp_path: Path) -> None:
    cache = ChunkCache(tmp_path, 100 * CHUNK, chunk_bytes=CHUNK)
    held = HeldExecutor()
    ahead = ReadAhead(cache, window_chunks=4, max_bytes=100 * CHUNK, executor=held)
    store = Store()
    a, b = segment("a", 3 * CHUNK + 10), segment("b", 5 * CHUNK, base=10)
    # A read ended inside chunk 1 of a: chunks 1..3 of a, then chunk 0 of b.
    assert ahead.advise([(a, store.fetch_of(a)), (b, store.fetch_of(b))], CHUNK + 5) == 4
    while held.queued:
        held.run_one()
    assert sorted(store.fetched) == [
        ("a", CHUNK, 2 * CHUNK),
        ("a", 2 * CHUNK, 3 * CHUNK),
        ("a", 3 * CHUNK, 3 * CHUNK + 10),
        ("b", 0, CHUNK),
    ]
    assert ("a", 3) in cache and ("b", 0) in cache
    # Cached chunks are not fetched again; the window moves on with the next read.
    assert ahead.advise([(b, store.fetch_of(b))], 5) == 3
    assert ahead.in_flight_bytes == 3 * CHUNK


def held_read_ahead(
    tmp_path: Path, window_chunks: int, max_bytes: int
) -> tuple[HeldExecutor, ReadAhead, Store]:
    """A ReadAhead over a cache of 100 chunks whose fetches wait to be run, and its store."""
    cache = ChunkCache(tmp_path, 100 * CHUNK, chunk_bytes=CHUNK)
    held = HeldExecutor()
    ahead = ReadAhead(cache, window_chunks=window_chunks, max_bytes=max_bytes, executor=held)
    return held, ahead, Store()


def test_the_memory_cap_holds_over_all_partitions(tmp_path: Path) -> None:
    held, ahead, store = held_read_ahead(tmp_path, 8, 5 * CHUNK)
    p1, p2 = segment("p1", 20 * CHUNK), segment("p2", 20 * CHUNK)
    assert ahead.advise([(p1, store.fetch_of(p1))], 0) == 5  # the cap, not the window
    assert ahead.advise([(p2, store.fetch_of(p2))], 0) == 0  # nothing left for another
    assert ahead.in_flight_bytes == 5 * CHUNK and ahead.refused == 2
    held.run_one()  # one fetch done: room for one more chunk
    assert ahead.in_flight_bytes == 4 * CHUNK
    assert ahead.advise([(p2, store.fetch_of(p2))], 0) == 1
    while held.queued:
        held.run_one()
        assert ahead.in_flight_bytes <= 5 * CHUNK
    assert ahead.peak_in_flight_bytes == 5 * CHUNK
    assert ahead.in_flight_bytes == 0


def test_a_cap_below_one_chunk_still_fetches_one_at_a_time(tmp_path: Path) -> None:
    cache = ChunkCache(tmp_path, 100 * CHUNK, chunk_bytes=CHUNK)
    held = HeldExecutor()
    ahead = ReadAhead(cache, window_chunks=4, max_bytes=1, executor=held)
    s = segment("s", 10 * CHUNK)
    assert ahead.advise([(s, Store().fetch_of(s))], 0) == 1


def test_the_window_is_at_most_half_the_cache(tmp_path: Path) -> None:
    cache = ChunkCache(tmp_path, 4 * CHUNK, chunk_bytes=CHUNK)
    ahead = ReadAhead(cache, window_chunks=16, max_bytes=100 * CHUNK, executor=HeldExecutor())
    assert ahead.window_bytes == 2 * CHUNK


def test_the_window_counts_bytes_so_small_segments_fill_it(tmp_path: Path) -> None:
    _, ahead, store = held_read_ahead(tmp_path, 2, 100 * CHUNK)
    # Segments of a quarter chunk: the 2-chunk window holds 8 of them, not 2.
    small = [segment(f"s{n}", CHUNK // 4, base=10 * n) for n in range(12)]
    assert ahead.advise([(s, store.fetch_of(s)) for s in small], 0) == 8
    assert ahead.in_flight_bytes == 2 * CHUNK
    # A chunk that does not fit what is left of the window waits for the next read.
    big = [segment("a", CHUNK // 2), segment("b", 3 * CHUNK, base=10)]
    assert ahead.advise([(s, store.fetch_of(s)) for s in big], 0) == 2  # a, then b's first


def test_a_cache_of_one_chunk_reads_ahead_small_segments_only(tmp_path: Path) -> None:
    # Half the cache is less than a chunk: a whole chunk ahead would evict the one being
    # read, but segments smaller than the room still fit.
    cache = ChunkCache(tmp_path, CHUNK, chunk_bytes=CHUNK)
    ahead = ReadAhead(cache, window_chunks=4, max_bytes=100 * CHUNK, executor=HeldExecutor())
    assert ahead.window_bytes == CHUNK // 2
    store = Store()
    whole = segment("w", 3 * CHUNK)
    assert ahead.advise([(whole, store.fetch_of(whole))], 0) == 0
    small = [segment(f"s{n}", CHUNK // 5, base=10 * n) for n in range(4)]
    assert ahead.advise([(s, store.fetch_of(s)) for s in small], 0) == 2


def test_a_read_of_a_chunk_being_fetched_ahead_waits_for_it_instead_of_a_second_get(
    tmp_path: Path,
) -> None:
    import threading

    cache = ChunkCache(tmp_path, 100 * CHUNK, chunk_bytes=CHUNK)
    s = segment("s", 4 * CHUNK)
    release = threading.Event()
    calls: list[int] = []

    def slow_fetch(start: int, end: int) -> bytes:
        calls.append(start)
        release.wait(10)
        return bytes(end - start)

    ahead = ReadAhead(cache, window_chunks=2, max_bytes=100 * CHUNK, threads=2)
    try:
        assert ahead.advise([(s, slow_fetch)], 0) == 2
        reader = threading.Thread(target=lambda: cache.get(s, 10, 20, slow_fetch))
        reader.start()
        release.set()
        reader.join(10)
        assert not reader.is_alive()
        assert sorted(calls) == [0, CHUNK]  # chunk 0 fetched once, by the read-ahead
    finally:
        ahead.close()
