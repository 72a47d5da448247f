"""One log segment: a ``.log`` file of v2 record batches with its ``.index`` and ``.timeindex``,
and a ``.txnindex`` of the transactions aborted in it (only when there is one, as in Kafka).

Files are named by the segment's base offset, 20 digits (``00000000000000000042.log``), in
Kafka's layout, so Kafka's own tools can read them. The ``.log`` holds batches exactly as
producers sent them, with only baseOffset and partitionLeaderEpoch rewritten (see
``tierlog.records.header``). Appends go through ``os.pwritev``; reads return a ``FileSlice``
that can go to a socket with ``os.sendfile``.

Lifecycle of a segment (``SegmentState``)::

    ACTIVE --roll--> CLOSED --retention/truncation--> DELETED (renamed *.deleted,
       ^               |                             unlinked after file.delete.delay.ms)
       +--truncation---+ (make_active: the last segment left takes appends again)

Leases (``file_lease.py``). A fetch answer is sent after the read that produced it, with
``sendfile`` from the segment's fd, so every ``FileSlice`` that ``read`` returns holds a
lease on the open file it names (a ``SegmentFile``), which keeps the fd open and its bytes
unchanged until the answer is out, whatever the log does meanwhile. Unlinking the path at
once is fine: the open fd keeps the inode and its pages.

Truncation never shrinks or rewrites bytes that were leased for sending
(``SegmentFile.leased_end``, the highest end any fetch's lease ever named), nor any byte of
a file that a reader is checking (``SegmentFile.readers``, the scrubber's whole-file
leases, ``lease_all``): then ``truncate_to`` copies the kept prefix to a new file
(``copy_file_range``, in the kernel), renames it over the segment's path and switches the
segment to it, leaving the old inode to the leases. ``leased_end`` never goes down, even
when no lease is outstanding, because Linux ``sendfile`` to TCP queues page-cache pages by
reference: bytes already "sent" are still read from the file's pages until the peer takes
them (on loopback, until the client reads), and an in-place ``ftruncate`` zeroes the tail
of the page at the new end, which the next append then overwrites. A reader with
``pread`` has its bytes once the call returns, so ``readers`` counts only the readers still
reading: once the scrubber is done with a file, truncating it cuts in place again. The
copy costs up to one segment of I/O, only when a truncation (a follower whose leader's log
diverged, which is rare) cuts bytes a fetch has read, or meets the scrubber in that
segment; the alternative, refusing the truncation until leases drain, would stall
replication behind a slow consumer. Appends write only past ``size``, beyond every lease,
so they never need this.

Not thread-safe; owned by one ``Log``, and leases are taken and released on the thread
that owns the log (the broker's event loop).

Size: ~1,200 lines, past the ~600 guideline: the segment keeps its four files' whole life
(load and recovery with its damage rules, append with index upkeep, reads with damage
marks, missing offsets, index checks and the check before serving, copy-on-write
truncation, opening and closing for the open-file budget, delete), all on the same
private state (size, offsets, indexes, marks). The leases moved out to ``file_lease.py``
and the CRC walk to ``crc_check.py``; the parts to move out next are the damage and
verified-range bookkeeping (a class the segment owns) and the recovery scan.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import mmap
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TypeVar

from crc32c import crc32c

from tierlog.local.crc_check import check_batches
from tierlog.local.errors import CorruptSegmentError
from tierlog.local.file_lease import FileSlice, ReaderSlice, SegmentFile
from tierlog.local.index import CorruptIndexError
from tierlog.local.offset_index import OffsetIndex
from tierlog.local.open_files import PROCESS_FILES, OpenFiles
from tierlog.local.time_index import NO_TIMESTAMP, TimeIndex
from tierlog.local.txn_index import TransactionIndex
from tierlog.records.errors import RecordsError
from tierlog.records.header import (
    ATTRIBUTES_OFFSET,
    HEADER_SIZE,
    BatchHeader,
    parse_header,
    validate_batch,
)
from tierlog.records.txn_index_codec import TXN_INDEX_SUFFIX

log = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"
# Linux IOV_MAX; one pwritev call takes at most this many buffers.
_IOV_MAX = 1024
# Deleted segments at least this large are unlinked on a background thread.
_BACKGROUND_UNLINK_BYTES = 8 << 20
_UNLINKER: ThreadPoolExecutor | None = None


def _unlinker() -> ThreadPoolExecutor:
    global _UNLINKER
    if _UNLINKER is None:
        _UNLINKER = ThreadPoolExecutor(1, thread_name_prefix="segment-unlink")
    return _UNLINKER


_I = TypeVar("_I", OffsetIndex, TimeIndex)


class SegmentState(Enum):
    ACTIVE = "active"
    CLOSED = "closed"
    DELETED = "deleted"


def _copy_prefix(src: int, dst: int, size: int, what: Path) -> None:
    """Copy bytes ``[0, size)`` of ``src`` to ``dst``: in the kernel with
    ``copy_file_range`` (a reflink where the filesystem shares extents), else through a
    buffer where the filesystem refuses it."""
    copied = 0
    try:
        while copied < size:
            n = os.copy_file_range(src, dst, size - copied, copied, copied)
            if n == 0:
                break
            copied += n
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
            raise
    while copied < size:
        chunk = os.pread(src, min(size - copied, 1 << 20), copied)
        if not chunk:
            break
        copied += os.pwrite(dst, chunk, copied)
    if copied < size:
        raise OSError(f"{what}: file ended at {copied} copying {size} bytes")


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


def _check_batch(
    buf: memoryview, position: int, expected_offset: int
) -> tuple[BatchHeader | None, str | None]:
    """Check the batch at ``position`` of a whole segment file's bytes: ``(header, None)``
    when whole; ``(header, problem)`` when only its CRC-32C fails (its length can still be
    trusted, so what follows can be checked); ``(None, problem)`` when its header, length
    or offsets cannot be trusted (nothing after it can be found without guessing)."""
    try:
        header = parse_header(buf, position)
    except RecordsError as exc:
        return None, str(exc)
    if position + header.size > len(buf):
        return None, (
            f"batch of {header.size} bytes runs past the end of the file ({len(buf)} bytes)"
        )
    if header.last_offset_delta < 0 or header.record_count < 0:
        return None, f"batch at offset {header.base_offset} has a negative count"
    if header.base_offset < expected_offset:
        return None, f"batch offset {header.base_offset} goes back below {expected_offset}"
    actual = int(crc32c(buf[position + ATTRIBUTES_OFFSET : position + header.size]))
    if actual != header.crc:
        return header, (
            f"batch at offset {header.base_offset}: CRC-32C {actual:#010x} does not match "
            f"stored {header.crc:#010x}"
        )
    return header, None


@dataclass(slots=True)
class BatchEntry:
    """What a segment records for one batch it appends: where and which offsets/time."""

    position: int
    size: int
    last_offset: int
    max_timestamp: int


class LogSegment:
    """A segment's three files plus the running state needed to append and roll.

    Args:
        directory: the partition directory.
        base_offset: first offset this segment may hold; names its files.
        index_interval_bytes: bytes of log between two index entries.
        max_index_size: preallocated size of each index while the segment is active.
        created_ms: wall-clock creation time, the roll age for a segment with no timestamps.
        open_files: the budget of open segments it counts itself in (``open_files``).

    Files (issue 20, item 8): the ``.log`` is the one descriptor a segment holds, while it
    is open; its indexes are mapped with their files closed, its ``.txnindex`` opened per
    write. A segment opens its ``.log`` when made and again on first use after the budget
    closed it (``release_files``, when idle: no lease outstanding); ``fd`` does that.
    """

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_size: int,
        created_ms: int,
        open_files: OpenFiles = PROCESS_FILES,
    ) -> None:
        self.directory = Path(directory)
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.state = SegmentState.ACTIVE
        self._open_files = open_files
        # Set by every use of the file; the budget clears it (second chance, CLOCK).
        self.recently_used = True
        self._closed = False
        # The highest end any lease ever named in this inode, kept while the file is
        # closed by the budget, for the truncation rule (module docstring, "Leases").
        self._leased_end = 0
        stem = self.directory / segment_name(base_offset)
        self.path = stem.with_suffix(LOG_SUFFIX)
        created = not self.path.exists()
        # The open file behind ``fd``, shared with the leases of slices read from it;
        # None while the budget has it closed.
        self._file: SegmentFile | None = None
        self.size = os.fstat(self._open_file().fd).st_size
        self.created_ms = created_ms
        # True when an index file was absent or unreadable at open (it is then created
        # empty): the owner must ``recover()`` to rebuild it, as ``load()`` would trust it.
        self.indexes_missing = False
        self.offset_index = self._open_index(
            OffsetIndex, stem.with_suffix(INDEX_SUFFIX), max_index_size
        )
        self.time_index = self._open_index(
            TimeIndex, stem.with_suffix(TIME_INDEX_SUFFIX), max_index_size
        )
        # Aborted transactions whose marker is in this segment; the file appears with the
        # first entry. Rebuilt by the log when the segment is recovered.
        self.txn_index = TransactionIndex(stem.with_suffix(TXN_INDEX_SUFFIX))
        if self.txn_index.corrupt:
            self.indexes_missing = True  # recovery rebuilds it (Kafka's sanityCheck)
        self._bytes_since_index_entry = 0
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = base_offset
        # First batch's max timestamp: segment.ms counts from it, as in Kafka.
        self.first_batch_timestamp: int | None = None
        self.next_offset = base_offset
        # Byte ranges the scrubber found damaged: reads of them raise (mark_damaged).
        self.damaged: list[tuple[int, int, str]] = []
        # Byte ranges whose batches were read back from the file and passed their CRC-32C
        # (sorted, merged; usually one, from 0: the "verified up to" position). A read
        # checks what it would serve outside them first (``verify``, issue 20 item 6).
        self.verified: list[tuple[int, int]] = []
        if created:
            self._reserve_new_indexes()

    def _reserve_new_indexes(self) -> None:
        """A new segment (a roll) gets its indexes' first blocks now, or is not made.

        On a full disk the reservation fails with ENOSPC (see ``tierlog.local.index``);
        the files just created are removed again, so a roll that fails leaves nothing
        behind and the next one, once there is room, starts from scratch. The OSError
        reaches the produce path, which answers KAFKA_STORAGE_ERROR.
        """
        try:
            for index in self._indexes:
                index.make_appendable()
                index.reserve(1)
        except BaseException:
            self.offset_index.delete()
            self.time_index.delete()
            self.txn_index.delete()
            self._let_go()
            self.path.unlink(missing_ok=True)
            raise

    def _open_index(self, kind: type[_I], path: Path, max_index_size: int) -> _I:
        if not path.exists():
            self.indexes_missing = True
        try:
            return kind(path, self.base_offset, max_index_size, self._counted)
        except CorruptIndexError as exc:
            # Opening checks only the size; a partial entry means the file is unusable.
            log.warning("%s; rebuilding it from the log", exc)
            path.unlink()
            self.indexes_missing = True
            return kind(path, self.base_offset, max_index_size, self._counted)

    # -- files ---------------------------------------------------------------------------

    @property
    def fd(self) -> int:
        """The ``.log``'s descriptor, opening the file when the budget closed it; -1 once
        the segment is closed or deleted."""
        file = self._file
        if file is None:
            if self._closed:
                return -1
            file = self._open_file()
        self.recently_used = True
        return file.fd

    def _current_file(self) -> SegmentFile:
        file = self._file
        if file is None:
            if self._closed:
                raise ValueError(f"{self.path}: segment is closed")
            file = self._open_file()
        self.recently_used = True
        return file

    def _open_file(self) -> SegmentFile:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            if exc.errno not in (errno.EMFILE, errno.ENFILE):
                raise
            # Out of descriptors (the budget is a guess of what the rest of the process
            # needs): close idle segments and try once more.
            self._open_files.make_room(max(16, len(self._open_files) // 16))
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        file = SegmentFile(fd)
        file.leased_end = self._leased_end
        self._file = file
        self._counted()
        return file

    def _counted(self) -> None:
        """A file of this segment was opened or mapped: the budget counts it open."""
        self._open_files.opened(self)

    @property
    def is_open(self) -> bool:
        return self._file is not None

    def can_release(self) -> bool:
        """Whether the budget may close the files now: nothing leased from them."""
        file = self._file
        return not self._closed and (file is None or file.leases == 0)

    def release_files(self) -> None:
        """Close the ``.log`` and unmap the indexes, writing nothing; the next use opens
        them again. What was appended is in the page cache, as after a crash of the
        process, and its durability is the flush's business as ever (an index released
        with unflushed entries is ``fsync``ed by its next flush)."""
        file = self._file
        if file is not None:
            self._leased_end = max(self._leased_end, file.leased_end)
            file.retire()  # closed now, or at the release of a lease taken meanwhile
            self._file = None
        self.offset_index.release()
        self.time_index.release()
        self._open_files.closed(self)

    def _let_go(self) -> None:
        """For good: closed or deleted."""
        if self._file is not None:
            self._file.retire()
            self._file = None
        self._closed = True
        self._open_files.closed(self)

    # -- loading -------------------------------------------------------------------------

    def load(self, next_base: int | None = None) -> None:
        """Restore running state of a segment written before (clean stop): the next offset
        from the last index entry onwards, the max timestamp from the time index.

        ``next_base`` is the next segment's base offset when this one is closed. A closed
        segment whose header walk meets an unreadable batch is then kept as it is: the
        bytes from that batch on are marked damaged (reads of them answer
        KAFKA_STORAGE_ERROR) and its offsets end at ``next_base``. Truncating it, as
        recovery does, would also delete every later segment, intact data included,
        because the log's offsets must stay contiguous.

        Raises:
            CorruptIndexError: an index fails its sanity check; call ``recover``.
            RecordsError, CorruptSegmentError: a batch header in the scanned tail is
                malformed (an active segment, or no ``next_base``); call ``recover``.
        """
        self.offset_index.sanity_check(max(self.size, 1))
        _, position = self.offset_index.lookup(2**62)
        self.next_offset = self.base_offset
        try:
            for _, header in self._scan_headers(position):
                self.next_offset = header.next_offset
                self._note_timestamp(header.max_timestamp, header.last_offset)
        except CorruptSegmentError as exc:
            if next_base is None:
                raise
            self.mark_damaged(exc.position, self.size, str(exc).removeprefix(f"{self.path}: "))
            self.next_offset = next_base
            log.error(
                "%s: %s; offsets from there to %d answer KAFKA_STORAGE_ERROR (later segments "
                "are kept)",
                self.path,
                str(exc).removeprefix(f"{self.path}: "),
                next_base - 1,
            )
        self._bytes_since_index_entry = self.size - position
        if self.size and self.next_offset == self.base_offset:
            raise CorruptIndexError(f"{self.path}: no batch found after the last index entry")
        self.time_index.sanity_check(self.next_offset)
        ts, offset = self.time_index.last_entry
        # On a tie the earlier offset wins, as it did while appending (_note_timestamp
        # keeps the first batch reaching the max); MAX_TIMESTAMP lookups depend on it.
        if ts > self.max_timestamp or (
            ts == self.max_timestamp and offset < self.offset_of_max_timestamp
        ):
            self.max_timestamp, self.offset_of_max_timestamp = ts, offset
        try:
            first = self._header_at(0) if self.size and not self.damaged else None
        except RecordsError:
            if next_base is None:
                raise
            self.mark_damaged(0, self.size, "the first batch header does not parse")
            first = None
        if first is not None:
            self.first_batch_timestamp = first.max_timestamp

    def recover(self, truncatable_from: int | None = 0, next_base: int | None = None) -> int:
        """Scan every batch, checking length, magic, CRC-32C and rising offsets, and
        rebuild both indexes. The ``.txnindex`` is emptied: the owning log rebuilds it as
        it replays the producer state over the segment (the entries need the partition's
        ongoing transactions, which a segment does not know).

        What a bad batch does depends on where it is (issue 20, item 1). Bytes holding
        offsets at or past ``truncatable_from`` (the recovery point: never known flushed)
        are a torn tail: the file is truncated after the last valid batch. Anything else
        is acknowledged data, so nothing is truncated: a batch failing only its CRC-32C is
        marked damaged and the scan goes on past it; a batch whose length or header cannot
        be trusted marks everything from it to the end of the file, and the segment's
        offsets then end at ``next_base`` when there is one (later segments are kept).
        ``truncatable_from=None`` never truncates.

        Returns:
            The number of bytes truncated (0 when the segment was whole or kept).
        """
        self.offset_index.reset()
        self.time_index.reset()
        # Blocks for every entry the scan can write, before it writes any: on a full disk
        # this is an ENOSPC (start-up stops with one line), not a SIGBUS mid-scan. An
        # entry needs more than index_interval_bytes of log since the last one, and a
        # batch is at least a header.
        most = self.size // max(self.index_interval_bytes + 1, HEADER_SIZE) + 1
        self.offset_index.reserve(most)
        self.time_index.reserve(most)
        self.txn_index.reset()
        self._bytes_since_index_entry = 0
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = self.base_offset
        self.first_batch_timestamp = None
        self.next_offset = self.base_offset
        self.damaged = []
        self.verified = []
        position = 0
        good_from = 0  # start of the run of batches that passed (verified once done)
        structural: str | None = None
        if self.size:
            with mmap.mmap(self.fd, self.size, prot=mmap.PROT_READ) as view:
                buf = memoryview(view)
                try:
                    while position < self.size:
                        header, problem = _check_batch(buf, position, self.next_offset)
                        if header is None:
                            structural = problem
                            break
                        if problem is not None:
                            # Only the CRC-32C fails: the length can be trusted.
                            if self._may_truncate(truncatable_from):
                                structural = problem
                                break
                            self._mark_found(position, position + header.size, problem)
                            self.mark_verified(good_from, position)
                            good_from = position + header.size
                            self._bytes_since_index_entry += header.size
                        else:
                            self._index_batch(
                                position, header.size, header.last_offset, header.max_timestamp
                            )
                        self.next_offset = header.next_offset
                        position += header.size
                finally:
                    buf.release()
        self.mark_verified(good_from, position)
        if structural is None:
            return 0
        log.warning("%s: invalid batch at position %d (%s)", self.path, position, structural)
        if self._may_truncate(truncatable_from):
            truncated = self.size - position
            os.ftruncate(self.fd, position)
            self.size = position
            return truncated
        self._mark_found(position, self.size, structural)
        if next_base is not None:
            self.next_offset = next_base
        return 0

    def _may_truncate(self, truncatable_from: int | None) -> bool:
        """Whether bad bytes after the valid prefix are a torn tail (past the flushed
        point) rather than damage to acknowledged data."""
        return truncatable_from is not None and self.next_offset >= truncatable_from

    def _mark_found(self, position: int, end: int, problem: str) -> None:
        """Mark a range recovery found, with the ERROR line every finding gets."""
        self.mark_damaged(position, end, problem)
        log.error(
            "%s: bytes %d-%d are damaged (%s); the offsets they hold answer "
            "KAFKA_STORAGE_ERROR until repaired from a replica (later segments are kept)",
            self.path,
            position,
            end,
            problem,
        )

    def mark_missing(self, next_offset: int, problem: str) -> None:
        """The offsets from the end of this segment's readable batches up to
        ``next_offset`` are missing (a segment file gone, a file cut short): the segment
        answers for them from now on, and reads of them raise CorruptSegmentError instead
        of going on to the next segment. Recorded as a damaged range at the end of the
        file (empty when no damaged bytes are there), which a repair fills by appending."""
        if not any(end >= self.size for _, end, _ in self.damaged):
            self.mark_damaged(self.size, self.size, problem)
        self.next_offset = max(self.next_offset, next_offset)

    def first_invalid_in_tail(self) -> tuple[int, str] | None:
        """Check every batch from the last offset index entry to the end of the file:
        length, magic, CRC-32C and rising offsets. Returns ``(position, problem)`` of the
        first batch that fails, or None when the tail is whole.

        ``load`` trusts the headers it walks there, so a batch cut after an intact header
        (a torn write, a copy cut short) looked whole; appends then went after the torn
        bytes where no reader could reach them (issue 10, item 1). The tail is at most
        ``index.interval.bytes`` plus one batch, so checking it on every start is cheap.
        """
        _, position = self.offset_index.lookup(2**62)
        if position >= self.size:
            return None if position == self.size else (position, "index points past the end")
        start = position
        next_offset = self.base_offset
        with mmap.mmap(self.fd, self.size, prot=mmap.PROT_READ) as view:
            buf = memoryview(view)
            try:
                while position < self.size:
                    try:
                        header = validate_batch(buf, position)
                    except RecordsError as exc:
                        return position, str(exc)
                    if header.base_offset < next_offset:
                        return position, f"offset {header.base_offset} below {next_offset}"
                    next_offset = header.next_offset
                    position += header.size
            finally:
                buf.release()
        self.mark_verified(start, self.size)
        return None

    # -- appending -----------------------------------------------------------------------

    def append(self, buffers: Sequence[bytes | memoryview], batches: Sequence[BatchEntry]) -> None:
        """Write ``buffers`` (whole batches, offsets already assigned) at the end of the file
        and index ``batches``, whose positions are relative to the start of ``buffers``.

        Raises:
            OSError: a write failed, or (ENOSPC) the indexes could not get blocks for the
                entries these batches may add; checked first, so nothing is written then.
        """
        if batches:
            # At most one entry per batch (fewer: one per index interval).
            self.offset_index.reserve(len(batches))
            self.time_index.reserve(len(batches))
        start = self.size
        written = 0
        for i in range(0, len(buffers), _IOV_MAX):
            chunk = buffers[i : i + _IOV_MAX]
            expected = sum(len(b) for b in chunk)
            n = os.pwritev(self.fd, chunk, start + written)
            if n != expected:
                # A short write leaves a torn batch: cut it off so the file stays valid.
                os.ftruncate(self.fd, start)
                raise OSError(f"{self.path}: short write ({n} of {expected} bytes)")
            written += n
        self.size = start + written
        for entry in batches:
            self._index_batch(
                start + entry.position, entry.size, entry.last_offset, entry.max_timestamp
            )
        if batches:
            self.next_offset = batches[-1].last_offset + 1

    def append_batch(
        self,
        prefix: bytes,
        body: memoryview,
        size: int,
        last_offset: int,
        max_timestamp: int,
        verify: Callable[[], None] | None = None,
    ) -> None:
        """Append one batch given as its rewritten 17-byte prefix and the producer's bytes
        after it (the log's fast path: one ``pwritev``, no copy, index bookkeeping inline).

        ``verify`` runs after the bytes are written and before the segment takes them in
        (size, offsets, indexes); if it raises, the bytes are cut off again. Readers never
        look past ``size``, and recovery re-checks CRCs, so nothing unverified is served.

        Raises:
            OSError: the write failed, or (ENOSPC) an index entry is due and its blocks
                could not be reserved; checked before the write, so nothing is written.
        """
        position = self.size
        index_due = self._bytes_since_index_entry > self.index_interval_bytes
        if index_due:
            offsets, times = self.offset_index, self.time_index
            # Both have reserved room (the usual case), or get it now: grown back from a
            # trimmed size, or a new chunk of blocks (may raise ENOSPC, before the write).
            room = offsets._entries < offsets.writable and times._entries < times.writable
            index_due = room or self._indexes_have_room()
        written = os.pwritev(self.fd, (prefix, body), position)
        if written != size:
            os.ftruncate(self.fd, position)  # a torn batch must not stay behind
            raise OSError(f"{self.path}: short write ({written} of {size} bytes)")
        if verify is not None:
            try:
                verify()
            except BaseException:
                os.ftruncate(self.fd, position)
                raise
        self.size = position + size
        self.next_offset = last_offset + 1
        if self.first_batch_timestamp is None:
            self.first_batch_timestamp = max_timestamp
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = last_offset
        if index_due:
            # Offsets only grow here, so the order check of OffsetIndex.append is moot.
            self.offset_index.append_unchecked(last_offset - self.base_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._bytes_since_index_entry = 0
        self._bytes_since_index_entry += size

    def _index_batch(self, position: int, size: int, last_offset: int, max_timestamp: int) -> None:
        if self.first_batch_timestamp is None:
            self.first_batch_timestamp = max_timestamp
        self._note_timestamp(max_timestamp, last_offset)
        # A full index just stops growing: entries are sparse hints. Raising here (possible
        # within one multi-batch append, as the roll check runs once per append) would
        # leave the batches written but next_offset not advanced, so the next append would
        # reuse offsets. Blocks were reserved before the write (append, recover); an
        # ENOSPC here anyway (a bound too low) skips the entry for the same reason.
        if self._bytes_since_index_entry > self.index_interval_bytes and self._indexes_room():
            self.offset_index.append(last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._bytes_since_index_entry = 0
        self._bytes_since_index_entry += size

    def _indexes_have_room(self) -> bool:
        """Whether both indexes take one more entry, reserving its blocks (growing a
        trimmed index first). False when one is at its maximum size.

        Raises:
            OSError: ENOSPC reserving blocks.
        """
        for index in self._indexes:
            index.reserve(1)
            if index.is_full:
                return False
        return True

    def _indexes_room(self) -> bool:
        """``_indexes_have_room`` for paths that must not raise: no room on ENOSPC."""
        try:
            return self._indexes_have_room()
        except OSError as exc:
            log.warning("%s: index entry skipped: %s", self.path, exc)
            return False

    def _note_timestamp(self, max_timestamp: int, last_offset: int) -> None:
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = last_offset

    def should_roll(
        self,
        incoming_bytes: int,
        incoming_max_timestamp: int,
        last_offset: int,
        now_ms: int | Callable[[], int],
        segment_bytes: int,
        segment_ms: int,
    ) -> bool:
        """Kafka's roll rules: full by size, too old, an index full, or an offset that no
        longer fits the indexes' 32-bit relative offsets.

        Age is measured as Kafka's ``timeWaitedForRoll``: the incoming batch's timestamp
        minus the segment's first batch timestamp, or wall-clock age when the segment has
        no timestamps, so replaying old data does not roll on every append. ``now_ms`` may
        be the clock itself: it is read only in that last case (the append fast path).
        """
        # Checked even when empty (as Kafka does): a follower's first batch far past the
        # base offset cannot be indexed here, however small the segment.
        if last_offset - self.base_offset > 2**31 - 1:
            return True
        if self.size == 0:
            return False
        if self.size + incoming_bytes > segment_bytes:
            return True
        first = self.first_batch_timestamp
        if first is not None and first >= 0:
            waited = incoming_max_timestamp - first
        else:
            waited = (now_ms() if callable(now_ms) else now_ms) - self.created_ms
        if waited > segment_ms:
            return True
        # Both indexes, as Kafka: with 12-byte entries the time index fills before the
        # 8-byte offset index, and an append into a full index raises OverflowError.
        offsets, times = self.offset_index, self.time_index
        return (0 < offsets.capacity <= offsets.entries) or (0 < times.capacity <= times.entries)

    # -- reading -------------------------------------------------------------------------

    def _header_at(self, position: int) -> BatchHeader | None:
        data = os.pread(self.fd, HEADER_SIZE, position)
        if len(data) < HEADER_SIZE:
            return None
        return parse_header(data)

    def _scan_headers(
        self, position: int, end: int | None = None
    ) -> Iterator[tuple[int, BatchHeader]]:
        """Walk batch headers from ``position`` (a batch boundary) to ``end``.

        Raises:
            CorruptSegmentError: a header that does not parse, or whose length runs past
                the end of the file. Stopping quietly there (as this walk once did) let a
                read skip to the next segment: a damaged length field made every batch
                after it vanish from fetches without an error (issue 10, item 3).
        """
        size = self.size
        limit = size if end is None else end
        while position < limit:
            try:
                header = self._header_at(position)
            except RecordsError as exc:
                raise self._corrupt(position, str(exc)) from None
            if header is None or position + header.size > size:
                length = "truncated" if header is None else f"of {header.size} bytes"
                raise self._corrupt(
                    position, f"batch {length} runs past the end of the file ({size} bytes)"
                )
            yield position, header
            position += header.size

    def _missing(self, offset: int) -> CorruptSegmentError:
        problem = next((p for start, _, p in self.damaged if start >= self.size), "missing")
        return CorruptSegmentError(
            f"{self.path}: offsets {offset}-{self.next_offset - 1} are missing ({problem})",
            self.path,
            self.size,
        )

    def _corrupt(self, position: int, problem: str) -> CorruptSegmentError:
        return CorruptSegmentError(
            f"{self.path}: unreadable batch at position {position}: {problem}",
            self.path,
            position,
        )

    def find_batch(self, offset: int) -> tuple[int, BatchHeader] | None:
        """``(position, header)`` of the first batch whose last offset is >= ``offset``.

        The offset index says where to start the walk, and is checked before it is
        trusted (issue 20, item 3): an entry names a batch's last offset and start, so the
        batch found where it points must end at that offset. A garbled entry pointing past
        the batch asked for made a consumer at 1601 receive 1700 first, 99 records skipped
        without a word. An entry that fails the check is reported, the walk starts from
        the segment's first batch instead, and both indexes are built again from the
        headers (``rebuild_indexes``). The check reads the header the walk reads first
        anyway: it costs no extra read.
        """
        for attempt in range(2):
            indexed_offset, position = self.offset_index.lookup(offset)
            if not position:
                break
            header = self._indexed_header(indexed_offset, position)
            if header is not None:
                if header.last_offset >= offset:
                    return position, header
                return self._walk(position + header.size, offset)
            if attempt == 0:
                self.rebuild_indexes()
        return self._walk(0, offset)

    def _walk(self, position: int, offset: int) -> tuple[int, BatchHeader] | None:
        for at, header in self._scan_headers(position):
            if header.last_offset >= offset:
                return at, header
        return None

    def _indexed_header(self, indexed_offset: int, position: int) -> BatchHeader | None:
        """The header at an offset-index entry's position when it is the batch the entry
        names; None (with a WARNING) when it is not."""
        try:
            header = self._header_at(position) if position < self.size else None
        except RecordsError:
            header = None
        if (
            header is not None
            and header.last_offset == indexed_offset
            and position + header.size <= self.size
        ):
            return header
        found = "no batch" if header is None else f"a batch ending at {header.last_offset}"
        log.warning(
            "%s: offset index entry (offset %d, byte %d) does not match the log (%s there); "
            "reading from the segment's first batch and rebuilding its indexes",
            self.path,
            indexed_offset,
            position,
            found,
        )
        return None

    def rebuild_indexes(self) -> None:
        """Build the offset and time indexes again from the batch headers, up to the first
        batch that cannot be read (a garbled index found while serving). On an error
        (ENOSPC reserving blocks) the indexes are left empty: lookups then walk from the
        segment's first batch, slower and still right."""
        offsets, times = self.offset_index, self.time_index
        offsets.reset()
        times.reset()
        self._bytes_since_index_entry = 0
        self.max_timestamp, self.offset_of_max_timestamp = NO_TIMESTAMP, self.base_offset
        self.first_batch_timestamp = None
        try:
            most = self.size // max(self.index_interval_bytes + 1, HEADER_SIZE) + 1
            offsets.reserve(most)
            times.reserve(most)
            with contextlib.suppress(CorruptSegmentError):  # damage ends what is indexed
                for at, header in self._scan_headers(0):
                    self._index_batch(at, header.size, header.last_offset, header.max_timestamp)
        except OSError as exc:
            log.warning("%s: indexes not rebuilt (%s); lookups walk from the start", self.path, exc)
            offsets.reset()
            times.reset()
        if self.state is SegmentState.CLOSED:
            offsets.trim_to_valid_size()
            times.trim_to_valid_size()
        # Found again from the walk; the time index may have named a larger one.
        ts, at = times.last_entry
        if ts > self.max_timestamp:
            self.max_timestamp, self.offset_of_max_timestamp = ts, at

    def read(
        self,
        offset: int,
        max_bytes: int,
        max_position: int | None = None,
        min_one_batch: bool = True,
    ) -> FileSlice | None:
        """A slice from the batch holding ``offset``, at most ``max_bytes`` long (or one
        whole batch when ``min_one_batch``) and ending at ``max_position``.

        Like Kafka, the slice may end inside a batch: readers ignore a partial last batch.
        Returns None when no batch at or after ``offset`` lies below ``max_position``.
        """
        limit = self.size if max_position is None else min(max_position, self.size)
        found = self.find_batch(offset)
        if found is None:
            if offset < self.next_offset:
                # The segment answers for offsets it holds no batch of (a file gone or cut
                # short, ``mark_missing``): never go on to the next segment as if the
                # offsets were not there (issue 20, item 2).
                raise self._missing(offset)
            return None
        if found[0] >= limit:
            return None
        position, header = found
        size = min(limit - position, max_bytes)
        if min_one_batch and size < header.size:
            size = min(header.size, limit - position)
        if self.damaged:
            size = self._undamaged(position, size)
        if size <= 0:
            return None
        # Take a lease (the fetch hot path: two attribute updates).
        file = self._current_file()
        file.leases += 1
        end = position + size
        if end > file.leased_end:
            file.leased_end = end
        return FileSlice(file.fd, position, size, file)

    def lease_all(self) -> FileSlice:
        """A leased slice of the whole file as it is, damaged ranges included: for a reader
        that checks every byte with ``pread`` on another thread (the scrubber), so a
        truncation before its release moves the segment to a copy instead of cutting the
        bytes under it. Unlike a fetch's slice it leaves ``leased_end`` alone: nothing
        reads its bytes after the release (no ``sendfile`` queue), so later truncations cut
        in place."""
        file = self._current_file()
        file.leases += 1
        file.readers += 1
        return ReaderSlice(file.fd, 0, self.size, file)

    def take_repaired(self, position: int, end: int) -> None:
        """Bytes ``[position, end)`` were rewritten by a repair from a replica (whole
        batches, checked, ``segment_patch``). When they reach past the end of the file it
        grew: the segment takes the new batches into its size and indexes them. They were
        CRC-checked and read back before: they count as verified."""
        self.mark_verified(position, end)
        if end <= self.size:
            return
        self.size = end
        last_offset, last_position = self.offset_index.lookup(2**62)
        self._bytes_since_index_entry = max(0, position - last_position)
        for at, header in self._scan_headers(position):
            if self.offset_index.entries and header.last_offset <= last_offset:
                continue  # indexed before the file was cut
            self._index_batch(at, header.size, header.last_offset, header.max_timestamp)
        if self.state is SegmentState.CLOSED:
            self.offset_index.trim_to_valid_size()
            self.time_index.trim_to_valid_size()

    def is_verified(self, start: int, end: int) -> bool:
        """Whether bytes ``[start, end)`` lie in one verified range."""
        for first, last in self.verified:
            if first <= start:
                if end <= last:
                    return True
            else:
                break
        return False

    def mark_verified(self, start: int, end: int) -> None:
        """Bytes ``[start, end)`` hold whole batches read back and found whole."""
        if start >= end:
            return
        merged: list[tuple[int, int]] = []
        for first, last in sorted([*self.verified, (start, end)]):
            if merged and first <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], last))
            else:
                merged.append((first, last))
        self.verified = merged

    def verify(self, start: int, end: int) -> list[tuple[int, int, str]]:
        """CRC-check the batches beginning in ``[start, end)`` (``start`` a batch boundary)
        that are not verified yet, reading them back from the file; the ones that pass
        become verified. Returns the damage found (byte ranges and what is wrong), not
        marked yet: ``Log`` marks and reports it."""
        position = start
        for first, last in self.verified:
            if first <= position < last:
                position = last  # verified ranges start and end at batch boundaries
        if position >= end:
            return []
        problems, good = check_batches(self.fd, position, end, self.size)
        for first, last in good:
            self.mark_verified(first, last)
        return problems

    @property
    def missing_offsets(self) -> tuple[int, int] | None:
        """``(first, end)`` of the offsets this segment answers for but its file does not
        hold (``mark_missing``), None when there are none."""
        if not any(start >= self.size for start, _, _ in self.damaged):
            return None
        first = self.base_offset
        for _, header in self._scan_headers(self._last_indexed_position()):
            first = header.next_offset
        return first, self.next_offset

    def _last_indexed_position(self) -> int:
        return self.offset_index.lookup(2**62)[1]

    def is_marked_damaged(self, position: int) -> bool:
        """Whether byte ``position`` lies in a range marked damaged."""
        return any(start <= position < end for start, end, _ in self.damaged)

    def locate_damage(self, position: int, problem: str) -> tuple[int, str]:
        """Where damage a read met at ``position`` really starts, and what it is.

        A file cut shorter than the segment knows (``size``) fails first wherever a walk
        happened to reach past the cut, possibly far after it (an index entry there):
        the damage starts at the batch the cut went through, found by walking headers
        from the last index entry below the cut.
        """
        try:
            actual = os.fstat(self.fd).st_size
        except OSError:
            return position, problem
        if actual >= self.size:
            return position, problem
        start = 0
        for _, entry_position in self.offset_index:
            if entry_position >= actual:
                break
            start = entry_position
        while start < actual:
            header = self._header_at(start) if start + HEADER_SIZE <= actual else None
            if header is None or start + header.size > actual:
                break
            start += header.size
        return min(start, position), f"file cut to {actual} of {self.size} bytes"

    def mark_damaged(self, position: int, end: int, problem: str) -> None:
        """Never hand out bytes ``[position, end)`` again (the scrubber found them failing
        their CRC-32C): reads stop before them, and a read starting in them raises."""
        self.damaged.append((position, end, problem))
        self.damaged.sort()

    def _undamaged(self, position: int, size: int) -> int:
        """``size`` cut so the slice from ``position`` ends before any damaged range.

        Raises:
            CorruptSegmentError: ``position`` itself lies in a damaged range.
        """
        for start, end, problem in self.damaged:
            if start < position + size and end > position:
                if start <= position:
                    raise self._corrupt(start, f"damaged ({problem}), found by the scrubber")
                return start - position
        return size

    @property
    def leases(self) -> int:
        """Leases outstanding on the segment's current file (retired files not counted)."""
        return 0 if self._file is None else self._file.leases

    def position_of(self, offset: int) -> int:
        """Byte position where the batch starting at or containing ``offset`` begins, or the
        segment size when ``offset`` is at or past its end."""
        if offset >= self.next_offset:
            return self.size
        found = self.find_batch(offset)
        return self.size if found is None else found[0]

    def batches(self, start_position: int = 0) -> Iterator[tuple[int, BatchHeader]]:
        """All batch headers from ``start_position`` (tools, retention, compaction)."""
        return self._scan_headers(start_position)

    # -- changing ------------------------------------------------------------------------

    def truncate_to(self, offset: int) -> int:
        """Drop every batch whose last offset is >= ``offset``; returns bytes removed.

        When a fetch's lease ever named bytes at or past the cut, or a reader holds a
        whole-file lease, the file is not cut in place: the kept prefix moves to a new file
        (see the module docstring, copy-on-write).
        """
        # Where to cut, and the first offset cut: the batch holding ``offset``; or the
        # start of damage marked up to the end of the file (appends must not go after
        # bytes that cannot be read); or, inside the missing offsets at the end
        # (``mark_missing``), the end of the readable batches, the log end going with it.
        try:
            found = self.find_batch(offset)
        except CorruptSegmentError as exc:
            if not self.is_marked_damaged(exc.position):
                raise
            position, first_cut = exc.position, offset
        else:
            if found is not None:
                position, first_cut = found[0], found[1].base_offset
            elif offset < self.next_offset and self.damaged:
                position, first_cut = self.size, offset
            else:
                return 0
        removed = self.size - position
        # Damage before the cut is copied along with the prefix: it stays marked.
        kept_damage = [d for d in self.damaged if d[0] < position]
        file = self._current_file()
        if position < file.leased_end or file.readers > 0:
            self._replace_with_prefix(position)
        self.damaged = kept_damage
        self.verified = [(a, min(b, position)) for a, b in self.verified if a < position]
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(first_cut)
        os.ftruncate(self.fd, position)  # a no-op after a copy
        self.size = position
        # Re-derive running state from what is left.
        self.next_offset = self.base_offset
        self.max_timestamp, self.offset_of_max_timestamp = NO_TIMESTAMP, self.base_offset
        self.first_batch_timestamp = None
        for _, header in self._scan_headers(0):
            self.next_offset = header.next_offset
            self._note_timestamp(header.max_timestamp, header.last_offset)
            if self.first_batch_timestamp is None:
                self.first_batch_timestamp = header.max_timestamp
        # A cut at damage or missing offsets may end below ``offset``: no entry may name
        # an offset (or a byte) past what is left.
        self.offset_index.truncate_to(self.next_offset)
        self.time_index.truncate_to(self.next_offset)
        _, last_indexed_position = self.offset_index.lookup(2**62)
        self._bytes_since_index_entry = self.size - last_indexed_position
        return removed

    def _replace_with_prefix(self, position: int) -> None:
        """Copy the first ``position`` bytes to a new file, rename it over ``path`` and
        append to it from now on; the old inode stays with its leases, unchanged.

        The copy is fsynced before the rename: the recovery point may lie inside the
        prefix, and recovery trusts what is below it. A crash before the rename leaves a
        ``*.tmp`` file, which loading deletes.
        """
        tmp = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            _copy_prefix(self.fd, fd, position, self.path)
            os.fsync(fd)
            os.rename(tmp, self.path)
        except BaseException:
            os.close(fd)
            tmp.unlink(missing_ok=True)
            raise
        self._switch_file(fd)

    def _switch_file(self, fd: int) -> None:
        """Make ``fd`` the segment's file, retiring the old one (truncation now; the
        compaction swap, which renames cleaned files over live ones, uses it too)."""
        old = self._file
        self._file = SegmentFile(fd)
        self._leased_end = 0  # a new inode: no lease ever named its bytes
        self.damaged = []  # marks were about the old file's bytes
        if old is not None:
            old.retire()

    def file_paths(self) -> list[Path]:
        """The segment's files by name (``.log`` and its three indexes), for a flush that
        runs off the log's thread (``Log._flush_rolled``)."""
        return [self.path, self.offset_index.path, self.time_index.path, self.txn_index.path]

    def flush(self) -> None:
        os.fsync(self.fd)
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def close_for_append(self) -> None:
        """Become CLOSED at roll: record the final max timestamp and trim the indexes."""
        # Optional (load rescans the tail for the max timestamp): skipped when the index is
        # full, or its blocks cannot be had on a full disk, rather than fail the roll.
        if self.max_timestamp != NO_TIMESTAMP and self.time_index.can_append():
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        # No more aborts land here: make the entries durable now and give the fd back
        # (entries stay in memory; a later truncation reopens the file).
        self.txn_index.flush()
        self.txn_index.close()
        self.state = SegmentState.CLOSED

    def make_active(self) -> None:
        self.offset_index.make_appendable()
        self.time_index.make_appendable()
        self.state = SegmentState.ACTIVE

    def close(self) -> None:
        """Release the files (clean shutdown): trims the indexes to their entries. The
        ``.log`` fd stays open until the last lease on it is released."""
        if self._closed:
            return
        if (
            self.state is SegmentState.ACTIVE
            and self.max_timestamp != NO_TIMESTAMP
            and self.time_index.can_append()  # as in close_for_append: never raise here
        ):
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.close()
        self._let_go()

    def rename_for_delete(self) -> None:
        """First step of an asynchronous delete: readers holding the fd still work."""
        self.state = SegmentState.DELETED
        new_log = self.path.with_name(self.path.name + DELETED_SUFFIX)
        os.rename(self.path, new_log)
        self.path = new_log
        for index in (self.offset_index, self.time_index, self.txn_index):
            index.rename(index.path.with_name(index.path.name + DELETED_SUFFIX))

    def delete(self) -> None:
        """Close and unlink all its files. Leased bytes stay readable: the ``.log`` fd
        (and with it the unlinked inode) is closed when the last lease is released."""
        self.state = SegmentState.DELETED
        self.offset_index.delete()
        self.time_index.delete()
        self.txn_index.delete()
        size = self.size
        self._let_go()
        if self.path.name.endswith(DELETED_SUFFIX) and size >= _BACKGROUND_UNLINK_BYTES:
            # Freeing a large file's blocks takes the filesystem ~0.1-1 s, and this runs on
            # the event loop (retention, a compaction swap's delayed delete): produce
            # latency spiked by that much. Nothing else uses a *.deleted path, and a crash
            # before it goes leaves a file the next start removes.
            _unlinker().submit(self.path.unlink, missing_ok=True)
        else:
            self.path.unlink(missing_ok=True)

    @property
    def _indexes(self) -> tuple[OffsetIndex, TimeIndex]:
        return self.offset_index, self.time_index

    @property
    def largest_timestamp(self) -> int:
        """Max timestamp in the segment, or its file mtime when it has none (Kafka's rule
        for retention.ms)."""
        if self.max_timestamp >= 0:  # 0 is a timestamp; only -1 means none
            return self.max_timestamp
        return int(os.stat(self.path).st_mtime * 1000)

    def __repr__(self) -> str:
        return (
            f"LogSegment({self.path.name}, next_offset={self.next_offset}, size={self.size}, "
            f"{self.state.value})"
        )
