"""Memory-mapped, preallocated, sorted index files: the part offset and time indexes share.

An index file is a sequence of fixed-size big-endian entries sorted by their first field.
As in Kafka (``AbstractIndex``), the active segment's index is preallocated to
``segment.index.bytes`` and mapped whole; entries are written into the map and the file is
trimmed to the valid entries when the segment is rolled or closed. A file left at its
preallocated size by an unclean stop is never trusted: the log rebuilds the indexes of every
segment it recovers.

Not thread-safe; owned by one ``LogSegment``.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Iterator
from pathlib import Path


class CorruptIndexError(Exception):
    """An index file fails its sanity check; the owner rebuilds it from the log."""


class MappedIndex:
    """Base of ``OffsetIndex`` and ``TimeIndex``; subclasses set ``ENTRY`` (a ``Struct``)
    and ``KEY_FIELD`` (which field entries are sorted and searched by)."""

    ENTRY: struct.Struct
    KEY_FIELD = 0

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        self.path = Path(path)
        self.base_offset = base_offset
        self.entry_size = self.ENTRY.size
        self.max_index_size = max_index_size
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            length = os.fstat(fd).st_size
            if length % self.entry_size:
                raise CorruptIndexError(
                    f"{self.path}: size {length} is not a multiple of {self.entry_size}"
                )
            self._entries = length // self.entry_size
            self._fd = fd
        except BaseException:
            os.close(fd)
            raise
        self._map: mmap.mmap | None = None
        self._map_size = 0
        self._remap(length)

    # -- mapping -----------------------------------------------------------------------

    def _remap(self, size: int) -> None:
        if self._map is not None:
            self._map.close()
            self._map = None
        if os.fstat(self._fd).st_size != size:
            os.ftruncate(self._fd, size)
        self._map_size = size
        self._map = mmap.mmap(self._fd, size) if size else None
        self.capacity = size // self.entry_size

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
        if target != self._map_size:
            self._remap(target)

    def trim_to_valid_size(self) -> None:
        """Shrink the file to its entries, as when a segment is rolled or closed."""
        if self._map_size != self.size_bytes:
            self._remap(self.size_bytes)

    # -- entries -----------------------------------------------------------------------

    def entry(self, n: int) -> tuple[int, ...]:
        assert self._map is not None
        return self.ENTRY.unpack_from(self._map, n * self.entry_size)

    def __iter__(self) -> Iterator[tuple[int, ...]]:
        for n in range(self._entries):
            yield self.entry(n)

    def _append_raw(self, *fields: int) -> None:
        if self.is_full:
            self.make_appendable()
            if self.is_full:
                raise OverflowError(f"{self.path}: index is full ({self._entries} entries)")
        assert self._map is not None
        self.ENTRY.pack_into(self._map, self._entries * self.entry_size, *fields)
        self._entries += 1

    def append_unchecked(self, first: int, second: int) -> None:
        """Write an entry the caller knows is in order and fits (the append fast path)."""
        assert self._map is not None
        self.ENTRY.pack_into(self._map, self._entries * self.entry_size, first, second)
        self._entries += 1

    def _largest_at_most(self, key: int) -> int:
        """Index of the last entry whose key field is <= key, or -1 (binary search)."""
        lo, hi = 0, self._entries - 1
        found = -1
        unpack = self.ENTRY.unpack_from
        buf = self._map
        size = self.entry_size
        field = self.KEY_FIELD
        while lo <= hi:
            mid = (lo + hi) >> 1
            if unpack(buf, mid * size)[field] <= key:  # type: ignore[arg-type]
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
        if self._map is not None:
            self._map.flush()

    def close(self) -> None:
        if self._fd < 0:
            return
        self.trim_to_valid_size()
        if self._map is not None:
            self._map.close()
            self._map = None
        os.close(self._fd)
        self._fd = -1

    def rename(self, new_path: Path) -> None:
        os.rename(self.path, new_path)
        self.path = Path(new_path)

    def delete(self) -> None:
        if self._fd >= 0:
            if self._map is not None:
                self._map.close()
                self._map = None
            os.close(self._fd)
            self._fd = -1
        self.path.unlink(missing_ok=True)
