"""One cleaning pass over one log's closed segments: the work of Kafka's ``Cleaner``.

Runs off the broker's event loop (in a worker process, see ``cleaner.py``) and touches no
``Log`` object: a ``CleanJob`` names the segment files and the rules, and ``clean`` reads
them and writes the cleaned replacements beside them as ``<base>.log.cleaned`` (with
``.index.cleaned`` and ``.timeindex.cleaned``), returning what it wrote. Swapping them into
the log is the owner's step (``tierlog.local.segment_swap``), done on the event loop after
checking that the segments are still the ones read.

A pass, as in Kafka's design (seeds 003/004):

1. Build the offset map over the dirty segments (from the first dirty offset to the first
   uncleanable one): key digest -> offset of the key's latest record. Whole segments only;
   when the next segment's new keys do not fit, the map ends before it (that segment is
   dirty for the next pass). When not even the first one fits, the log cannot be cleaned
   with this much memory: ``OffsetMapFullError``.
2. Rewrite every segment from the log start up to the map's end, grouped so that a group's
   segments together stay within ``segment.bytes`` (small cleaned segments merge). A
   record is kept when it has a key, no later record of its key is in the map, and it is
   not a tombstone past its delete horizon (KIP-534: a tombstone's first pass stamps the
   batch with ``now + delete.retention.ms``; a pass after that time drops it). A batch left
   with no record is dropped, unless it is an idempotent producer's last batch, which stays
   as an empty batch so the producer's sequence survives (an empty batch that is no longer
   its producer's last goes). Markers follow the transaction rules below. Every batch's
   CRC-32C is checked before it is copied: a corrupt segment is never
   rewritten into a valid-looking one.

Transactions (KIP-98, Kafka's ``CleanedTransactionMetadata``; ``txn_tracker``): the job
carries the aborted transactions of the range (from the ``.txnindex`` files). The offset
map skips the records of aborted transactions, so they never shadow an earlier committed
value, and cleaning drops them; markers stay while their transactions have batches left,
then until their delete horizon (``pass_filter``). Each cleaned group gets the entries of
the ABORT markers it keeps with data as ``<base>.txnindex.cleaned``. The range never
reaches the first unstable offset (``cleanable``): every transaction in it is decided.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tierlog.compaction.offset_map import OffsetMap, OffsetMapFullError
from tierlog.compaction.pass_filter import CleanStats, PassFilter, is_data, keyed_offsets
from tierlog.compaction.txn_tracker import TXN_ATTRS, CleanedTransactions
from tierlog.local.errors import CorruptSegmentError
from tierlog.local.offset_index import OffsetIndex
from tierlog.local.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, segment_name
from tierlog.local.segment_swap import CLEANED_SUFFIX, discard_cleaned, write_range
from tierlog.local.time_index import NO_TIMESTAMP, TimeIndex
from tierlog.records.header import (
    HEADER_SIZE,
    Attr,
    BatchHeader,
    parse_header,
    peek_size,
    validate_batch,
)
from tierlog.records.txn_index_codec import TXN_INDEX_SUFFIX, AbortedTxn, encode_entries
from tierlog.records.varint import BytesLike
from tierlog.util.clock import Clock, SystemClock
from tierlog.util.throttle import Throttle

# Linux IOV_MAX: one writev call takes at most this many buffers.
_IOV_MAX = 1024
# Batches are filtered a chunk at a time: one vectorised map lookup per chunk, and memory
# bounded whatever the segment size.
_CHUNK_BYTES = 4 << 20
_INT32_MAX = (1 << 31) - 1


@dataclass(frozen=True, slots=True)
class SegmentFile:
    """A closed segment as the job sees it: its file, how much of it, which offsets."""

    base_offset: int
    path: str
    size: int
    next_offset: int


@dataclass(frozen=True, slots=True)
class CleanJob:
    """Everything one pass needs; plain data, so it can cross to a worker process.

    ``segments`` are the log's closed segments from the log start, in order, up to the
    first uncleanable offset (a segment boundary). ``producer_last_offsets`` maps each
    idempotent producer to the last offset of its last batch in the log,
    ``producer_epochs`` each producer whose state holds no data batch to its epoch (its
    last marker is kept). ``aborted_transactions`` are the ``.txnindex`` entries of every
    transaction aborted at or after the first segment's base that began before the end
    of the segments (``Log.collect_aborted_transactions``), in any order.
    """

    name: str
    segments: tuple[SegmentFile, ...]
    log_start_offset: int
    first_dirty_offset: int
    now_ms: int
    delete_retention_ms: int
    segment_bytes: int
    index_interval_bytes: int
    max_index_size: int
    map_memory_bytes: int
    map_load_factor: float = 0.9
    io_bytes_per_second: float = 0.0  # 0 = unthrottled
    producer_last_offsets: dict[int, int] = field(default_factory=dict)
    # The key digests' seed, random per pass (``key_hash``).
    hash_seed: tuple[int, int] = (0, 0)
    aborted_transactions: tuple[AbortedTxn, ...] = ()
    producer_epochs: dict[int, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CleanedGroup:
    """One cleaned file replacing ``replaced`` (consecutive segments, by base offset)."""

    replaced: tuple[SegmentFile, ...]
    base_offset: int
    log_path: str  # the .log.cleaned file; its indexes sit beside it
    size: int
    # The .txnindex.cleaned file, None when no aborted transaction's entry is kept.
    txn_index_path: str | None = None


@dataclass(slots=True)
class CleanResult:
    """What the pass wrote; ``map_end_offset`` is the next pass's first dirty offset.

    ``next_delete_horizon_ms`` is the earliest delete horizon of a tombstone left in the
    log (-1 when none): the log must be cleaned again after it even if nothing else
    changes (KIP-534).
    """

    groups: list[CleanedGroup]
    map_end_offset: int
    stats: CleanStats
    next_delete_horizon_ms: int = -1


def read_batches(
    segment: SegmentFile, check_crc: bool = False
) -> Iterator[list[tuple[memoryview, BatchHeader]]]:
    """The segment's batches, a chunk of about ``_CHUNK_BYTES`` at a time, each batch a
    view into a chunk the caller may keep (plain reads, not a map that must be closed)."""
    parse = validate_batch if check_crc else parse_header
    fd = os.open(segment.path, os.O_RDONLY)
    try:
        position = 0
        while position < segment.size:
            want = min(_CHUNK_BYTES, segment.size - position)
            data = os.pread(fd, want, position)
            if len(data) < want:
                raise CorruptSegmentError(
                    f"{segment.path}: ends at {position + len(data)}, expected {segment.size}",
                    segment.path,
                    position + len(data),
                )
            view = memoryview(data)
            chunk: list[tuple[memoryview, BatchHeader]] = []
            at = 0
            while at + HEADER_SIZE <= len(data):
                size = peek_size(view, at)[1]  # type: ignore[index]  # >= 12 bytes left
                if size < HEADER_SIZE:
                    parse_header(view, at)  # raises: a length too small for a header
                if at + size > len(data):
                    break
                header = parse(view, at)
                chunk.append((view[at : at + size], header))
                at += size
            if not chunk:
                # One batch larger than a chunk: read exactly it.
                header = parse_header(os.pread(fd, HEADER_SIZE, position))
                data = os.pread(fd, header.size, position)
                header = parse(data)
                chunk, at = [(memoryview(data), header)], header.size
            position += at
            yield chunk
    finally:
        os.close(fd)


def build_offset_map(
    job: CleanJob, offset_map: OffsetMap, throttle: Throttle, stats: CleanStats
) -> int:
    """Fill ``offset_map`` from the dirty segments; returns the offset it ends at."""
    offset_map.reset(job.first_dirty_offset)
    end = job.first_dirty_offset
    # Entries of markers below the walk would keep their producers aborted for ever.
    txns = CleanedTransactions(
        t for t in job.aborted_transactions if t.last_offset >= job.first_dirty_offset
    )
    for segment in job.segments:
        if segment.next_offset <= job.first_dirty_offset:
            continue
        if segment.next_offset - 1 > offset_map.max_offset:
            break
        digest_parts: list[np.ndarray] = []
        offset_parts: list[np.ndarray] = []
        for chunk in read_batches(segment):
            wanted = []
            for batch, header in chunk:
                if header.attributes & TXN_ATTRS and _aborted(txns, batch, header):
                    continue
                if is_data(header) and header.last_offset >= job.first_dirty_offset:
                    wanted.append((batch, header))
            if wanted:
                digests, offsets = keyed_offsets(wanted, job.first_dirty_offset, job.hash_seed)
                digest_parts.append(digests)
                offset_parts.append(offsets)
        throttle(segment.size)
        stats.bytes_read += segment.size
        try:
            if digest_parts:
                offset_map.put(np.concatenate(digest_parts), np.concatenate(offset_parts))
        except OffsetMapFullError as exc:
            if end == job.first_dirty_offset:
                raise OffsetMapFullError(
                    f"{job.name}: segment {segment.path} alone does not fit the offset map: "
                    f"{exc}; raise log.cleaner.dedupe.buffer.size"
                ) from None
            break
        end = segment.next_offset
    stats.map_keys = offset_map.size
    stats.map_bytes_per_key = offset_map.bytes_per_key
    return end


def _aborted(txns: CleanedTransactions, batch: BytesLike, header: BatchHeader) -> bool:
    """Feed a transactional or control batch to ``txns``: True for a data batch of an
    aborted transaction (its records are not in the map: Kafka's ``buildOffsetMap``)."""
    if header.attributes & Attr.CONTROL:
        txns.on_marker(header, batch)
        return False
    return txns.on_batch(header)


def group_segments(
    segments: list[SegmentFile], max_bytes: int, max_index_size: int
) -> list[list[SegmentFile]]:
    """Consecutive segments whose sizes add up to at most ``max_bytes`` (Kafka's
    ``groupSegmentsBySize``): cleaned, each group becomes one segment. A group also stays
    within the indexes' 32-bit relative offsets and their preallocated size."""
    groups: list[list[SegmentFile]] = []
    rest = list(segments)
    # An index entry per batch at worst; the bound keeps a merged index within its size.
    index_bytes_per_segment_byte = 12 / 61
    while rest:
        group = [rest.pop(0)]
        size = group[0].size
        while rest:
            nxt = rest[0]
            if (
                size + nxt.size > max_bytes
                or (size + nxt.size) * index_bytes_per_segment_byte > max_index_size
                or nxt.next_offset - 1 - group[0].base_offset > _INT32_MAX
            ):
                break
            group.append(rest.pop(0))
            size += nxt.size
        groups.append(group)
    return groups


class _CleanedWriter:
    """Writes one ``.log.cleaned`` file and its two indexes, as a segment's appends would."""

    def __init__(self, directory: Path, base_offset: int, job: CleanJob) -> None:
        stem = directory / segment_name(base_offset)
        self.base_offset = base_offset
        self.log_path = Path(str(stem) + LOG_SUFFIX + CLEANED_SUFFIX)
        self.fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        index_size = job.max_index_size
        self.offset_index = OffsetIndex(
            Path(str(stem) + INDEX_SUFFIX + CLEANED_SUFFIX), base_offset, index_size
        )
        self.time_index = TimeIndex(
            Path(str(stem) + TIME_INDEX_SUFFIX + CLEANED_SUFFIX), base_offset, index_size
        )
        self.offset_index.reset()
        self.time_index.reset()
        self.interval = job.index_interval_bytes
        self.position = 0
        self.since_index = 0
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max = base_offset
        self.pending: list[BytesLike] = []
        self.pending_bytes = 0

    def append(self, batch: BytesLike, last_offset: int, max_timestamp: int) -> None:
        self.append_parts((batch,), len(batch), last_offset, max_timestamp)

    def append_parts(
        self, parts: Sequence[BytesLike], size: int, last_offset: int, max_timestamp: int
    ) -> None:
        if max_timestamp > self.max_timestamp:
            self.max_timestamp, self.offset_of_max = max_timestamp, last_offset
        if self.since_index > self.interval and not self.offset_index.is_full:
            self.offset_index.append(last_offset, self.position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max)
            self.since_index = 0
        self.since_index += size
        self.position += size
        self.pending.extend(parts)
        self.pending_bytes += size
        if self.pending_bytes >= _CHUNK_BYTES:
            self._write()

    def _write(self) -> None:
        """Write the pending buffers with writev (views of what was read and the kept
        records' bytes, written without joining them first)."""
        pending = self.pending
        at = 0
        while at < len(pending):
            group = pending[at : at + _IOV_MAX]
            written = os.writev(self.fd, group)
            expected = sum(len(b) for b in group)
            if written < expected:  # a short write (rare on a file): finish it plainly
                rest = memoryview(b"".join(group))[written:]
                while rest:
                    rest = rest[os.write(self.fd, rest) :]
            at += len(group)
        pending.clear()
        self.pending_bytes = 0

    def finish(self) -> int:
        """Write out, record the final max timestamp, trim and fsync; returns the size."""
        self._write()
        if self.max_timestamp != NO_TIMESTAMP and not self.time_index.is_full:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max)
        for index in (self.offset_index, self.time_index):
            index.trim_to_valid_size()
            index.flush()
            index.close()
        os.fsync(self.fd)
        os.close(self.fd)
        return self.position

    def write_range(self, end_offset: int) -> None:
        """Record the replaced offsets' end beside the files (see ``segment_swap``)."""
        write_range(self.log_path.parent, self.base_offset, end_offset)

    def abandon(self) -> None:
        for index in (self.offset_index, self.time_index):
            index.close()
            index.path.unlink(missing_ok=True)
        os.close(self.fd)
        remove_cleaned(str(self.log_path))


