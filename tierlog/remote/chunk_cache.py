"""A bounded on-disk cache of remote segment bytes, in fixed-size aligned chunks.

Remote reads go through it (DESIGN.md "Remote tier": "through a bounded local chunk
cache"; ``remote.log.reader.cache.bytes``), like Kafka's remote index cache and the chunk
caches of KIP-405 plugins: consumers replaying a segment read it front to back in small
fetches, and each chunk is fetched from the store once.

Chunk ``i`` of a segment covers ``.log`` bytes ``[i * chunk_bytes, (i + 1) * chunk_bytes)``
(the last one is shorter). One file per chunk, in one directory::

    <directory>/<segment_id>.<chunk_bytes>.<i>.chunk     exactly the chunk's bytes
    <directory>/<...>.chunk.tmp-<random>                  being written; never trusted

A chunk is written to a temp name and renamed, so a file with a final name is whole while
the machine runs. Chunks are not fsynced (it is a cache: the fsync made both the write
and the later eviction's unlink several times slower, measured); instead ``close`` leaves
a ``.clean`` marker, and a start without one (a crash or power loss could leave renamed
but unwritten chunks) begins with an empty cache. On a clean start the cache deletes temp
files and files of another chunk size and rebuilds its index from the rest, least
recently used first by mtime (touched on every hit). Eviction is LRU by total bytes, so
the directory stays within ``max_bytes``.

Thread-safe: one lock guards the index and the renames/unlinks that must agree with it;
fetches, reads and chunk writes happen outside it. A chunk being fetched is fetched once:
a second thread missing it (a fetch catching up with the read-ahead that is already
fetching it, ``tierlog.remote.read_ahead``) waits for that fetch instead of sending a
second GET, and fetches it itself only if that one failed. A read given ``CACHED_ONLY``
as its fetch never waits: it raises ``ChunkNotCached`` for a chunk that is not there (the
event loop serves cache hits itself, ``tierlog.remote.remote_reads``).
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from tierlog.remote.api import RemoteSegment, RemoteStorageError

log = logging.getLogger(__name__)

# 4 MiB: a few fetch.max.bytes-sized reads per request to the store, small enough that
# a cache of a few hundred MiB holds many segments' read positions.
DEFAULT_CHUNK_BYTES = 4 << 20
_SUFFIX = ".chunk"
_CLEAN_MARKER = ".clean"
_TMP = ".tmp-"

Fetch = Callable[[int, int], bytes]


class ChunkNotCached(Exception):
    """A read with ``CACHED_ONLY`` needed a chunk that is not in the cache (or is only
    being fetched): the caller reads again where waiting is allowed."""


def CACHED_ONLY(start: int, end: int) -> bytes:
    """The ``fetch`` of a read that must not wait for the store (``ChunkNotCached``)."""
    raise ChunkNotCached(f"bytes [{start}, {end}) are not cached")


class ChunkSlice(NamedTuple):
    """Bytes ``[position, position + length)`` of a cached chunk file (for ``sendfile``).

    The file may be evicted at any time: open it at once and fall back to ``get`` on
    ``FileNotFoundError`` (an open descriptor keeps working after eviction).
    """

    path: Path
    position: int
    length: int


class ChunkCache:
    """LRU cache of remote segment chunks on local disk.

    Args:
        directory: where chunk files live (created; the cache owns everything in it).
        max_bytes: bound on the total size of chunk files; at least one chunk.
        chunk_bytes: chunk size; chunks of another size found on start are deleted.
    """

    def __init__(
        self, directory: Path, max_bytes: int, chunk_bytes: int = DEFAULT_CHUNK_BYTES
    ) -> None:
        if not 0 < chunk_bytes <= max_bytes:
            raise ValueError(
                f"the cache must hold at least one chunk: max_bytes={max_bytes} "
                f"chunk_bytes={chunk_bytes} (pass no cache to disable caching)"
            )
        self.directory = Path(directory)
        self.max_bytes = max_bytes
        self.chunk_bytes = chunk_bytes
        self.hits = 0
        self.misses = 0
        self.evictions = 0
        self._lock = threading.Lock()
        # Chunks being fetched, each with the event its fetch sets when it is over.
        self._fetching: dict[tuple[str, int], threading.Event] = {}
        self._entries: OrderedDict[tuple[str, int], int] = OrderedDict()  # LRU first
        self._size = 0
        self.directory.mkdir(parents=True, exist_ok=True)
        self._load()

    @property
    def size(self) -> int:
        """Bytes of chunk files in the cache."""
        return self._size

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: tuple[str, int]) -> bool:
        """Whether chunk ``(segment_id, index)`` is cached."""
        return key in self._entries

    # -- reading -------------------------------------------------------------------------

    def get(self, segment: RemoteSegment, start: int, end: int, fetch: Fetch) -> bytes:
        """Bytes ``[start, end)`` of the segment's ``.log`` (clipped to its size), from
        cached chunks, fetching missing whole chunks with ``fetch(chunk_start, chunk_end)``.

        Raises:
            RemoteStorageError: ``fetch`` returned the wrong number of bytes; whatever
                ``fetch`` raises.
        """
        end = min(end, segment.size_bytes)
        if start < 0:
            raise ValueError(f"negative start {start}")
        if start >= end:
            return b""
        parts = []
        for index in range(start // self.chunk_bytes, (end - 1) // self.chunk_bytes + 1):
            chunk_start = index * self.chunk_bytes
            lo = max(start, chunk_start) - chunk_start
            hi = min(end, chunk_start + self.chunk_bytes) - chunk_start
            parts.append(self._read(segment, index, lo, hi, fetch))
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def chunk_file(self, segment: RemoteSegment, index: int, fetch: Fetch) -> ChunkSlice:
        """The file of whole chunk ``index`` (fetched first if missing)."""
        length = self._chunk_length(segment, index)
        if length <= 0:
            raise ValueError(f"segment {segment.segment_id} has no chunk {index}")
        self._read(segment, index, 0, 0, fetch)
        return ChunkSlice(self._path(segment.segment_id, index), 0, length)

    def file_slice(self, segment: RemoteSegment, start: int, end: int, fetch: Fetch) -> ChunkSlice:
        """The part of ``[start, end)`` lying in the chunk that holds ``start``, as a
        slice of its file; call again from ``start + length`` for the rest."""
        index = start // self.chunk_bytes
        whole = self.chunk_file(segment, index, fetch)
        position = start - index * self.chunk_bytes
        length = min(end, segment.size_bytes, (index + 1) * self.chunk_bytes) - start
        return ChunkSlice(whole.path, position, max(0, length))

    def open_cached(self, segment: RemoteSegment, index: int) -> int | None:
        """A descriptor of chunk ``index``'s file (the caller closes it), None when the
        chunk is not cached; never fetches and never waits. A hit, as for ``get``."""
        key = (segment.segment_id, index)
        with self._lock:
            if key not in self._entries:
                return None
            self._entries.move_to_end(key)
        try:
            fd = os.open(self._path(*key), os.O_RDONLY)
        except FileNotFoundError:
            return None  # evicted since
        os.utime(fd)  # recency survives a restart
        with self._lock:
            self.hits += 1
        return fd

    def _chunk_length(self, segment: RemoteSegment, index: int) -> int:
        start = index * self.chunk_bytes
        return min(self.chunk_bytes, segment.size_bytes - start)

    def _read(self, segment: RemoteSegment, index: int, lo: int, hi: int, fetch: Fetch) -> bytes:
        key = (segment.segment_id, index)
        path = self._path(*key)
        with self._lock:
            cached = key in self._entries
            if cached:
                self._entries.move_to_end(key)
        if cached:
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                pass  # evicted since: fetch it again
            else:
                try:
                    data = os.pread(fd, hi - lo, lo)
                    os.utime(fd)  # recency survives a restart
                finally:
                    os.close(fd)
                with self._lock:
                    self.hits += 1
                return data
        if fetch is CACHED_ONLY:
            raise ChunkNotCached(f"chunk {index} of segment {segment.segment_id}")
        with self._lock:
            pending = self._fetching.get(key)
            if pending is None:
                self.misses += 1
                mine = self._fetching[key] = threading.Event()
        if pending is not None:
            pending.wait()
            return self._read(segment, index, lo, hi, fetch)  # cached now, or fetch it
        try:
            data = self._fetch_chunk(segment, index, fetch)
            self._store(key, path, data)
        finally:
            with self._lock:
                del self._fetching[key]
            mine.set()
        return data[lo:hi]

    def _fetch_chunk(self, segment: RemoteSegment, index: int, fetch: Fetch) -> bytes:
        chunk_start = index * self.chunk_bytes
        length = self._chunk_length(segment, index)
        data = fetch(chunk_start, chunk_start + length)
        if len(data) != length:
            raise RemoteStorageError(
                f"segment {segment.segment_id}: fetched {len(data)} bytes of chunk {index}, "
                f"expected {length} (remote object shorter than its manifest entry?)"
            )
        return data

    def has_or_fetching(self, segment_id: str, index: int) -> bool:
        """Whether chunk ``index`` is cached or being fetched (read-ahead skips it)."""
        key = (segment_id, index)
        with self._lock:
            return key in self._entries or key in self._fetching

    def prefetch(self, segment: RemoteSegment, index: int, fetch: Fetch) -> None:
        """Fetch chunk ``index`` into the cache unless it is there (read-ahead)."""
        if self._chunk_length(segment, index) > 0 and not self.has_or_fetching(
            segment.segment_id, index
        ):
            self._read(segment, index, 0, 0, fetch)

    # -- writing and eviction ------------------------------------------------------------

    def _store(self, key: tuple[str, int], path: Path, data: bytes) -> None:
        tmp = path.with_name(f"{path.name}{_TMP}{uuid.uuid4().hex}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        except BaseException:
            os.close(fd)
            tmp.unlink(missing_ok=True)
            raise
        os.close(fd)
        # Renames and unlinks happen under the lock (cheap metadata operations), so the
        # index and the directory always agree: an eviction can never unlink a file
        # that another thread has just renamed into place.
        with self._lock:
            os.replace(tmp, path)
            if key in self._entries:
                self._entries.move_to_end(key)
            else:
                self._entries[key] = len(data)
                self._size += len(data)
            self._evict_locked()

    def _evict_locked(self) -> None:
        while self._size > self.max_bytes and self._entries:
            key, size = self._entries.popitem(last=False)
            self._size -= size
            self.evictions += 1
            self._path(*key).unlink(missing_ok=True)

    def remove_segment(self, segment_id: str) -> int:
        """Drop every chunk of a segment (deleted remotely); returns how many."""
        with self._lock:
            keys = [k for k in self._entries if k[0] == segment_id]
            for key in keys:
                self._size -= self._entries.pop(key)
                self._path(*key).unlink(missing_ok=True)
        return len(keys)

    def clear(self) -> None:
        with self._lock:
            for key in self._entries:
                self._path(*key).unlink(missing_ok=True)
            self._entries.clear()
            self._size = 0

    # -- files ---------------------------------------------------------------------------

    def _path(self, segment_id: str, index: int) -> Path:
        return self.directory / f"{segment_id}.{self.chunk_bytes}.{index}{_SUFFIX}"

    def close(self) -> None:
        """Mark the directory as cleanly written: the next start may keep its chunks."""
        (self.directory / _CLEAN_MARKER).touch()

    def _load(self) -> None:
        """Rebuild the index from the directory: keep whole chunks of this chunk size,
        delete temp files and anything else that is not one. Without the clean marker
        (the last run did not close the cache), every chunk is dropped."""
        marker = self.directory / _CLEAN_MARKER
        trusted = marker.exists()
        marker.unlink(missing_ok=True)  # a crash from here on must be seen at next start
        found: list[tuple[float, tuple[str, int], int]] = []
        for entry in os.scandir(self.directory):
            if not entry.is_file():
                continue
            if not trusted:
                os.unlink(entry.path)
                continue
            key = self._parse(entry.name)
            stat = entry.stat()
            if key is None or not 0 < stat.st_size <= self.chunk_bytes:
                log.info("chunk cache %s: removing %s", self.directory, entry.name)
                os.unlink(entry.path)
                continue
            found.append((stat.st_mtime, key, stat.st_size))
        for _, key, size in sorted(found):
            self._entries[key] = size
            self._size += size
        self._evict_locked()

    def _parse(self, name: str) -> tuple[str, int] | None:
        if not name.endswith(_SUFFIX):
            return None  # temp files end in .tmp-<hex>
        parts = name[: -len(_SUFFIX)].split(".")
        if len(parts) != 3 or not parts[1].isdigit() or not parts[2].isdigit():
            return None
        if int(parts[1]) != self.chunk_bytes or not parts[0]:
            return None
        return parts[0], int(parts[2])
