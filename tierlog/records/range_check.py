"""Check a byte range of a segment before anything in it is served (sans-I/O).

A reader of a remote segment gets ranges of its ``.log``, not whole files: a Fetch answer
from the remote tier, a Spark task's chunk. ``check_range`` walks the batches of such a
range and checks what Kafka's consumers would otherwise be the first to check (or, with
``check.crcs=false``, librdkafka's default, never): each header parses (magic 2, a length
that can hold a header), the batch ends inside the segment, its offsets rise and stay
within the segment's, and its CRC-32C matches (issue 20, item 7). It returns how many
leading bytes are whole, checked batches, and the first problem: a batch cut off by the
end of the range is neither (the caller reads on, or drops it), unless the range reaches
the end of the segment, where a batch running past it is damage (a garbled length).

CRC-32C runs at memory speed (``crc32c`` releases the GIL), so checking every range costs
little next to fetching it from an object store.
"""

from __future__ import annotations

from dataclasses import dataclass

from crc32c import crc32c

from tierlog.records.errors import RecordsError
from tierlog.records.header import ATTRIBUTES_OFFSET, HEADER_SIZE, parse_header


@dataclass(frozen=True, slots=True)
class RangeProblem:
    """The first bad batch of a range.

    ``position`` is its byte position in the segment; ``first_offset`` and
    ``last_offset`` are the offsets it claims (from a header that may itself be damaged),
    ``last_offset`` -1 when nothing after the damage can be trusted (a bad length or
    header: the damage runs to the segment's end as far as a reader can tell).
    """

    position: int
    first_offset: int
    last_offset: int
    problem: str


@dataclass(frozen=True, slots=True)
class RangeCheck:
    """``end``: bytes from the range's start that are whole, checked batches;
    ``next_offset``: the offset after the last of them (the ``expected_offset`` given
    when none); ``problem``: the first bad batch, None when there is none."""

    end: int
    next_offset: int
    problem: RangeProblem | None


def check_range(
    data: bytes | bytearray | memoryview,
    *,
    position: int,
    segment_size: int,
    expected_offset: int,
    last_offset: int,
) -> RangeCheck:
    """Check the batches of ``data``, bytes ``[position, position + len(data))`` of a
    segment of ``segment_size`` bytes whose offsets run up to ``last_offset``, starting
    at a batch boundary.

    Args:
        position: where ``data`` starts in the segment (for positions in problems, and to
            tell a batch cut by the range from one running past the segment).
        segment_size: the segment's size in bytes.
        expected_offset: no batch may start below it (the segment's base offset, or the
            first batch's own base offset); each later batch starts at or after the end
            of the one before.
        last_offset: no batch may end past it (the segment's last offset).
    """
    view = memoryview(data)
    pos = 0
    expected = expected_offset
    next_offset = expected_offset
    while pos < len(view):
        at = position + pos
        remaining_in_segment = segment_size - at
        if len(view) - pos < HEADER_SIZE:
            if remaining_in_segment <= len(view) - pos:
                return RangeCheck(
                    pos, next_offset, RangeProblem(at, expected, -1, "truncated batch header")
                )
            break  # cut by the range: the caller reads on
        try:
            header = parse_header(view, pos)
        except RecordsError as exc:
            return RangeCheck(pos, next_offset, RangeProblem(at, expected, -1, str(exc)))
        if header.size > remaining_in_segment:
            problem = (
                f"batch length {header.size} runs past the end of the segment "
                f"({remaining_in_segment} bytes left)"
            )
            return RangeCheck(pos, next_offset, RangeProblem(at, header.base_offset, -1, problem))
        if header.last_offset_delta < 0 or header.record_count < 0:
            problem = "negative lastOffsetDelta or recordCount"
            return RangeCheck(pos, next_offset, RangeProblem(at, header.base_offset, -1, problem))
        if header.base_offset < expected:
            problem = f"offset {header.base_offset} goes back below {expected}"
            return RangeCheck(pos, next_offset, RangeProblem(at, header.base_offset, -1, problem))
        if header.last_offset > last_offset:
            problem = f"last offset {header.last_offset} is past the segment's {last_offset}"
            return RangeCheck(pos, next_offset, RangeProblem(at, header.base_offset, -1, problem))
        end = pos + header.size
        if end > len(view):
            break  # cut by the range
        actual = int(crc32c(view[pos + ATTRIBUTES_OFFSET : end]))
        if actual != header.crc:
            problem = f"CRC-32C {actual:#010x} does not match stored {header.crc:#010x}"
            return RangeCheck(
                pos,
                next_offset,
                RangeProblem(at, header.base_offset, header.last_offset, problem),
            )
        expected = next_offset = header.next_offset
        pos = end
    return RangeCheck(pos, next_offset, None)