def clean_group(
    job: CleanJob, group: list[SegmentFile], rules: PassFilter, throttle: Throttle
) -> CleanedGroup | None:
    """Write the cleaned replacement of ``group``; None when it would be identical."""
    directory = Path(group[0].path).parent
    out = _CleanedWriter(directory, group[0].base_offset, job)
    changed = len(group) > 1
    base, end = group[0].base_offset, group[-1].next_offset
    rules.transactions.take_kept_entries()
    txn_index_path = None
    try:
        for segment in group:
            # CRC-checked: a corrupt segment is never rewritten into a valid-looking one.
            for chunk in read_batches(segment, check_crc=True):
                changed |= rules.chunk(chunk, out)
            throttle(segment.size)
            rules.stats.bytes_read += segment.size
        kept_txns = rules.transactions.take_kept_entries()
        indexed = sorted(
            (t for t in job.aborted_transactions if base <= t.last_offset < end),
            key=lambda t: t.last_offset,
        )
        changed |= kept_txns != indexed
        if not changed:
            out.abandon()
            return None
        size = out.finish()
        if kept_txns or indexed:
            # Written even empty: without it the swap would carry the replaced segments'
            # entries over (``segment_swap``), and an entry outliving its marker would hide
            # its producer's later transactions from read_committed consumers.
            path = _write_txn_index(directory, base, kept_txns)
            txn_index_path = path if kept_txns else None
        out.write_range(end)
    except BaseException:
        out.abandon()
        raise
    rules.stats.bytes_written += size
    return CleanedGroup(tuple(group), group[0].base_offset, str(out.log_path), size, txn_index_path)


