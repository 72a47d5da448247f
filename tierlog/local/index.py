"""Memory-mapped, preallocated, sorted index files: the part offset and time indexes share.

An index file is a sequence of fixed-size big-endian entries sorted by their first field.
As in Kafka (``AbstractIndex``), the active segment's index is preallocated to
``segment.index.bytes`` and mapped whole (a map holding no file descriptor, as Kafka
closes the file once mapped); entries are written into the map and the file is
trimmed to the valid entries when the segment is rolled or closed. A file left at its
preallocated size by an unclean stop is never trusted: the log rebuilds the indexes of every
segment it recovers.

Blocks (issue 10, "Full disk"). Growing the file with ``ftruncate`` makes it sparse: the
pages behind the map have no blocks yet, and on a full disk a store into such a page cannot
get one and kills the whole process with SIGBUS. So no entry is written into the map before
``reserve`` has given its page a block with ``posix_fallocate``, which fails with ENOSPC up
front instead. Blocks are reserved a chunk (``RESERVE_CHUNK``) ahead of the entries, not for
the whole preallocated size: ten MiB per index, two indexes per partition, would be real
disk (and RAM on tmpfs) for entries a segment rarely fills, where Kafka's sparse files cost
nothing. ``writable`` counts the entries that fit in reserved blocks; every write path
checks it (``append_unchecked``'s caller too).

Not thread-safe; owned by one ``LogSegment``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import struct
from collections.abc import Callable, Iterator
from pathlib import Path

from tierlog.local.file_map import FileMap

# Blocks reserved ahead of the entries: one ``posix_fallocate`` per 64 KiB of index, i.e.
# per 8192 offset entries (32 MiB of log at the default 4 KiB index interval), so the call
# is rare and a rolled segment holds at most 2 x 64 KiB of blocks it does not use.
RESERVE_CHUNK = 64 << 10
# posix_fallocate errors meaning "this file system cannot" rather than "no room".
_UNSUPPORTED = frozenset({errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL})


class CorruptIndexError(Exception):
    """An index file fails its sanity check; the owner rebuilds it from the log."""


class MappedIndex:
    """Base of ``OffsetIndex`` and ``TimeIndex``; subclasses set ``ENTRY`` (a ``Struct``)
    and ``KEY_FIELD`` (which field entries are sorted and searched by).

    File descriptors (issue 20, item 8): none is held. The file is mapped when an entry is
    first read or written (``FileMap``: a map that keeps no descriptor) and opened only
    for the moment a size or block change needs it (growing, trimming, reserving). The
    owner may ``release`` the map (an idle segment, ``open_files``); the next use maps it
    again.

    Args:
        path: the index file (created empty when missing).
        base_offset: the segment's base offset.
        max_index_size: the size an appendable index is grown to.
        on_map: called when the index maps its file (its segment counts its open files).
    """

    ENTRY: struct.Struct
    KEY_FIELD = 0

    def __init__(
        self,
        path: Path,
        base_offset: int,
        max_index_size: int,
        on_map: Callable[[], None] | None = None,
    ) -> None:
        self.path = Path(path)
        self.base_offset = base_offset
        self.entry_size = self.ENTRY.size
        self.max_index_size = max_index_size
        self._on_map = on_map
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            length = os.fstat(fd).st_size
        finally:
            os.close(fd)
        if length % self.entry_size:
            raise CorruptIndexError(
                f"{self.path}: size {length} is not a multiple of {self.entry_size}"
            )
        self._entries = length // self.entry_size
        self._map: memoryview | None = None
        self._file_map: FileMap | None = None
        self._map_size = length
        self.capacity = length // self.entry_size
        # Bytes [0, _reserved) have blocks. Unknown for a file opened from disk (a crash
        # may have left it sparse), so 0: its first reservation covers it from the start.
        self._reserved = 0
        # False once posix_fallocate said the file system cannot: see ``reserve``.
        self._can_reserve = True
        self.writable = 0
        self._closed = False
        # Entries written since the last flush: flushed by fsync when the map was released.
        self._dirty = False

    # -- mapping -----------------------------------------------------------------------

    @contextlib.contextmanager
    def _opened(self) -> Iterator[int]:
        """The file's descriptor, for one size or block change."""
        fd = os.open(self.path, os.O_RDWR)
        try:
            yield fd
        finally:
            os.close(fd)

    def _view(self) -> memoryview:
        """The mapped entries, mapping the file first when it is not (yet, or again)."""
        view = self._map
        if view is None:
            if self._closed:
                raise ValueError(f"{self.path}: index is closed")
            with self._opened() as fd:
                self._mapped(fd, self._map_size)
            view = self._map
            assert view is not None
        return view

    def _mapped(self, fd: int, size: int) -> None:
        """Map ``size`` bytes through ``fd``, growing or shrinking the file to it first."""
        self._unmap()
        if os.fstat(fd).st_size != size:
            os.ftruncate(fd, size)
        self._map_size = size
        self.capacity = size // self.entry_size
        # Shrinking frees the blocks past the end; growing adds none (sparse).
        self._reserved = min(self._reserved, size)
        # A file of no entries needs no map (and mmap refuses 0 bytes): an empty view.
        if size:
            self._file_map = FileMap(fd, size)
            self._map = self._file_map.view
        else:
            self._map = memoryview(b"")
        self._set_writable()
        if self._on_map is not None:
            self._on_map()

    def _remap(self, size: int) -> None:
        with self._opened() as fd:
            self._mapped(fd, size)

    def _unmap(self) -> None:
        self._map = None
        self.writable = 0  # appends reserve (and so map) again before they write
        if self._file_map is not None:
            self._file_map.close()
            self._file_map = None

    def _set_writable(self) -> None:
        if self._can_reserve:
            self.writable = min(self.capacity, self._reserved // self.entry_size)
        else:
            self.writable = self.capacity

    def reserve(self, count: int = 1) -> None:
        """Make sure the next ``count`` entries (as many as fit) land on real blocks,
        growing the file to ``max_index_size`` first if they do not fit in it.

        Raises:
            OSError: ENOSPC (or another I/O error) from ``posix_fallocate``, with the
                index's path; nothing was written and the index is as it was.
        """
        wanted = self._entries + count
        if wanted <= self.writable:
            return
        self._view()  # mapped again after a release: writable is right from here on
        if wanted <= self.writable:
            return
        if wanted > self.capacity:
            self.make_appendable()
        need = min(wanted, self.capacity) * self.entry_size
        if not self._can_reserve or need <= self._reserved:
            return
        # A chunk ahead, rounded to whole chunks, never past the file's end: fallocate
        # past it would grow the file behind the map's back.
        end = min(self._map_size, -(-need // RESERVE_CHUNK) * RESERVE_CHUNK)
        try:
            with self._opened() as fd:
                os.posix_fallocate(fd, self._reserved, end - self._reserved)
        except OSError as exc:
            if exc.errno in _UNSUPPORTED:
                # The file system has no fallocate (glibc emulates it where it can, so
                # this is rare): keep the behaviour from before reservations, a sparse
                # map, where a full disk can still end the process with SIGBUS.
                self._can_reserve = False
                self._set_writable()
                return
            # Blocks a partial allocation got stay inside the file and are reused.
            raise OSError(
                exc.errno, f"{exc.strerror} (reserving index blocks)", str(self.path)
            ) from exc
        self._reserved = end
        self._set_writable()

    def can_append(self) -> bool:
        """Whether one more entry fits, blocks included, without raising: for the last
        entries written at roll and close, which are optional and must not fail those."""
        if self.is_full:
            return False
        try:
            self.reserve(1)
        except OSError:
            return False
        return self._entries < self.writable

    @property
    def max_entries(self) -> int:
        return self.capacity

    @property
    def entries(self) -> int:
        return self._entries

    @property
    def is_full(self) -> bool:
        return self._entries >= self.capacity

    @property
    def size_bytes(self) -> int:
        return self._entries * self.entry_size

    def make_appendable(self) -> None:
        """Grow the file to ``max_index_size`` (rounded to whole entries) for appends."""
        target = self.max_index_size - self.max_index_size % self.entry_size
        target = max(target, self.size_bytes)
        if target != self._map_size or self._map is None:
            self._remap(target)

    def trim_to_valid_size(self) -> None:
        """Shrink the file to its entries, as when a segment is rolled or closed."""
        if self._map_size != self.size_bytes:
            self._remap(self.size_bytes)

    # -- entries -----------------------------------------------------------------------

    def entry(self, n: int) -> tuple[int, ...]:
        return self.ENTRY.unpack_from(self._view(), n * self.entry_size)

    def __iter__(self) -> Iterator[tuple[int, ...]]:
        for n in range(self._entries):
            yield self.entry(n)

    def _append_raw(self, *fields: int) -> None:
        if self._entries >= self.writable:
            self.reserve(1)  # grows the file if it is full; raises OSError on ENOSPC
            if self.is_full:
                raise OverflowError(f"{self.path}: index is full ({self._entries} entries)")
        self.ENTRY.pack_into(self._view(), self._entries * self.entry_size, *fields)
        self._entries += 1
        self._dirty = True

    def append_unchecked(self, first: int, second: int) -> None:
        """Write an entry the caller knows is in order and fits in reserved blocks
        (``entries < writable``, which only a mapped index has; the append fast path)."""
        assert self._map is not None
        self.ENTRY.pack_into(self._map, self._entries * self.entry_size, first, second)
        self._entries += 1
        self._dirty = True

    def _largest_at_most(self, key: int) -> int:
        """Index of the last entry whose key field is <= key, or -1 (binary search)."""
        lo, hi = 0, self._entries - 1
        if hi < 0:
            return -1
        found = -1
        unpack = self.ENTRY.unpack_from
        buf = self._view()
        size = self.entry_size
        field = self.KEY_FIELD
        while lo <= hi:
            mid = (lo + hi) >> 1
            if unpack(buf, mid * size)[field] <= key:
                found = mid
                lo = mid + 1
            else:
                hi = mid - 1
        return found

    def _smallest_at_least(self, key: int) -> int:
        """Index of the first entry whose key field is >= key, or ``entries``."""
        n = self._largest_at_most(key - 1)
        return n + 1

    def truncate_entries(self, count: int) -> None:
        """Keep only the first ``count`` entries."""
        self._entries = max(0, min(count, self._entries))

    def reset(self) -> None:
        """Drop every entry, keeping the file appendable."""
        self._entries = 0
        self.make_appendable()

    # -- file lifecycle ----------------------------------------------------------------

    def flush(self) -> None:
        """Make the entries durable: ``msync`` of the map, or an ``fsync`` of the file when
        the map was released since they were written (their pages are in the page
        cache)."""
        if self._file_map is not None:
            self._file_map.flush()
        elif self._dirty and not self._closed:
            with self._opened() as fd:
                os.fsync(fd)
        self._dirty = False

    def release(self) -> None:
        """Drop the map, writing nothing (the segment is idle, or its log is dropped as a
        crash would leave it); the next use maps the file again."""
        self._unmap()

    def close(self) -> None:
        """Trim the file to its entries and drop the map (clean shutdown)."""
        if self._closed:
            return
        if self._map_size != self.size_bytes:
            with self._opened() as fd:
                self._unmap()
                os.ftruncate(fd, self.size_bytes)
            self._map_size = self.size_bytes
        self._unmap()
        self._closed = True

    def rename(self, new_path: Path) -> None:
        os.rename(self.path, new_path)
        self.path = Path(new_path)

    def delete(self) -> None:
        self._unmap()
        self._closed = True
        self.path.unlink(missing_ok=True)
