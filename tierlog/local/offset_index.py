"""The sparse offset index (``.index``): offset -> byte position in the segment's ``.log``.

Byte format, Kafka's unchanged: 8-byte entries, big-endian

    0  relativeOffset  int32   offset - segment base offset
    4  position        int32   byte position of the batch in the .log file

One entry is written every ``index.interval.bytes`` of log, for the batch starting there,
so a lookup gives a position from which at most one interval of batch headers is scanned.
"""

from __future__ import annotations

import struct

from tierlog.local.index import CorruptIndexError, MappedIndex


class OffsetIndex(MappedIndex):
    ENTRY = struct.Struct(">iI")

    @property
    def last_offset(self) -> int:
        """Offset of the last entry, or the base offset when empty."""
        if not self._entries:
            return self.base_offset
        return self.base_offset + self.entry(self._entries - 1)[0]

    def append(self, offset: int, position: int) -> None:
        """Add an entry; offsets must increase strictly (Kafka's InvalidOffsetException)."""
        if self._entries and offset <= self.last_offset:
            raise ValueError(
                f"{self.path}: index offset {offset} is not after the last ({self.last_offset})"
            )
        self._append_raw(offset - self.base_offset, position)

    def lookup(self, target_offset: int) -> tuple[int, int]:
        """``(offset, position)`` of the last entry at or before ``target_offset``, or
        ``(base_offset, 0)`` when there is none."""
        n = self._largest_at_most(target_offset - self.base_offset)
        if n < 0:
            return self.base_offset, 0
        relative, position = self.entry(n)
        return self.base_offset + relative, position

    def truncate_to(self, offset: int) -> None:
        """Remove every entry for ``offset`` or later."""
        self.truncate_entries(self._smallest_at_least(offset - self.base_offset))

    def sanity_check(self, log_size: int) -> None:
        """Raise ``CorruptIndexError`` if the last entry points past the log.

        Only the last entry is checked, as in Kafka: start-up must not read every index.
        Segments whose indexes may be stale (those after the recovery point) are rebuilt.
        """
        if not self._entries:
            return
        relative, position = self.entry(self._entries - 1)
        if relative < 0 or position >= log_size:
            raise CorruptIndexError(
                f"{self.path}: last entry ({relative}, {position}) points past the log end "
                f"({log_size} bytes)"
            )
