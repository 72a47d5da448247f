"""Read-ahead for replay from an object store: parallel ranged GETs of the chunks a
consumer will read next, into the chunk cache.

A consumer replaying a remote partition reads its segments front to back in fetches of
about a MiB. Without read-ahead each 4 MiB chunk is fetched when the first fetch misses
it, one GET at a time, and the consumer waits for every one (Aiven's tiered-storage users
reported the same sequential-GET ceiling; Kafka's answer is a pool of
``remote.log.reader.threads``, Redpanda's a read-ahead). After every remote read this
module starts the GETs of the next ``window_chunks`` chunks' worth of bytes of the
partition (crossing into the following segments), on a pool of ``threads``, so the store
works on several ranges at once while the consumer reads the one it has.

Bounds:

* a window per partition, in bytes: at most ``window_chunks`` x the chunk size ahead of
  the last read, and no more than half the cache (read-ahead must not evict what the
  consumer is about to read). Bytes, not chunks: a segment smaller than a chunk is one
  short chunk, and counting it as a whole one kept a topic of 1 MiB segments to a
  quarter of the window (bench/tiered.py --quick: two GETs in flight against the raw
  GET's ten). A chunk larger than what is left of the window waits for a later read, so
  a cache of one chunk reads ahead only segments smaller than half of it;
* a global memory cap: the bytes of chunks being fetched (held in memory until written to
  the cache) never exceed ``max_bytes`` over all partitions; a chunk that does not fit
  waits for the next read to be asked for again. At least one chunk is always allowed
  when none is in flight, so a cap below a chunk still makes progress.

The chunks go into the ``ChunkCache`` (a cache, not a copy: a read finds them there, or
waits for the GET in flight rather than sending a second one).

Thread-safe: ``advise`` is called from fetch threads; one lock guards the in-flight set.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor

from tierlog.remote.api import RemoteSegment
from tierlog.remote.chunk_cache import ChunkCache, Fetch

log = logging.getLogger(__name__)

# Kafka's remote.log.reader.threads default.
DEFAULT_THREADS = 10
# 4 chunks of 4 MiB ahead per partition: enough GETs in flight to cover a store's
# latency at a consumer's pace, little enough that a few partitions share the cap.
DEFAULT_WINDOW_CHUNKS = 4
# The memory of all read-ahead GETs in flight together.
DEFAULT_MAX_BYTES = 64 << 20


class ReadAhead:
    """Args:
    cache: where chunks go (its chunk size is the unit of read-ahead).
    window_chunks: the window ahead of a partition's last read, in chunks' worth of bytes
        (``window_bytes``, at most half the cache); 0 disables.
    max_bytes: cap on the bytes of all read-ahead fetches in flight.
    executor: runs the fetches (None: a pool of ``threads`` threads, owned and closed).
    threads: the pool's size when no executor is given (remote.log.reader.threads).
    """

    def __init__(
        self,
        cache: ChunkCache,
        window_chunks: int = DEFAULT_WINDOW_CHUNKS,
        max_bytes: int = DEFAULT_MAX_BYTES,
        *,
        executor: Executor | None = None,
        threads: int = DEFAULT_THREADS,
    ) -> None:
        self.cache = cache
        # Never more than half the cache ahead: the rest holds what is being read.
        self.window_bytes = max(0, min(window_chunks * cache.chunk_bytes, cache.max_bytes // 2))
        self.max_bytes = max_bytes
        self._owned = executor is None
        self._executor: Executor = executor or ThreadPoolExecutor(
            max(1, threads), thread_name_prefix="remote-read-ahead"
        )
        self._lock = threading.Lock()
        self._in_flight: dict[tuple[str, int], int] = {}  # chunk -> its bytes
        self.in_flight_bytes = 0
        self.peak_in_flight_bytes = 0
        self.started = 0  # chunk fetches started
        self.refused = 0  # chunks not started for the memory cap
        self.failed = 0

    def advise(
        self,
        segments: Sequence[tuple[RemoteSegment, Fetch]],
        position: int,
    ) -> int:
        """A read of ``segments[0]`` ended at byte ``position``: start fetching the
        chunks after it, up to the window, continuing into ``segments[1:]`` (the
        partition's following segments, each with its ranged fetch). Returns how many
        fetches were started.
        """
        if self.window_bytes == 0 or not segments:
            return 0
        chunk = self.cache.chunk_bytes
        wanted: list[tuple[RemoteSegment, Fetch, int, int]] = []
        room = self.window_bytes
        first, _ = segments[0]
        index = position // chunk
        full = False
        for segment, fetch in segments:
            last = (segment.size_bytes - 1) // chunk
            start = index if segment is first else 0
            for i in range(start, last + 1):
                length = min(chunk, segment.size_bytes - i * chunk)
                full = length > room
                if full:
                    break
                wanted.append((segment, fetch, i, length))
                room -= length
            if full or room <= 0:
                break
        started = 0
        for segment, fetch, i, length in wanted:
            key = (segment.segment_id, i)
            if self.cache.has_or_fetching(*key):
                continue
            with self._lock:
                if key in self._in_flight:
                    continue
                if self._in_flight and self.in_flight_bytes + length > self.max_bytes:
                    self.refused += 1
                    break  # the cap: the next read asks again
                self._in_flight[key] = length
                self.in_flight_bytes += length
                self.peak_in_flight_bytes = max(self.peak_in_flight_bytes, self.in_flight_bytes)
                self.started += 1
            future = self._executor.submit(self.cache.prefetch, segment, i, fetch)
            future.add_done_callback(self._done_callback(key))
            started += 1
        return started

    def _done_callback(self, key: tuple[str, int]) -> Callable[[Future[None]], None]:
        def done(future: Future[None]) -> None:
            with self._lock:
                self.in_flight_bytes -= self._in_flight.pop(key)
                if not future.cancelled() and future.exception() is not None:
                    self.failed += 1
            if not future.cancelled() and future.exception() is not None:
                # The consumer's own read fetches it again and reports the error.
                log.debug("read-ahead of %s chunk %d failed: %s", *key, future.exception())

        return done

    def close(self) -> None:
        if self._owned:
            self._executor.shutdown(wait=False, cancel_futures=True)
