"""The ordered segments of one partition's log (Kafka's ``LogSegments``).

Owns the list of ``LogSegment`` objects of one partition directory, sorted by base offset
with no two alike, and the questions asked of it: which segment holds an offset, which
segments follow it, what the next segment's base is. The loader builds one, the ``Log``
keeps it, and the compaction swap and the repair of a missing range change it, all
through these methods (issue 21, item 4: before, they reached into the ``Log``'s list and
its parallel list of base offsets).

What it does not own: the files' lifecycle (``LogSegment``: opening, deleting) and the
rules that span segments (``Log``: appends, rolls, retention, truncation).

Not thread-safe; owned by one ``Log`` (the broker's event loop).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import overload

from tierlog.local.errors import CorruptSegmentError
from tierlog.local.segment import LogSegment
from tierlog.records.header import BatchHeader


class LogSegments:
    """Args:
    directory: the partition directory the segments' files are in.
    segments: the segments, in any order (sorted here).
    """

    def __init__(self, directory: Path, segments: Iterable[LogSegment] = ()) -> None:
        self.directory = Path(directory)
        self._segments = sorted(segments, key=lambda s: s.base_offset)
        self._bases = [s.base_offset for s in self._segments]
        if len(set(self._bases)) != len(self._bases):
            raise ValueError(f"{self.directory}: two segments share a base offset")

    @property
    def name(self) -> str:
        """The partition directory's name (``orders-3``), for log lines."""
        return self.directory.name

    # -- reading -------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._segments)

    def __bool__(self) -> bool:
        return bool(self._segments)

    def __iter__(self) -> Iterator[LogSegment]:
        return iter(self._segments)

    @overload
    def __getitem__(self, n: int) -> LogSegment: ...

    @overload
    def __getitem__(self, n: slice) -> list[LogSegment]: ...

    def __getitem__(self, n: int | slice) -> LogSegment | list[LogSegment]:
        return self._segments[n]

    def __contains__(self, segment: object) -> bool:
        return any(s is segment for s in self._segments)

    def index(self, segment: LogSegment) -> int:
        """Position of ``segment`` in the list.

        Raises:
            ValueError: it is not one of them.
        """
        n = bisect.bisect_left(self._bases, segment.base_offset)
        if n < len(self._segments) and self._segments[n] is segment:
            return n
        raise ValueError(f"{segment!r} is not a segment of {self.name}")

    @property
    def first(self) -> LogSegment:
        return self._segments[0]

    @property
    def active(self) -> LogSegment:
        """The last segment, the one appends go to."""
        return self._segments[-1]

    @property
    def base_offsets(self) -> list[int]:
        return list(self._bases)

    def floor_index(self, offset: int) -> int:
        """Index of the segment that would hold ``offset``: the last one whose base offset
        is at or below it (0 when ``offset`` is below every base)."""
        return max(0, bisect.bisect_right(self._bases, offset) - 1)

    def floor(self, offset: int) -> LogSegment:
        return self._segments[self.floor_index(offset)]

    def from_offset(self, offset: int) -> list[LogSegment]:
        """The segment holding ``offset`` and every later one."""
        return self._segments[self.floor_index(offset) :]

    def next_base(self, segment: LogSegment) -> int | None:
        """Base offset of the segment after ``segment``; None for the last one."""
        n = self.index(segment)
        return self._bases[n + 1] if n + 1 < len(self._bases) else None

    def batches(self, start_offset: int = 0) -> Iterator[tuple[LogSegment, int, BatchHeader]]:
        """Every batch header from ``start_offset`` on, with its segment and position.

        A segment's range already marked damaged (``LogSegment.damaged``, found at load,
        by a read or by the scrubber) ends that segment's batches and the walk goes on
        with the next segment: the bytes cannot be read, and start-up work (producer
        state, the epoch cache) must not fail on them. Damage not known yet raises
        CorruptSegmentError.
        """
        for segment in self.from_offset(start_offset):
            try:
                found = segment.find_batch(start_offset)
                if found is not None:
                    for position, header in segment.batches(found[0]):
                        yield segment, position, header
            except CorruptSegmentError as exc:
                if not segment.is_marked_damaged(exc.position):
                    raise

    # -- changing ------------------------------------------------------------------------

    def append(self, segment: LogSegment) -> None:
        """Add ``segment`` after the last one (a roll, or loading in order)."""
        if self._bases and segment.base_offset <= self._bases[-1]:
            raise ValueError(
                f"{self.name}: segment {segment.base_offset} does not follow {self._bases[-1]}"
            )
        self._segments.append(segment)
        self._bases.append(segment.base_offset)

    def insert(self, segment: LogSegment) -> None:
        """Add ``segment`` at its place by base offset (a compaction swap's replacement, a
        missing range written back)."""
        n = bisect.bisect_left(self._bases, segment.base_offset)
        if n < len(self._bases) and self._bases[n] == segment.base_offset:
            raise ValueError(f"{self.name}: a segment at {segment.base_offset} exists already")
        self._segments.insert(n, segment)
        self._bases.insert(n, segment.base_offset)

    def remove(self, segment: LogSegment) -> None:
        """Take ``segment`` out of the list (its files are the caller's to delete)."""
        n = self.index(segment)
        del self._segments[n]
        del self._bases[n]

    def remove_all(self, segments: Sequence[LogSegment]) -> None:
        for segment in segments:
            self.remove(segment)

    def __repr__(self) -> str:
        return f"LogSegments({self.name}, {len(self)} segments)"
