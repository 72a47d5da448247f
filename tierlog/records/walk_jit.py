"""The record walk of ``record_walk.count_records`` compiled by numba, when numba is
installed (the optional ``jit`` extra: ``pip install 'tierlog[jit]'``).

Why: a batch of records of varied sizes is a pointer chase, each record's length saying
where the next starts, so numpy cannot vectorise it, and pure Python pays ~57 ns a hop:
1 MiB of 100-300-byte records cost the walk ~280 us, more than writing the batch
(issue 26 item 8, BENCHMARKS.md). Compiled, the same loop is ~6 ns a record, and it
releases the GIL (``nogil``), so on the CRC worker thread it runs beside the event loop.

numba compiles at run time, so there is no build step; the machine code is cached beside
this module (``cache=True``), so only the first process after an install compiles (~1-2 s);
later ones load it from the cache (~0.3 s, most of it numba's own import). It is opt-in:
numba and LLVM add ~110 MB to a process's RSS, twice a broker's own (~75 MB at start), so
a broker loads it only with ``TIERLOG_JIT=1`` in its environment (``wanted``), on a
background thread as it starts, and ``count_records`` uses it once it is there. Otherwise
the pure-Python walk does everything, and the answers are the same
(tests/records/test_record_walk.py checks both against each other).

Sans-I/O: an array of bytes in, a count out.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

# Returned when the records do not walk cleanly (record_walk.count_records, which takes
# both constants from here): a length running past the block, a negative or malformed
# length, or a length too short for a record's fixed fields.
NOT_WHOLE = -1
# The smallest record body after its length: attributes, timestampDelta, offsetDelta,
# keyLength, valueLength and headers count, one byte each.
MIN_BODY = 6
# A length code is a zigzag varint of an int32: at most 5 bytes, unsigned value < 2**32.
MAX_CODE_SHIFT = 28
MAX_CODE_VALUE = 0xFFFF_FFFF

ENABLE_VARIABLE = "TIERLOG_JIT"


def wanted(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether a broker should load the compiled walk: ``TIERLOG_JIT`` is 1 (or true, yes,
    on)."""
    return environ.get(ENABLE_VARIABLE, "").strip().lower() in ("1", "true", "yes", "on")


def compile_walk() -> Callable[[Any, int, int], int] | None:
    """The compiled walk ``walk(octets, start, end) -> count or NOT_WHOLE`` over a
    C-contiguous uint8 numpy array (read-only or not), or None when numba is missing."""
    try:
        import numba
        from numba import types
    except ImportError:
        return None
    octets_types = (
        types.Array(types.uint8, 1, "C", readonly=True),  # bytes, a produce request
        types.Array(types.uint8, 1, "C"),  # a bytearray
    )
    signatures = [types.int64(octets, types.int64, types.int64) for octets in octets_types]
    compiled: Callable[[Any, int, int], int] = numba.njit(signatures, cache=True, nogil=True)(_walk)
    return compiled


def _walk(octets: Any, start: int, end: int) -> int:
    """Records in ``octets[start:end]`` by their length codes, or NOT_WHOLE: the same
    answers as ``record_walk.count_records`` (a code running past the array, longer than
    5 bytes or outside int32, a length below MIN_BODY, or a last record not ending at
    ``end``). Plain Python that numba compiles; it runs as Python too, slowly."""
    size = octets.shape[0]
    pos = start
    count = 0
    while pos < end:
        value = 0
        shift = 0
        at = pos
        while True:
            if at >= size or shift > MAX_CODE_SHIFT:
                return NOT_WHOLE
            octet = int(octets[at])
            value |= (octet & 0x7F) << shift
            at += 1
            if octet < 0x80:
                break
            shift += 7
        if value > MAX_CODE_VALUE:
            return NOT_WHOLE
        length = (value >> 1) ^ -(value & 1)
        if length < MIN_BODY:
            return NOT_WHOLE
        pos = at + length
        count += 1
    return count if pos == end else NOT_WHOLE
