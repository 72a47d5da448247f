"""The sparse time index (``.timeindex``): timestamp -> first offset that may reach it.

Byte format, Kafka's unchanged: 12-byte entries, big-endian

    0  timestamp       int64   largest batch max timestamp seen so far in the segment
    8  relativeOffset  int32   offset of the batch that raised it, minus the base offset

Entries are added beside offset-index entries, and only when the timestamp grows, so both
columns are non-decreasing and a lookup is a binary search on the timestamp.
"""

from __future__ import annotations

import struct

from tierlog.local.index import CorruptIndexError, MappedIndex

NO_TIMESTAMP = -1


class TimeIndex(MappedIndex):
    ENTRY = struct.Struct(">qi")
    # (entry count, last entry): valid while the count is unchanged.
    _last_cache: tuple[int, tuple[int, int]] | None = None

    @property
    def last_entry(self) -> tuple[int, int]:
        """``(timestamp, offset)`` of the last entry, or ``(-1, base_offset)``."""
        n = self._entries
        cached = self._last_cache
        if cached is not None and cached[0] == n:
            return cached[1]
        if not n:
            value = (NO_TIMESTAMP, self.base_offset)
        else:
            timestamp, relative = self.entry(n - 1)
            value = (timestamp, self.base_offset + relative)
        # Keyed by the entry count: appends and truncations change it, so a stale value
        # is never returned (the append path asks for this on every indexed batch).
        self._last_cache = (n, value)
        return value

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Add ``(timestamp, offset)`` if the timestamp is larger than the last entry's."""
        last_ts, last_offset = self.last_entry
        if self._entries and (timestamp <= last_ts or offset < last_offset):
            return
        self._append_raw(timestamp, offset - self.base_offset)

    def lookup(self, target_timestamp: int) -> tuple[int, int]:
        """``(timestamp, offset)`` of the last entry with timestamp <= target, or
        ``(-1, base_offset)``; the first record at or after the target is at or after it."""
        n = self._largest_at_most(target_timestamp)
        if n < 0:
            return NO_TIMESTAMP, self.base_offset
        timestamp, relative = self.entry(n)
        return timestamp, self.base_offset + relative

    def truncate_to(self, offset: int) -> None:
        """Remove every entry pointing at ``offset`` or later (offsets are sorted too)."""
        keep = 0
        for n in range(self._entries):
            if self.base_offset + self.entry(n)[1] >= offset:
                break
            keep = n + 1
        self.truncate_entries(keep)

    def sanity_check(self, next_offset: int) -> None:
        """Raise ``CorruptIndexError`` if the last entry is before the first or past the
        segment's next offset (last-entry check only, as for the offset index)."""
        if not self._entries:
            return
        first_ts = self.entry(0)[0]
        timestamp, offset = self.last_entry
        if timestamp < first_ts or offset >= next_offset or offset < self.base_offset:
            raise CorruptIndexError(
                f"{self.path}: last entry ({timestamp}, {offset}) is out of order or past the "
                f"segment's next offset {next_offset}"
            )
