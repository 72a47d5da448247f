"""Rewriting a damaged range of a closed segment with the same batches from a replica.

The scrubber (and a load that meets an unreadable header) marks a damaged byte range
unreadable; a replica of the partition holds the same batches, byte for byte, because
followers append the leader's batches unchanged. Repair therefore writes the replica's
batches over the damaged bytes in place, and this module is the local half of it: which
offsets each damaged range must hold (``damaged_ranges``), whether some bytes may replace
its start (``check_patch``), and the write itself (``apply_patch``). Fetching the bytes
from the replica is the broker's part (``tierlog/broker/replication/segment_repair.py``).

Bytes are accepted only when they could have been there all along: whole batches, each
passing its CRC-32C, with offsets rising from the last intact batch before the range and
staying below the first intact batch after it, fitting inside the range, and agreeing
with every offset-index entry that points into the part they replace (an entry names a
batch's last offset and its start). The segment's indexes, offsets and the rest of the
file are thus untouched and stay right. A range may be repaired in several pieces: the
mark then shrinks to what is left, and reads reach what was repaired at once.

A range that runs to the end of its file (``open_ended``: a file cut short, a batch
length that cannot be trusted, offsets whose segment file is gone, issue 20 items 1-2)
may take more bytes than it has: the file grows, and the segment takes the new batches
into its size and indexes (``LogSegment.take_repaired``). Only the offsets still have to
fit, below the next segment's base.

Threads: event loop only (the writes are short ``pwrite`` calls of at most one fetch
answer, followed by ``fsync``).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from crc32c import crc32c

from tierlog.local import damage_marks
from tierlog.local.log_segments import LogSegments
from tierlog.local.segment import LogSegment, SegmentState
from tierlog.records.errors import RecordsError
from tierlog.records.header import ATTRIBUTES_OFFSET, HEADER_SIZE, BatchHeader, parse_header

log = logging.getLogger(__name__)


class PatchRefused(Exception):
    """The bytes offered cannot replace the damaged range (the reason says why)."""


@dataclass(frozen=True, slots=True)
class DamagedRange:
    """The unrepaired part of one damaged range: bytes ``[position, end)`` of ``segment``
    must hold batches with offsets from ``first_offset`` (at least) to below
    ``end_offset``."""

    segment: LogSegment
    position: int
    end: int
    problem: str
    first_offset: int
    end_offset: int

    @property
    def open_ended(self) -> bool:
        """The range runs to the end of a closed segment's file: more bytes than it has may
        replace it (the active segment's end is where appends go)."""
        return self.end >= self.segment.size and self.segment.state is SegmentState.CLOSED


def damaged_ranges(segments: LogSegments) -> list[DamagedRange]:
    """Every damaged range of the log's segments, oldest first. A range whose
    bounding offsets cannot be read (the intact batch before or after it does not parse)
    is left out: nothing could be checked against it."""
    found: list[DamagedRange] = []
    for n, segment in enumerate(segments):
        # The active segment too: a read checks its bytes before serving them (issue 20,
        # item 6); appends write only past its end, never inside a damaged range.
        if not segment.damaged or segment.state is SegmentState.DELETED:
            continue
        next_base = segments[n + 1].base_offset if n + 1 < len(segments) else segment.next_offset
        for position, end, problem in list(segment.damaged):
            try:
                first = _offset_at(segment, position)
                end_offset = _offset_after(segment, end, next_base)
            except (RecordsError, OSError, PatchRefused):
                continue
            found.append(DamagedRange(segment, position, end, problem, first, end_offset))
    return found


def _offset_at(segment: LogSegment, position: int) -> int:
    """The offset after the last intact batch before ``position`` (the segment's base
    offset when nothing precedes it). The walk starts at the nearest index entry before
    it (an entry points at a batch's start)."""
    start = 0
    for _, entry_position in segment.offset_index:
        if entry_position >= position:
            break
        start = entry_position
    expected = segment.base_offset
    while start < position:
        header = _header(segment, start)
        start, expected = start + header.size, header.next_offset
    if start != position:
        raise PatchRefused(f"{segment.path}: position {position} is not a batch boundary")
    return expected


def _offset_after(segment: LogSegment, end: int, next_base: int) -> int:
    if end >= segment.size:
        return next_base
    return _header(segment, end).base_offset


def _header(segment: LogSegment, position: int) -> BatchHeader:
    return parse_header(os.pread(segment.fd, HEADER_SIZE, position))


def check_patch(damaged: DamagedRange, data: bytes | memoryview) -> int:
    """Check that ``data`` may replace the start of ``damaged``; returns the offset after
    its last batch.

    Raises:
        PatchRefused: anything that does not line up (see the module docstring).
    """
    view = memoryview(data)
    size = len(view)
    if not size:
        raise PatchRefused("no batches offered")
    if size > damaged.end - damaged.position and not damaged.open_ended:
        raise PatchRefused(
            f"{size} bytes offered for a damaged range of {damaged.end - damaged.position}"
        )
    starts: dict[int, BatchHeader] = {}
    expected = damaged.first_offset
    pos = 0
    while pos < size:
        try:
            header = parse_header(view, pos)
        except RecordsError as exc:
            raise PatchRefused(f"batch at {pos}: {exc}") from None
        if pos + header.size > size:
            raise PatchRefused(f"batch at {pos} is cut short")
        if int(crc32c(view[pos + ATTRIBUTES_OFFSET : pos + header.size])) != header.crc:
            raise PatchRefused(f"batch at offset {header.base_offset} fails its CRC-32C")
        if header.base_offset < expected or header.last_offset >= damaged.end_offset:
            raise PatchRefused(
                f"batch {header.base_offset}-{header.last_offset} does not fit between "
                f"offsets {expected} and {damaged.end_offset}"
            )
        starts[damaged.position + pos] = header
        expected = header.next_offset
        pos += header.size
    # Index entries for the offered offsets must find the same batches at the same
    # places, and no other entry may point into the replaced part: otherwise a lookup
    # would send a read into the middle of a batch, or into what is still damaged.
    covered_end = damaged.position + size
    segment = damaged.segment
    for relative, entry_position in segment.offset_index:
        offset = segment.base_offset + relative
        offered = damaged.first_offset <= offset < expected
        inside = damaged.position <= entry_position < covered_end
        if offered or inside:
            there = starts.get(entry_position)
            if there is None or there.last_offset != offset:
                raise PatchRefused(
                    f"the offset index puts offset {offset} at byte {entry_position}, "
                    "which the offered batches do not"
                )
    return expected


def apply_patch(
    segments: LogSegments, damaged: DamagedRange, data: bytes | memoryview
) -> DamagedRange | None:
    """Write checked ``data`` over the start of ``damaged``, make it durable, and shrink
    the damage mark to what is left; returns the rest of the range, None when the whole
    range is repaired.

    Raises:
        PatchRefused: the range is no longer marked on a live segment (replaced,
            truncated or deleted meanwhile), or ``check_patch`` refuses ``data``.
        OSError: the write failed; the mark stays as it was.
    """
    segment = damaged.segment
    mark = next(
        (m for m in segment.damaged if m[0] == damaged.position and m[1] == damaged.end), None
    )
    if segment not in segments or segment.fd < 0 or mark is None:
        raise PatchRefused(f"{segment.path}: the damaged range changed meanwhile")
    next_offset = check_patch(damaged, data)
    size = len(data)
    written = os.pwrite(segment.fd, data, damaged.position)
    if written != size:
        raise OSError(f"{segment.path}: wrote {written} of {size} bytes")
    os.fsync(segment.fd)
    if os.pread(segment.fd, size, damaged.position) != bytes(data):
        raise OSError(f"{segment.path}: the repaired bytes do not read back the same")
    rest_position = damaged.position + size
    segment.damaged.remove(mark)
    segment.take_repaired(damaged.position, rest_position)
    if rest_position < damaged.end:
        segment.mark_damaged(rest_position, damaged.end, mark[2])
    elif next_offset < damaged.end_offset:
        # The file grew by these batches and more offsets are still to come.
        segment.mark_missing(damaged.end_offset, mark[2])
    try:
        damage_marks.save(segments)
    except OSError as exc:  # the repair stands; a restart would only mark it again
        log.warning("%s: damage marks not saved (%s); kept in memory", segments.name, exc)
    if rest_position >= damaged.end and next_offset >= damaged.end_offset:
        return None
    return DamagedRange(
        segment,
        rest_position,
        max(damaged.end, rest_position),
        mark[2],
        next_offset,
        damaged.end_offset,
    )


def accept_empty(segments: LogSegments, damaged: DamagedRange) -> None:
    """A replica's committed log holds no batch in ``damaged``'s offsets (compaction
    removed them there): offsets found missing (``LogSegment.mark_missing``) were a gap,
    not a loss. The mark goes and the segment ends at its last batch again, so reads go
    on to the next segment as they do over any compaction gap.

    Raises:
        PatchRefused: the range is damaged bytes (those did hold batches), or changed.
    """
    segment = damaged.segment
    mark = (damaged.position, damaged.end)
    if damaged.position != segment.size or segment not in segments:
        raise PatchRefused(f"{segment.path}: bytes {mark} held batches; a replica must hold them")
    segment.damaged = [d for d in segment.damaged if (d[0], d[1]) != mark]
    segment.next_offset = damaged.first_offset
    try:
        damage_marks.save(segments)
    except OSError as exc:
        log.warning("%s: damage marks not saved (%s); kept in memory", segments.name, exc)
