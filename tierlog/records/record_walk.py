"""Count the records of an uncompressed v2 batch by walking their length prefixes only.

A batch's header declares ``recordCount`` and ``lastOffsetDelta``; offsets are assigned
from them, so a batch that claims 1,000,000 records but holds 3 moved the high watermark
by a million (issue 10, item 5). Every record of a records block starts with its length
as a zigzag varint (Kafka's DefaultRecord), so the records can be counted by hopping from
length to length, without decoding a field and without a Python object per record.

Pure Python and numpy on purpose (the founders' rule: no native build step). The walk is
a pointer chase, each hop depending on the last, so numpy cannot vectorise it in general;
per record it costs one read of the two bytes at the record's start (a ``memoryview`` cast
to 16-bit words, one per byte parity) and one lookup in a 65,536-entry table that maps them
to the record's whole size, unrolled four records per end-of-block check: 70-80 ns a
record on the benchmark box, 350-390 us for a 1 MiB batch of 200-byte records.

Many batches have long runs of records of one size, though, and ``runs.same_size_run``
counts a run with one numpy compare, exactly: a 1 MiB batch of 200-byte records then
costs ~20 us instead of ~350. Records of varied sizes are walked hop by hop, trying for a
run only when the next two records have the size of the current one. Length codes of
three bytes or more (records of 8 KiB and up), and anything the table refuses, go through
``decode_varint`` one record at a time. BENCHMARKS.md has the figures and what they mean
for the append goal.

With numba installed (the optional ``jit`` extra), ``use_jit`` loads the same walk
compiled (``walk_jit``; a broker with ``TIERLOG_JIT=1``), about ten times faster on records
of varied sizes and without the GIL; ``count_records`` hands it blocks of
``JIT_MIN_BYTES`` and more once it is loaded. Until then, and otherwise, everything runs
here.

Sans-I/O: bytes in, a count out.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from tierlog.records.reader import _steps
from tierlog.records.runs import RUN_MIN, same_size_run
from tierlog.records.varint import BytesLike, decode_varint
from tierlog.records.walk_jit import MIN_BODY, NOT_WHOLE, compile_walk

# Where no run of RUN_MIN same-size records is found, the next _SERIAL_FIRST bytes are
# walked hop by hop, then twice as many before each next try, up to _SERIAL_MAX.
_SERIAL_FIRST = 16 * 1024
_SERIAL_MAX = 1024 * 1024
# Records walked one by one before the general walk sets up (count_records).
_FEW = 4

_log = logging.getLogger(__name__)

# Blocks from this size go to the compiled walk when it is loaded: below it, the few
# records are walked here in about the time numba's call and the array view take (~1 us).
JIT_MIN_BYTES = 4 * 1024
# walk_jit's compiled walk once use_jit has loaded it; None: the Python walk.
_jit_walk: Callable[[Any, int, int], int] | None = None
_jit_lock = threading.Lock()
_jit_tried = False

# _WALK[w], w the native 16-bit word read at a record's first byte: the bytes that record
# takes (length code plus body) when its length code is one or two bytes long and the
# length is at least MIN_BODY; None otherwise (a longer code, or a negative or too short
# length), which sends the walk to decode_varint. Built on first use from the Arrow
# path's table, which is indexed by b0 | b1 << 8.
_WALK: list[int | None] = []


def _walk_table() -> list[int | None]:
    if not _WALK:
        table = list(_steps())
        for index, step in enumerate(table):
            if step is not None and step - (2 if index & 0x80 else 1) < MIN_BODY:
                table[index] = None
        if sys.byteorder == "big":  # the word read at p is b0 << 8 | b1 there
            table = [table[(w & 0xFF) << 8 | w >> 8] for w in range(1 << 16)]
        _WALK[:] = table
    return _WALK


def _walk_slowly(data: BytesLike, pos: int, end: int, limit: int) -> tuple[int, int] | None:
    """Up to ``limit`` records from ``pos``, each length decoded in full: where the walk
    got to and how many records it passed, or None when a length is malformed, negative
    or too short."""
    n = 0
    for _ in range(limit):
        if pos >= end:
            break
        try:
            length, after = decode_varint(data, pos)
        except ValueError:  # CorruptBatchError: truncated, longer than 5 bytes, > int32
            return None
        if length < MIN_BODY:
            return None
        pos = after + length
        n += 1
    return pos, n


def _walk(
    data: BytesLike, words: tuple[memoryview, memoryview], pos: int, end: int, budget: int
) -> tuple[int, int] | None:
    """The records from ``pos`` up to about ``budget`` bytes on, hop by hop: where the walk
    got to and how many records it passed (the position is ``end`` or before it), or
    None when the records do not tile up to ``end``."""
    steps = _walk_table()
    n = 0
    at = pos
    stop = min(end, pos + budget)
    while True:
        # Fast: four records per check of the end. A None step (TypeError) or a read past
        # the buffer (IndexError) leaves the group to the slow walk below; so does a group
        # that ran past ``end``, since it may have read bytes beyond the block.
        try:
            while pos < stop:
                at = pos
                pos += steps[words[pos & 1][pos >> 1]]  # type: ignore[operator]
                pos += steps[words[pos & 1][pos >> 1]]  # type: ignore[operator]
                pos += steps[words[pos & 1][pos >> 1]]  # type: ignore[operator]
                pos += steps[words[pos & 1][pos >> 1]]  # type: ignore[operator]
                n += 4
            if pos <= end:
                return pos, n
            n -= 4
        except (TypeError, IndexError):
            pass
        # Slow: the group from ``at`` again, one record at a time.
        walked = _walk_slowly(data, at, end, 4)
        if walked is None:
            return None
        pos, passed = walked
        n += passed
        if pos > end:
            return None
        if pos >= stop:
            return pos, n


def count_records(data: BytesLike, start: int, end: int) -> int:
    """Records in ``data[start:end]``, or ``NOT_WHOLE`` when they do not tile it exactly.

    ``data`` may extend past ``end`` (a memoryview of a produce request): bytes beyond it
    may be read but never change the answer.
    """
    if end - start < MIN_BODY + 1:
        return 0 if end == start else NOT_WHOLE
    jit_walk = _jit_walk
    if jit_walk is not None and end - start >= JIT_MIN_BYTES:
        return jit_walk(np.frombuffer(memoryview(data).cast("B"), dtype=np.uint8), start, end)
    # An unbatched producer's batch holds one record, or a few: walking those one by one
    # costs a fraction of setting up the word views and numpy below (profiled, issue 21).
    walked = _walk_slowly(data, start, end, _FEW)
    if walked is None:
        return NOT_WHOLE
    pos, n = walked
    if pos >= end:
        return n if pos == end else NOT_WHOLE
    steps = _walk_table()
    view = memoryview(data).cast("B")
    size = len(view)
    # words[p & 1][p >> 1] is the 16-bit word at byte p: one subscript instead of two
    # byte reads, a shift and an or (about 15% off the walk).
    words = (view[: size & ~1].cast("H"), view[1 : 1 + ((size - 1) & ~1)].cast("H"))
    octets = np.frombuffer(view, dtype=np.uint8)
    serial = _SERIAL_FIRST
    while pos < end:
        # Runs of same-size records (a producer's records of one size: the length code
        # changes only where offsetDelta or timestampDelta needs another byte) are
        # counted by one numpy compare each. Records of varied sizes are walked hop by
        # hop, in stretches that double while no run turns up, so that they pay for few
        # tries (a try is two lookups, and rarely a compare).
        try:
            step = steps[words[pos & 1][pos >> 1]]
            ahead = pos + step  # type: ignore[operator]
            after = ahead + step  # type: ignore[operator]
            same = (
                end - pos >= RUN_MIN * step  # type: ignore[operator]
                and steps[words[ahead & 1][ahead >> 1]] == step
                and steps[words[after & 1][after >> 1]] == step
            )
        except (TypeError, IndexError):
            same = False
        if same:
            run = same_size_run(octets, pos, end, step)  # type: ignore[arg-type]
            pos += run * step  # type: ignore[operator]
            n += run
            if run >= RUN_MIN:
                serial = _SERIAL_FIRST
                continue
            if pos >= end:
                break
        walked = _walk(data, words, pos, end, serial)
        if walked is None:
            return NOT_WHOLE
        pos, passed = walked
        n += passed
        serial = min(serial * 2, _SERIAL_MAX)
    return n if pos == end else NOT_WHOLE


def use_jit() -> bool:
    """Load the compiled walk (``walk_jit``; compiling it the first time, ~1-2 s, else from
    numba's cache): from then on ``count_records`` uses it for large blocks. True when it
    is in use; False without numba. Thread-safe; loads once. numba costs ~110 MB of RSS:
    the broker calls this only with ``TIERLOG_JIT=1`` (``walk_jit.wanted``)."""
    global _jit_walk, _jit_tried
    with _jit_lock:
        if not _jit_tried:
            _jit_tried = True
            try:
                _jit_walk = compile_walk()
            except Exception:  # a numba that cannot compile it: the Python walk still can
                _log.warning(
                    "the compiled record walk did not load; walking in Python", exc_info=True
                )
    return _jit_walk is not None
