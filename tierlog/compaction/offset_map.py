"""The cleaner's offset map: key hash -> latest offset, in fixed memory.

Kafka's ``SkimpyOffsetMap`` idea (seed 004): the cleaner needs, for every key of the dirty
part of a log, the offset of its latest record; it does not need the keys themselves. Each
key is reduced to a 128-bit digest (``key_hash``; Kafka uses MD5; collisions are ignored,
as in Kafka: the chance is negligible at 2^-128 per pair), and the map is one preallocated
open-addressing table in numpy, never a Python dict (a dict costs ~100 bytes a key and
grows).

Layout of a slot, 20 bytes: the digest as two uint64 words, and the offset as a uint32
*relative to the map's base offset* (the first dirty offset of the pass). Kafka stores an
8-byte offset (24 bytes a slot, 26.7 bytes a key at its 0.9 load factor); a pass covers
less than 2^32 - 1 offsets (``max_offset`` bounds it, the cleaner stops the map there), so
4 bytes hold it and a key costs 20 / load factor = 22.2 bytes. ``EMPTY`` (all ones) marks
a free slot.

Probing is double hashing over a prime number of slots: the first slot comes from one
digest word, the step from the other, so every step is coprime with the table size and
clusters stay short even at 0.9 load. Inserts and lookups are vectorised: all pending keys
probe one slot per round, and only those that collided go on to the next round.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from tierlog.compaction.key_hash import Digests

SLOT_BYTES = 20
DEFAULT_LOAD_FACTOR = 0.9  # Kafka's log.cleaner.io.buffer.load.factor
EMPTY = np.uint32(0xFFFFFFFF)
# Relative offsets must stay below EMPTY.
MAX_SPAN = 0xFFFFFFFF - 1

_SLOT = np.dtype([("hi", "<u8"), ("lo", "<u8"), ("offset", "<u4")])  # packed: 20 bytes
assert _SLOT.itemsize == SLOT_BYTES


class OffsetMapFullError(Exception):
    """The keys of one segment do not fit the map (``log.cleaner.dedupe.buffer.size``)."""


def _largest_prime_at_most(n: int) -> int:
    if n < 2:
        return 2
    candidate = n if n % 2 else n - 1
    while candidate > 2:
        limit = int(candidate**0.5) + 1
        if all(candidate % d for d in range(3, limit, 2)):
            return candidate
        candidate -= 2
    return 2


class OffsetMap:
    """key digest -> latest offset for at most ``capacity`` distinct keys.

    Args:
        memory_bytes: the table's size (the cleaner's share of
            ``log.cleaner.dedupe.buffer.size``); allocated once, here.
        load_factor: the fill at which the map counts as full (Kafka's 0.9).
    """

    def __init__(self, memory_bytes: int, load_factor: float = DEFAULT_LOAD_FACTOR) -> None:
        if not 0 < load_factor <= 0.95:
            raise ValueError(f"load factor {load_factor} outside (0, 0.95]")
        self.slots = _largest_prime_at_most(max(3, memory_bytes // SLOT_BYTES))
        self.capacity = max(1, int(self.slots * load_factor))
        # One packed 20-byte record a slot: a probe touches one cache line, not three.
        table = np.empty(self.slots, dtype=_SLOT)
        self._hi = table["hi"]
        self._lo = table["lo"]
        self._offsets = table["offset"]
        self._table = table
        self._clear()
        self.base_offset = 0
        self.size = 0
        # The highest offset put into the map, -1 when none (Kafka's latestOffset).
        self.latest_offset = -1

    @staticmethod
    def bytes_for(keys: int, load_factor: float = DEFAULT_LOAD_FACTOR) -> int:
        """The table size that holds ``keys`` keys at ``load_factor``."""
        return (int(keys / load_factor) + 3) * SLOT_BYTES

    @property
    def memory_bytes(self) -> int:
        return self.slots * SLOT_BYTES

    @property
    def bytes_per_key(self) -> float:
        """What a key costs when the map is full: the table's bytes over its capacity."""
        return self.memory_bytes / self.capacity

    @property
    def free(self) -> int:
        return self.capacity - self.size

    def _clear(self) -> None:
        # EMPTY is all ones, and a free slot's digest is never read: one memset of the
        # whole table (filling the strided offset field alone is ~10x slower).
        self._table.view(np.uint8).fill(0xFF)

    def reset(self, base_offset: int) -> None:
        """Empty the map for a pass whose offsets start at ``base_offset``."""
        self._clear()
        self.base_offset = base_offset
        self.size = 0
        self.latest_offset = -1

    @property
    def max_offset(self) -> int:
        """The highest offset this pass can hold."""
        return self.base_offset + MAX_SPAN - 1

    # -- probing -------------------------------------------------------------------------

    def _start(self, digests: Digests) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        slots = np.uint64(self.slots)
        first = (digests[:, 1] % slots).astype(np.int64)
        step = (digests[:, 0] % np.uint64(self.slots - 1)).astype(np.int64) + 1
        return first, step

    def get(self, digests: Digests) -> npt.NDArray[np.int64]:
        """The latest offset of each digest, or -1 where the map has none."""
        n = len(digests)
        found = np.full(n, -1, dtype=np.int64)
        if n == 0 or self.size == 0:
            return found
        slot, step = self._start(digests)
        pending = np.arange(n)
        while len(pending):
            s = slot[pending]
            stored = self._offsets[s]
            occupied = stored != EMPTY
            match = (
                occupied
                & (self._hi[s] == digests[pending, 0])
                & (self._lo[s] == digests[pending, 1])
            )
            found[pending[match]] = stored[match].astype(np.int64) + self.base_offset
            collided = occupied & ~match
            pending = pending[collided]
            slot[pending] = (slot[pending] + step[pending]) % self.slots
        return found

    def new_keys(self, digests: Digests) -> int:
        """How many distinct digests the map does not hold yet (what a put would add)."""
        if len(digests) == 0:
            return 0
        distinct = np.unique(np.ascontiguousarray(digests).view(np.dtype((np.void, 16))))
        as_words = distinct.view(np.uint64).reshape(-1, 2)
        return int(np.count_nonzero(self.get(as_words) < 0))

    def put(self, digests: Digests, offsets: npt.NDArray[np.int64]) -> None:
        """Record ``offsets[i]`` as the latest offset of ``digests[i]``.

        ``offsets`` must not decrease and must lie in [base_offset, max_offset]; among
        equal digests the last one wins, as in the log.

        Raises:
            OffsetMapFullError: the new keys would take the map past its capacity (the
                map is unchanged then).
            ValueError: an offset outside the pass's range.
        """
        n = len(digests)
        if n == 0:
            return
        if offsets[0] < self.base_offset or offsets[-1] > self.max_offset:
            raise ValueError(
                f"offsets {offsets[0]}..{offsets[-1]} outside the map's range "
                f"{self.base_offset}..{self.max_offset}"
            )
        if self.size + n > self.capacity:
            # Counting the new keys costs a sort; only worth it when they might not fit.
            added = self.new_keys(digests)
            if added > self.free:
                raise OffsetMapFullError(
                    f"{added} new keys do not fit the offset map ({self.free} of "
                    f"{self.capacity} free, {self.memory_bytes} bytes)"
                )
        relative = (offsets - self.base_offset).astype(np.uint32)
        slot, step = self._start(digests)
        pending = np.arange(n, dtype=np.int64)
        stored_offsets = self._offsets
        while len(pending):
            s = slot[pending]
            empty = stored_offsets[s] == EMPTY
            match = (
                ~empty & (self._hi[s] == digests[pending, 0]) & (self._lo[s] == digests[pending, 1])
            )
            settled = match.copy()
            if match.any():
                # A key met again (also within this call): the larger offset is the later.
                np.maximum.at(stored_offsets, s[match], relative[pending[match]])
            claim = np.flatnonzero(empty)
            if len(claim):
                # Several keys may reach one empty slot in a round. Each writes its row
                # number there; the row whose number stayed takes the slot, and the others
                # find it taken next round (probing on, or matching if it is their key).
                rows = pending[claim]
                claimed = s[claim]
                stored_offsets[claimed] = rows.astype(np.uint32)
                won = stored_offsets[claimed] == rows.astype(np.uint32)
                winners = rows[won]
                taken = claimed[won]
                self._hi[taken] = digests[winners, 0]
                self._lo[taken] = digests[winners, 1]
                stored_offsets[taken] = relative[winners]
                self.size += len(winners)
                settled[claim[won]] = True
            moving = pending[~empty & ~match]
            slot[moving] = (slot[moving] + step[moving]) % self.slots
            pending = pending[~settled]
        self.latest_offset = max(self.latest_offset, int(offsets[-1]))
