"""Zigzag varints decoded with numpy, many at once (the byte format: ``varint.py``).

The vectorised record walkers (``tierlog.records.arrow``'s fast path, the log cleaner's
``tierlog.compaction.chunk_records``) know where one field of every record starts and
decode that field for all records in one call, a byte position per record.
"""

from __future__ import annotations

import numpy as np


class VarintTooLong(Exception):
    """A code longer than the caller accepts: its vectorised path gives the input up."""


def decode_varints(
    u8: np.ndarray, pos: np.ndarray, max_bytes: int
) -> tuple[np.ndarray, np.ndarray]:
    """Decode the zigzag varints at ``pos`` in ``u8``: ``(values, positions after them)``.

    Reads are clipped to the buffer: callers check that the fields end where the records
    say, which rejects whatever a clipped read produced.

    Raises:
        VarintTooLong: a code longer than ``max_bytes``.
    """
    b = u8.take(pos, mode="clip")
    live = b >= 0x80
    raw = (b & 0x7F).astype(np.int64)
    after = pos + 1
    shift = 7
    while live.any():
        if shift == 7 * max_bytes:
            raise VarintTooLong
        b = u8.take(after, mode="clip")
        raw |= ((b & 0x7F).astype(np.int64) << shift) * live
        after += live
        live &= b >= 0x80
        shift += 7
    return (raw >> 1) ^ -(raw & 1), after
