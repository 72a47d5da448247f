"""The cleaner's per-record rules, applied to a chunk of batches at a time.

A record of the part a pass cleans is kept when it has a key, no later record of its key
is in the offset map, and it is not a tombstone past its batch's delete horizon. What
happens to a batch then (``_emit``): kept whole, it is copied byte for byte; partly
kept, it is rebuilt with its kept records (``batch_filter.rebuild_batch``); emptied, it
goes, unless it is an idempotent producer's last batch, kept empty. A batch whose kept
records include a tombstone and which has no delete horizon yet gets one (KIP-534):
``now + delete.retention.ms``.

Two ways to find the records, with the same result: the vectorised one
(``chunk_records.locate`` + numpy decisions for the whole chunk), and the per-record
reference (``batch_filter.walk_records``), taken when the vectorised one gives a chunk
up (long varints, anything malformed) and used by the tests as the oracle.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Protocol

import numpy as np

from tierlog.compaction.batch_filter import BatchRecords, empty_batch, rebuild_parts, walk_records
from tierlog.compaction.chunk_records import ChunkRecords, locate
from tierlog.compaction.key_hash import Digests, digests_at, digests_of
from tierlog.compaction.offset_map import OffsetMap
from tierlog.records.header import Attr, BatchHeader
from tierlog.records.varint import BytesLike

Chunk = Sequence[tuple[BytesLike, BatchHeader]]


class BatchSink(Protocol):
    def append(self, batch: BytesLike, last_offset: int, max_timestamp: int) -> None: ...

    def append_parts(
        self, parts: Sequence[BytesLike], size: int, last_offset: int, max_timestamp: int
    ) -> None:
        """One batch given as buffers whose concatenation it is."""
        ...


@dataclass(slots=True)
class CleanStats:
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0
    tombstones_removed: int = 0
    map_keys: int = 0
    map_bytes_per_key: float = 0.0
    map_seconds: float = 0.0
    clean_seconds: float = 0.0


def is_data(header: BatchHeader) -> bool:
    """A batch of records the rules apply to (control batches and empty batches pass)."""
    return not header.attributes & Attr.CONTROL and header.record_count > 0


def keyed_offsets(
    batches: Chunk, first_offset: int, seed: tuple[int, int], vectorised: bool = True
) -> tuple[Digests, np.ndarray]:
    """The key digests and offsets of the keyed records at or above ``first_offset`` in
    ``batches`` (data batches): what the offset map is built from."""
    located = locate(list(batches)) if vectorised else None
    if located is not None:
        bases = np.array([h.base_offset for _, h in batches], dtype=np.int64)
        offsets = np.repeat(bases, located.counts) + located.offset_deltas
        wanted = ~located.key_nulls & (offsets >= first_offset)
        digests = digests_at(
            located.data, located.key_starts[wanted], located.key_ends[wanted], seed
        )
        return digests, offsets[wanted]
    found_keys: list[bytes] = []
    found_offsets: list[int] = []
    for batch, header in batches:
        records = walk_records(batch, header)
        for key, delta in zip(records.keys, records.offset_deltas, strict=True):
            offset = header.base_offset + delta
            if key is not None and offset >= first_offset:
                found_keys.append(key)
                found_offsets.append(offset)
    return digests_of(found_keys, seed), np.array(found_offsets, dtype=np.int64)


def _located_batch(
    located: ChunkRecords, keep: np.ndarray, n: int, lo: int, count: int
) -> tuple[BatchRecords, list[int]]:
    return located.batch(n), np.flatnonzero(keep[lo : lo + count]).tolist()


def _given(records: BatchRecords, keep: list[int]) -> tuple[BatchRecords, list[int]]:
    return records, keep


class PassFilter:
    """The rules of one pass: ``map_end`` bounds what the offset map covers (records at
    or past it are kept), ``now_ms`` decides delete horizons."""

    def __init__(
        self,
        offset_map: OffsetMap,
        map_end: int,
        *,
        now_ms: int,
        delete_retention_ms: int,
        producer_last_offsets: Mapping[int, int],
        stats: CleanStats,
        seed: tuple[int, int],
        vectorised: bool = True,
    ) -> None:
        self.map = offset_map
        self.map_end = map_end
        self.now = now_ms
        self.new_horizon = now_ms + delete_retention_ms
        self.producer_last_offsets = producer_last_offsets
        self.stats = stats
        self.vectorised = vectorised
        self.seed = seed
        # The earliest delete horizon of a tombstone left in the log, -1 when none.
        self.next_horizon = -1

    def chunk(self, batches: Chunk, out: BatchSink) -> bool:
        """Filter one chunk of batches into ``out``; returns True when anything changed."""
        data = [(batch, header) for batch, header in batches if is_data(header)]
        if not data:
            for batch, header in batches:
                out.append(batch, header.last_offset, header.max_timestamp)
            return False
        located = locate(data) if self.vectorised else None
        if located is None:
            return self._chunk_reference(batches, out)
        headers = [h for _, h in data]
        counts = located.counts
        bases = np.array([h.base_offset for h in headers], dtype=np.int64)
        offsets = np.repeat(bases, counts) + located.offset_deltas
        found = self.map.get(
            digests_at(located.data, located.key_starts, located.key_ends, self.seed)
        )
        has_horizon = np.array([bool(h.attributes & Attr.DELETE_HORIZON) for h in headers])
        horizons = np.array([h.base_timestamp for h in headers], dtype=np.int64)
        expired = located.tombstones & np.repeat(has_horizon & (self.now >= horizons), counts)
        beyond = offsets >= self.map_end
        latest = ~located.key_nulls & (found <= offsets)
        keep = beyond | (latest & ~expired)
        self.stats.tombstones_removed += int(np.count_nonzero(~beyond & latest & expired))
        kept = np.add.reduceat(keep.astype(np.int64), located.first_row).tolist()
        kept_tombstones = (
            np.add.reduceat((keep & located.tombstones).astype(np.int64), located.first_row) > 0
        ).tolist()
        changed = False
        n = 0
        for batch, header in batches:
            if not is_data(header):
                out.append(batch, header.last_offset, header.max_timestamp)
                continue
            lo = int(located.first_row[n])
            count = int(counts[n])
            changed |= self._emit(
                batch,
                header,
                count,
                kept[n],
                kept_tombstones[n],
                partial(_located_batch, located, keep, n, lo, count),
                out,
            )
            n += 1
        return changed

    def _chunk_reference(self, batches: Chunk, out: BatchSink) -> bool:
        walked: list[BatchRecords | None] = []
        keys: list[bytes] = []
        for batch, header in batches:
            if is_data(header):
                records = walk_records(batch, header)
                walked.append(records)
                keys.extend(k if k is not None else b"" for k in records.keys)
            else:
                walked.append(None)
        found = self.map.get(digests_of(keys, self.seed)).tolist()
        at = 0
        changed = False
        for (batch, header), walked_batch in zip(batches, walked, strict=True):
            if walked_batch is None:
                out.append(batch, header.last_offset, header.max_timestamp)
                continue
            records = walked_batch
            count = len(records)
            expired_at = header.base_timestamp if header.attributes & Attr.DELETE_HORIZON else None
            keep: list[int] = []
            for i in range(count):
                offset = header.base_offset + records.offset_deltas[i]
                if offset < self.map_end:
                    if records.keys[i] is None or found[at + i] > offset:
                        continue  # no key (invalid in a compacted log) or superseded
                    if records.tombstones[i] and expired_at is not None and self.now >= expired_at:
                        self.stats.tombstones_removed += 1
                        continue
                keep.append(i)
            at += count
            kept_tombstone = any(records.tombstones[i] for i in keep)
            changed |= self._emit(
                batch,
                header,
                count,
                len(keep),
                kept_tombstone,
                partial(_given, records, keep),
                out,
            )
        return changed

    def _emit(
        self,
        batch: BytesLike,
        header: BatchHeader,
        count: int,
        kept: int,
        kept_tombstone: bool,
        kept_records: Callable[[], tuple[BatchRecords, list[int]]],
        out: BatchSink,
    ) -> bool:
        """Write what is left of one data batch; True when it changed."""
        self.stats.records_read += count
        self.stats.records_kept += kept
        has_horizon = bool(header.attributes & Attr.DELETE_HORIZON)
        stamp = kept_tombstone and not has_horizon
        if kept_tombstone:
            horizon = self.new_horizon if stamp else header.base_timestamp
            if self.next_horizon < 0 or horizon < self.next_horizon:
                self.next_horizon = horizon
        if kept == count and not stamp:
            out.append(batch, header.last_offset, header.max_timestamp)
            return False
        if kept:
            records, keep = kept_records()
            parts, size, max_timestamp = rebuild_parts(
                header, records, keep, self.new_horizon if stamp else None
            )
            out.append_parts(parts, size, header.last_offset, max_timestamp)
        elif (
            header.producer_id >= 0
            and self.producer_last_offsets.get(header.producer_id) == header.last_offset
        ):
            out.append(empty_batch(header), header.last_offset, header.max_timestamp)
        return True
