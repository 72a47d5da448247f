"""128-bit key digests for the offset map, computed for many keys at once with numpy.

Kafka's cleaner digests each key with MD5, one call per key; in Python that call is most
of the cleaner's per-record cost. Here all keys of a chunk are digested together, 8 bytes
at a time: word j of every key still that long is gathered in one numpy call (bytes past
a key's end masked to zero) and folded into two 64-bit lanes, each word mixed in with
MurmurHash3's 64-bit finaliser (a multiply-xorshift bijection with full avalanche); the
key's length is mixed in first, so keys that differ only by trailing zero bytes differ.

The digest only has to tell keys apart within one cleaning pass, so each pass draws a
random seed for both lanes: nobody can prepare keys that collide (a collision makes the
cleaner drop a record of the other key), which MD5's published collisions would allow.
The same seed must be used for the map and the cleaning of one pass.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

Digests = npt.NDArray[np.uint64]  # shape (n, 2)

# _MASKS[k]: the low k bytes of a word.
_MASKS = np.array([(1 << (8 * k)) - 1 for k in range(9)], dtype=np.uint64)
_C1 = np.uint64(0xFF51AFD7ED558CCD)
_C2 = np.uint64(0xC4CEB9FE1A85EC53)
_K1 = np.uint64(0x9E3779B97F4A7C15)
_K2 = np.uint64(0xC2B2AE3D27D4EB4F)
_S33 = np.uint64(33)


def _fmix(x: np.ndarray) -> np.ndarray:
    x ^= x >> _S33
    x *= _C1
    x ^= x >> _S33
    x *= _C2
    x ^= x >> _S33
    return x


def digests_at(data: bytes, starts: np.ndarray, ends: np.ndarray, seed: tuple[int, int]) -> Digests:
    """The digests of the keys ``data[starts[i]:ends[i]]``, as an (n, 2) uint64 array."""
    n = len(starts)
    out = np.empty((n, 2), dtype=np.uint64)
    if n == 0:
        return out
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    # A key's last word starts before its end and reads 8 bytes: callers that pad their
    # buffer with 8 bytes (``chunk_records`` does) spare this copy.
    padded = data if len(data) >= int(ends.max()) + 8 else data + bytes(8)
    # Every 8-byte window of the data as one little-endian word (an overlapping,
    # unaligned view): word j of a key is one gather at start + 8 j.
    windows = np.ndarray((len(padded) - 7,), dtype="<u8", buffer=padded, strides=(1,))
    lengths = ends - starts
    size = lengths.astype(np.uint64)
    with np.errstate(over="ignore"):
        h1 = _fmix(np.uint64(seed[0]) ^ (size * _K1))
        h2 = _fmix(np.uint64(seed[1]) ^ (size * _K2))
        rows = np.arange(n)
        offset = 0
        while True:
            rows = rows[lengths[rows] > offset]
            if len(rows) == 0:
                break
            word = windows[starts[rows] + offset]  # fancy indexing: take() would copy windows
            left = np.minimum(lengths[rows] - offset, 8)
            word &= _MASKS[left]  # bytes past the key's end read as zero
            a = _fmix(h1[rows] ^ (word * _K1))
            b = _fmix((h2[rows] ^ word) * _K2 + a)
            h1[rows] = a
            h2[rows] = b
            offset += 8
    out[:, 0] = h1
    out[:, 1] = h2
    return out


def digests_of(keys: Sequence[bytes], seed: tuple[int, int]) -> Digests:
    """``digests_at`` for keys given one by one (the same digest for the same key)."""
    lengths = np.fromiter((len(k) for k in keys), dtype=np.int64, count=len(keys))
    ends = np.cumsum(lengths)
    return digests_at(b"".join(keys), ends - lengths, ends, seed)
