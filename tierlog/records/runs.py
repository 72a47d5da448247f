"""Runs of same-size records in a records block, found with one numpy compare.

Every record of a v2 records block starts with its length as a zigzag varint, so finding
where records start is a pointer chase, one hop per record. But records whose length codes
are equal byte for byte are the same size, and batches often hold long runs of them
(fixed-size payloads; the length code changes only where offsetDelta or timestampDelta
needs another byte, e.g. at record 64). A run is then found by comparing, with one strided
numpy compare, the bytes where its records would start: exact, with no hop per record.
``record_walk.count_records`` and ``reader.record_starts`` use it.

Sans-I/O: bytes in, a count out.
"""

from __future__ import annotations

import numpy as np

# A run shorter than this is not worth a compare (about 5 us a call, against ~75 ns a
# record walked hop by hop): callers look for one only when the next two records have the
# size of the current one, and walk records of varied sizes hop by hop.
RUN_MIN = 32


def same_size_run(octets: np.ndarray, pos: int, end: int, step: int) -> int:
    """How many records from ``pos`` on have the length code of the one at ``pos``.

    Args:
        octets: the buffer as uint8.
        pos: where a record starts, inside the block (>= 0: a negative index would
            wrap round the buffer); its length code is one or two bytes long.
        end: where the records block ends.
        step: the bytes the record at ``pos`` takes (code and body), >= 7, so the second
            byte of a code never lies at or past ``end``.

    Returns:
        k >= 1: the records at ``pos + i * step`` for i < k all take ``step`` bytes, and
        lie wholly before ``end``.
    """
    limit = (end - pos) // step
    stop = pos + limit * step
    differs = octets[pos:stop:step] != octets[pos]
    if octets[pos] & 0x80:  # a two-byte code: its second byte must match too
        differs |= octets[pos + 1 : stop + 1 : step] != octets[pos + 1]
    first = int(differs.argmax())
    return first if differs[first] else limit
