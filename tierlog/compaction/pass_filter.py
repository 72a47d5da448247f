"""The cleaner's per-record rules, applied to a chunk of batches at a time.

A record of the part a pass cleans is kept when it has a key, no later record of its key
is in the offset map, it is not a tombstone past its batch's delete horizon, and its batch
is not of an aborted transaction. What happens to a batch then (``_emit``): kept whole,
it is copied byte for byte; partly kept, it is rebuilt with its kept records
(``batch_filter.rebuild_batch``); emptied, it goes, unless it is its producer's last
batch, kept empty (``_last_of_producer``). A batch whose kept records include a tombstone
and which has no delete horizon yet gets one (KIP-534): ``now + delete.retention.ms``.

Transactions (KIP-98; Kafka's ``Cleaner.cleanInto`` with ``CleanedTransactionMetadata``,
``txn_tracker``): each chunk is first walked batch by batch (``_classify``) for the
tracker. A data batch of an aborted transaction goes whole (empty if it is its producer's
last). A marker is kept while a batch of its transaction was seen in this pass; once none
is, it is "empty": the first pass that finds it so stamps it with a delete horizon, as a
tombstone's batch, and the first pass past the horizon removes it. A data batch already
empty goes unless it is its producer's last (Kafka's ``BatchRetention.DELETE_EMPTY``).

Two ways to find the records of the plain data batches, with the same result: the
vectorised one (``chunk_records.locate`` + numpy decisions for the whole chunk), and the
per-record reference (``batch_filter.walk_records``), taken when the vectorised one gives
a chunk up (long varints, anything malformed) and used by the tests as the oracle.
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
from tierlog.compaction.txn_tracker import TXN_ATTRS, CleanedTransactions
from tierlog.records.header import Attr, BatchHeader
from tierlog.records.varint import BytesLike

Chunk = Sequence[tuple[BytesLike, BatchHeader]]

# What ``_classify`` makes of a batch.
_PLAIN = 0  # data with records, not of an aborted transaction: the per-record rules
_ABORTED = 1  # data of an aborted transaction
_EMPTY = 2  # a data batch with no records (kept by an earlier pass)
_MARKER = 3  # a control batch whose transaction still has batches in this pass
_EMPTY_MARKER = 4  # a control batch with none left (or already empty)


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
    aborted_removed: int = 0  # records of aborted transactions
    markers_removed: int = 0
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


# One plain batch's verdict: records, kept, whether a kept one is a tombstone, and how to
# get the kept records when the batch must be rebuilt.
_Verdict = tuple[int, int, bool, Callable[[], tuple[BatchRecords, list[int]]]]


class PassFilter:
    """The rules of one pass: ``map_end`` bounds what the offset map covers (records at
    or past it are kept), ``now_ms`` decides delete horizons, ``transactions`` tracks the
    aborted transactions over the batches in offset order (one tracker for the pass).

    ``producer_last_offsets`` maps each producer to the last offset of its last data
    batch, ``producer_epochs`` each producer with no data batch left in its state to its
    epoch: the batches kept (empty if need be) for the producers' state (Kafka's
    ``lastRecordsOfActiveProducers``)."""

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
        transactions: CleanedTransactions | None = None,
        producer_epochs: Mapping[int, int] | None = None,
    ) -> None:
        self.map = offset_map
        self.map_end = map_end
        self.now = now_ms
        self.new_horizon = now_ms + delete_retention_ms
        self.producer_last_offsets = producer_last_offsets
        self.producer_epochs = producer_epochs or {}
        self.stats = stats
        self.vectorised = vectorised
        self.seed = seed
        self.transactions = transactions or CleanedTransactions()
        # The earliest delete horizon of a tombstone or an empty marker left in the log,
        # -1 when none.
        self.next_horizon = -1

    def _classify(self, batches: Chunk) -> list[int]:
        """Each batch's kind, feeding the transaction tracker in offset order."""
        kinds: list[int] = []
        txns = self.transactions
        for batch, header in batches:
            attrs = header.attributes
            if not attrs & TXN_ATTRS:
                kinds.append(_PLAIN if header.record_count else _EMPTY)
            elif attrs & Attr.CONTROL:
                kinds.append(_EMPTY_MARKER if txns.on_marker(header, batch) else _MARKER)
            elif txns.on_batch(header):
                kinds.append(_ABORTED)
            else:
                kinds.append(_PLAIN if header.record_count else _EMPTY)
        return kinds

    def chunk(self, batches: Chunk, out: BatchSink) -> bool:
        """Filter one chunk of batches into ``out``; returns True when anything changed."""
        kinds = self._classify(batches)
        data = [pair for pair, kind in zip(batches, kinds, strict=True) if kind == _PLAIN]
        verdicts: list[_Verdict] = []
        if data:
            located = locate(data) if self.vectorised else None
            if located is not None:
                verdicts = self._located(data, located)
            else:
                verdicts = self._reference(data)
        changed = False
        n = 0
        for (batch, header), kind in zip(batches, kinds, strict=True):
            if kind == _PLAIN:
                changed |= self._emit(batch, header, *verdicts[n], out)
                n += 1
            elif kind == _MARKER:
                out.append(batch, header.last_offset, header.max_timestamp)
            elif kind == _EMPTY_MARKER:
                changed |= self._emit_empty_marker(batch, header, out)
            else:
                changed |= self._emit_dropped(batch, header, kind, out)
        return changed

    def _located(self, data: Chunk, located: ChunkRecords) -> list[_Verdict]:
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
        first_rows = located.first_row.tolist()
        count_list = counts.tolist()
        return [
            (
                count_list[n],
                kept[n],
                kept_tombstones[n],
                partial(_located_batch, located, keep, n, first_rows[n], count_list[n]),
            )
            for n in range(len(data))
        ]

    def _reference(self, data: Chunk) -> list[_Verdict]:
        walked: list[BatchRecords] = []
        keys: list[bytes] = []
        for batch, header in data:
            records = walk_records(batch, header)
            walked.append(records)
            keys.extend(k if k is not None else b"" for k in records.keys)
        found = self.map.get(digests_of(keys, self.seed)).tolist()
        at = 0
        verdicts: list[_Verdict] = []
        for (_, header), records in zip(data, walked, strict=True):
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
            verdicts.append((count, len(keep), kept_tombstone, partial(_given, records, keep)))
        return verdicts

    def _last_of_producer(self, header: BatchHeader) -> bool:
        """Whether the batch is kept (empty if need be) for its producer's state: its
        last data batch (the sequence), or for a producer with none, a marker of its
        current epoch (fencing) — Kafka's ``isBatchLastRecordOfProducer``."""
        pid = header.producer_id
        if pid < 0:
            return False
        last = self.producer_last_offsets.get(pid)
        if last is not None:
            return header.last_offset == last
        return bool(header.attributes & Attr.CONTROL) and (
            self.producer_epochs.get(pid) == header.producer_epoch
        )

    def _horizon_left(self, horizon: int) -> None:
        if self.next_horizon < 0 or horizon < self.next_horizon:
            self.next_horizon = horizon

    def _emit_dropped(
        self, batch: BytesLike, header: BatchHeader, kind: int, out: BatchSink
    ) -> bool:
        """A batch of an aborted transaction, or an empty data batch: it goes, or stays
        empty for its producer's state."""
        count = header.record_count
        self.stats.records_read += count
        if kind == _ABORTED:
            self.stats.aborted_removed += count
        if not self._last_of_producer(header):
            return True
        if count == 0:
            out.append(batch, header.last_offset, header.max_timestamp)
            return False
        out.append(empty_batch(header), header.last_offset, header.max_timestamp)
        return True

    def _emit_empty_marker(self, batch: BytesLike, header: BatchHeader, out: BatchSink) -> bool:
        """A marker with no batch of its transaction left below it: stamped with a delete
        horizon by the first pass that finds it so, removed by the first pass past it."""
        has_horizon = bool(header.attributes & Attr.DELETE_HORIZON)
        if header.record_count and not (has_horizon and self.now >= header.base_timestamp):
            if has_horizon:
                self._horizon_left(header.base_timestamp)
                out.append(batch, header.last_offset, header.max_timestamp)
                return False
            self._horizon_left(self.new_horizon)
            records = walk_records(batch, header)
            parts, size, max_timestamp = rebuild_parts(
                header, records, range(len(records)), self.new_horizon
            )
            out.append_parts(parts, size, header.last_offset, max_timestamp)
            return True
        if self._last_of_producer(header):
            if header.record_count == 0:
                out.append(batch, header.last_offset, header.max_timestamp)
                return False
            out.append(empty_batch(header), header.last_offset, header.max_timestamp)
        self.stats.markers_removed += 1
        return True

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
            self._horizon_left(self.new_horizon if stamp else header.base_timestamp)
        if kept == count and not stamp:
            out.append(batch, header.last_offset, header.max_timestamp)
            return False
        if kept:
            records, keep = kept_records()
            parts, size, max_timestamp = rebuild_parts(
                header, records, keep, self.new_horizon if stamp else None
            )
            out.append_parts(parts, size, header.last_offset, max_timestamp)
        elif self._last_of_producer(header):
            out.append(empty_batch(header), header.last_offset, header.max_timestamp)
        return True