def _write_txn_index(directory: Path, base_offset: int, entries: list[AbortedTxn]) -> str:
    """``<base>.txnindex.cleaned`` (fsynced): the aborted transactions the cleaned segment
    keeps markers and data of, in marker order (Kafka's cleaned ``TransactionIndex``);
    zero bytes for none."""
    path = directory / (segment_name(base_offset) + TXN_INDEX_SUFFIX + CLEANED_SUFFIX)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, encode_entries(entries))
        os.fsync(fd)
    finally:
        os.close(fd)
    return str(path)


def clean(
    job: CleanJob, clock: Clock | None = None, sleep: Callable[[float], None] = time.sleep
) -> CleanResult:
    """One pass over ``job``'s log (see the module docstring). Writes ``.cleaned`` files
    only; on any error the files this pass wrote are removed before it raises.

    Args:
        clock, sleep: the I/O throttle's time and waiting (a worker process uses the
            system's; tests pass a manual clock).

    Raises:
        OffsetMapFullError: the first dirty segment alone does not fit the map.
        RecordsError: a batch fails its CRC or does not parse (nothing is swapped).
    """
    stats = CleanStats()
    # log.cleaner.io.max.bytes.per.second, as the pass's average; waits under 10 ms are
    # carried over to the next, not slept.
    throttle = Throttle(
        job.io_bytes_per_second, clock or SystemClock(), sleep=sleep, min_wait_s=0.01
    )
    # The dirty part has at most one record per offset: a map for that many keys is all a
    # pass can fill, and a smaller table is cleared and probed faster than the whole buffer.
    dirty_offsets = (
        max((s.next_offset for s in job.segments), default=job.first_dirty_offset)
        - job.first_dirty_offset
    )
    memory = min(job.map_memory_bytes, OffsetMap.bytes_for(max(dirty_offsets, 1024)))
    offset_map = OffsetMap(memory, job.map_load_factor)
    started = time.monotonic()
    map_end = build_offset_map(job, offset_map, throttle, stats)
    stats.map_seconds = time.monotonic() - started
    cleanable = [s for s in job.segments if s.base_offset < map_end]
    rules = PassFilter(
        offset_map,
        map_end,
        now_ms=job.now_ms,
        delete_retention_ms=job.delete_retention_ms,
        producer_last_offsets=job.producer_last_offsets,
        stats=stats,
        seed=job.hash_seed,
        transactions=CleanedTransactions(
            t
            for t in job.aborted_transactions
            if t.last_offset >= (job.segments[0].base_offset if job.segments else 0)
        ),
        producer_epochs=job.producer_epochs,
    )
    groups: list[CleanedGroup] = []
    try:
        for group in group_segments(cleanable, job.segment_bytes, job.max_index_size):
            cleaned = clean_group(job, group, rules, throttle)
            if cleaned is not None:
                groups.append(cleaned)
    except BaseException:
        for done in groups:
            remove_cleaned(done.log_path)
        raise
    stats.clean_seconds = time.monotonic() - started - stats.map_seconds
    return CleanResult(groups, map_end, stats, rules.next_horizon)


def remove_cleaned(log_path: str) -> None:
    """Delete a ``.log.cleaned`` file, its indexes and its range file (the swap module
    owns those names)."""
    path = Path(log_path)
    discard_cleaned(path.parent, int(path.name.split(".")[0]))
