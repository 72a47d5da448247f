"""Idempotent and transactional producer state of one partition and its ``.snapshot`` files.

Kafka's ``ProducerStateManager``/``ProducerAppendInfo`` (KIP-98, KIP-360, KIP-890 part 1).
This module owns:

* the in-memory map producer id -> ``ProducerStateEntry``: the producer's epoch, the
  sequence and offset ranges of its last ``max_batches_per_producer`` batches (5, the most
  a client keeps in flight with ``enable.idempotence``), its last batch timestamp, the
  epoch of the transaction coordinator that last wrote a marker for it and the first
  offset of its open transaction;
* the partition's ongoing transactions, ordered by first offset; the first of them is the
  first unstable offset, below which everything is decided (committed or aborted);
* the rules that accept, deduplicate or reject a client batch (``check``) and a
  transaction marker (``check_marker``);
* the partition directory's ``<20-digit offset>.snapshot`` files (Kafka's names), each
  holding the state built from every batch below that offset.

Transaction rules (Kafka's ``ProducerAppendInfo``): a transactional data batch from a
producer with no open transaction opens one at its first offset; a non-transactional data
batch from a producer with one open is INVALID_TXN_STATE (48); a marker (COMMIT or ABORT
control batch) with an epoch below the producer's is INVALID_PRODUCER_EPOCH (47) and one
from a coordinator epoch below the last one seen is TRANSACTION_COORDINATOR_FENCED (52);
a marker closes the open transaction and ``update`` returns it as a ``CompletedTxn``
(nothing for a marker of an empty transaction). Replicated and replayed batches are not
checked (the leader did).

It reads batch headers (and the marker's control record, which the caller decodes with
``end_txn_marker``) and never the log itself: the owning ``Log`` calls ``check`` before an
append, ``update`` after it, ``take_snapshot`` when it rolls or closes, and
``load``/``truncate_and_reload`` + ``rebuild_from`` to rebuild state from the log.

The snapshot files' bytes are Kafka's ``ProducerSnapshot`` (version 1), encoded and decoded
by ``tierlog.records.producer_snapshot`` (sans-I/O, so every tier's readers share it).

Loading a snapshot restores the ongoing transactions from ``current_txn_first_offset``.

Only the last batch of each producer is stored (as in Kafka): after a restart the last
batch is deduplicable from the snapshot, plus every batch replayed from the log above it.
A snapshot whose version, length or CRC is wrong is deleted and an older one is used.

Divergence from Kafka >= 2.5, kept on purpose until reviewed: an unknown producer id
whose batch does not start at sequence 0 is rejected with UNKNOWN_PRODUCER_ID (59), the
pre-KIP-360 broker rule. Kafka's ``ProducerAppendInfo.checkSequence`` now accepts any
sequence from a producer it has no state for ("possibly because all producer records have
been deleted due to retention"). A producer that answers 59 with an epoch bump restarts
at sequence 0, which is accepted here.

Size: ~750 lines, past the ~600 guideline, as the validation rules, the transaction
tracking and the snapshots all read and write the same entries (the snapshot codec moved
out to ``tierlog.records.producer_snapshot``).

Not thread-safe: single-threaded by contract and owned by one ``Log``, which calls it from
the broker's event loop (see ``tierlog.local.log``).
"""

from __future__ import annotations

import logging
import os
import struct
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, NamedTuple

from tierlog.local.errors import LogError
from tierlog.records.builder import ControlType
from tierlog.records.errors import InvalidRecordError, RecordsError
from tierlog.records.header import HEADER_SIZE, NO_TIMESTAMP, BatchHeader
from tierlog.records.producer_snapshot import (
    CorruptSnapshotError,
    SnapshotEntry,
    decode_snapshot,
    encode_snapshot,
)
from tierlog.records.varint import decode_varint, decode_varlong
from tierlog.util.atomic_files import atomic_write, replace_unsynced
from tierlog.util.clock import Clock

log = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = ".snapshot"
# Kafka's ProducerStateEntry.NumBatchesToRetain; clients keep at most 5 requests in flight
# per connection when idempotence is on, so 5 cached batches cover every possible retry.
DEFAULT_MAX_BATCHES = 5
# Kafka's producer.id.expiration.ms default (one day, KIP-854).
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000
INT32_MAX = 0x7FFFFFFF
NO_SEQUENCE = -1
NO_OFFSET = -1


# -- errors ------------------------------------------------------------------------------


class ProducerStateError(LogError):
    """A client batch broke an idempotence rule; ``code`` is the Kafka error code."""

    code: ClassVar[int]

    def __init__(self, message: str, producer_id: int) -> None:
        super().__init__(message)
        self.producer_id = producer_id


class OutOfOrderSequenceError(ProducerStateError):
    """Sequence gap, a retry older than the cached batches, or a bumped epoch not at 0."""

    code = 45  # OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidProducerEpochError(ProducerStateError):
    """The batch's epoch is older than the producer's (fenced since Kafka 2.7, KIP-588)."""

    code = 47  # INVALID_PRODUCER_EPOCH


class UnknownProducerIdError(ProducerStateError):
    """No state for the producer (expired or lost) and its batch does not start at 0."""

    code = 59  # UNKNOWN_PRODUCER_ID


class InvalidTxnStateError(ProducerStateError):
    """A non-transactional batch from a producer with a transaction open."""

    code = 48  # INVALID_TXN_STATE


class TransactionCoordinatorFencedError(ProducerStateError):
    """A marker from a coordinator epoch older than the last one seen for the producer."""

    code = 52  # TRANSACTION_COORDINATOR_FENCED


# -- state -------------------------------------------------------------------------------


class DuplicateBatch(NamedTuple):
    """The original append of a retried batch: answer the producer with these, write nothing."""

    first_offset: int
    last_offset: int
    timestamp: int


class EndTxnMarker(NamedTuple):
    """What a transaction marker's control record says (Kafka's ``EndTransactionMarker``)."""

    commit: bool
    coordinator_epoch: int


class CompletedTxn(NamedTuple):
    """A transaction a marker ended (Kafka's ``CompletedTxn``): its first offset in the
    partition and the offset of the marker."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """Sequence and offset range of one appended batch (Kafka's ``BatchMetadata``)."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int

    @property
    def offset_delta(self) -> int:
        return self.last_offset - self.first_offset


@dataclass(slots=True)
class ProducerStateEntry:
    """What the partition knows about one producer; ``batches`` is oldest first."""

    producer_id: int
    producer_epoch: int
    batches: deque[BatchMetadata]
    last_timestamp: int = NO_TIMESTAMP
    # The coordinator epoch of the last marker written for this producer: an older
    # coordinator's marker is fenced.
    coordinator_epoch: int = -1
    current_txn_first_offset: int = NO_OFFSET

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else NO_OFFSET

    def find_duplicate(self, first_seq: int, last_seq: int) -> BatchMetadata | None:
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None


def in_sequence(last_seq: int, next_seq: int) -> bool:
    """True if ``next_seq`` follows ``last_seq``; sequences wrap from 2**31 - 1 to 0."""
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


def decrement_sequence(sequence: int, decrement: int) -> int:
    """``sequence - decrement`` modulo 2**31 (Kafka's ``DefaultRecordBatch.decrementSequence``)."""
    return (sequence - decrement) & INT32_MAX


def end_txn_marker(batch: bytes | bytearray | memoryview) -> EndTxnMarker | None:
    """The marker a control batch holds: its first record's key (version int16, type int16)
    and value (version int16, coordinator epoch int32). None when it is not a COMMIT or
    ABORT marker (another control type, or records this does not understand).

    Control batches are never compressed (Kafka writes them uncompressed), so the record
    is read in place: length, attributes, timestamp and offset deltas, then the key.
    """
    view = memoryview(batch)
    try:
        _, pos = decode_varint(view, HEADER_SIZE)  # record length
        pos += 1  # attributes
        _, pos = decode_varlong(view, pos)  # timestamp delta
        _, pos = decode_varint(view, pos)  # offset delta
        key_len, pos = decode_varint(view, pos)
        if key_len < 4:
            return None
        _, kind = struct.unpack_from(">hh", view, pos)
        pos += key_len
        value_len, pos = decode_varint(view, pos)
        coordinator_epoch = struct.unpack_from(">i", view, pos + 2)[0] if value_len >= 6 else -1
    except (RecordsError, IndexError, struct.error):
        return None
    if kind not in (ControlType.ABORT, ControlType.COMMIT):
        return None
    return EndTxnMarker(kind == ControlType.COMMIT, coordinator_epoch)


# -- snapshot files ----------------------------------------------------------------------


def snapshot_path(directory: Path, offset: int) -> Path:
    return Path(directory) / f"{offset:020d}{SNAPSHOT_SUFFIX}"


# -- the manager -------------------------------------------------------------------------


class ProducerStateManager:
    """Idempotent-producer state of one partition (Kafka's ``ProducerStateManager``).

    Args:
        directory: the partition directory, where ``.snapshot`` files live.
        clock: wall time, used to drop expired producers when a snapshot is loaded.
        max_batches_per_producer: batches kept per producer for duplicate detection.
        producer_id_expiration_ms: Kafka's ``producer.id.expiration.ms``; a producer whose
            last batch timestamp is this old is forgotten by ``remove_expired_producers``.

    ``map_end_offset`` is the offset below which every batch has been applied.
    """

    def __init__(
        self,
        directory: Path,
        *,
        clock: Clock,
        max_batches_per_producer: int = DEFAULT_MAX_BATCHES,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ) -> None:
        if max_batches_per_producer < 1:
            raise ValueError("max_batches_per_producer must be at least 1")
        self.directory = Path(directory)
        self.clock = clock
        self.max_batches_per_producer = max_batches_per_producer
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.map_end_offset = 0
        self._producers: dict[int, ProducerStateEntry] = {}
        # Producer id -> first offset of its open transaction, in first-offset order
        # (transactions open in offset order, so insertion order is that order).
        self._ongoing: dict[int, int] = {}

    # -- queries ---------------------------------------------------------------------

    @property
    def producers(self) -> Mapping[int, ProducerStateEntry]:
        """The live entries by producer id (read-only view; do not mutate the entries)."""
        return self._producers

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    def is_empty(self) -> bool:
        return not self._producers

    @property
    def ongoing_transactions(self) -> Mapping[int, int]:
        """Producer id -> first offset of each open transaction, earliest first."""
        return self._ongoing

    @property
    def first_unstable_offset(self) -> int | None:
        """First offset of the earliest open transaction; None when none is open.
        Everything below it is decided (Kafka's ``firstUnstableOffset``)."""
        return next(iter(self._ongoing.values()), None)

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """The LSO once ``completed`` has ended: the first offset of the earliest other
        open transaction, or the offset after its marker (Kafka's
        ``ProducerStateManager.lastStableOffset(completedTxn)``). It is stored with an
        aborted transaction in the ``.txnindex``: a fetch reaching it needs no later entry.
        """
        for pid, first_offset in self._ongoing.items():
            if pid != completed.producer_id:
                return first_offset
        return completed.last_offset + 1

    # -- validation and updates ------------------------------------------------------

    def check(self, header: BatchHeader, *, coordinator: bool = False) -> DuplicateBatch | None:
        """Validate a client's data batch before it is appended.

        ``coordinator``: the batch comes from this broker's group coordinator (Kafka's
        ``AppendOrigin.COORDINATOR``: transactional offset commits, written with base
        sequence -1), so sequences are neither checked nor deduplicated; epochs and
        transaction state are.

        Returns:
            None when the batch may be appended (or has no producer id); the original
            append's offsets when it is a retry of one of the producer's cached batches.

        Raises:
            InvalidRecordError: producer id set but base sequence negative (code 87).
            InvalidProducerEpochError: epoch older than the producer's (47).
            OutOfOrderSequenceError: not the next sequence, or a new epoch not at 0 (45).
            InvalidTxnStateError: not transactional while the producer's transaction is
                open (48).
        """
        pid = header.producer_id
        if pid < 0:
            return None
        first_seq = header.base_sequence
        if first_seq < 0 and not coordinator:
            raise InvalidRecordError(
                f"invalid sequence number {first_seq} in batch of producer {pid}"
            )
        epoch = header.producer_epoch
        entry = self._producers.get(pid)
        if entry is None:
            # KIP-360 (Kafka >= 2.5): a producer the log has no state for (new, expired, or
            # removed with its segments by retention) is accepted at any sequence, so a
            # long-lived idempotent producer is not failed by retention.
            return None
        if coordinator:
            self._check_epoch(pid, epoch, entry)
            self._check_txn_state(header, entry)
            return None
        if epoch == entry.producer_epoch:
            # Duplicates first, as Kafka's UnifiedLog.analyzeAndValidateProducerState does:
            # a retry of a cached batch is answered, not rejected as out of order.
            duplicate = entry.find_duplicate(first_seq, header.last_sequence)
            if duplicate is not None:
                return DuplicateBatch(
                    duplicate.first_offset, duplicate.last_offset, duplicate.timestamp
                )
        self._check_epoch(pid, epoch, entry)
        if epoch > entry.producer_epoch:
            if first_seq != 0:
                raise OutOfOrderSequenceError(
                    f"producer {pid} bumped its epoch {entry.producer_epoch} -> {epoch} but "
                    f"starts at sequence {first_seq}, not 0",
                    pid,
                )
        # Same epoch. With no data batch cached (epoch set by a marker) the next is 0.
        elif not in_sequence(entry.last_seq, first_seq):
            raise OutOfOrderSequenceError(
                f"producer {pid} epoch {epoch}: sequence {first_seq} does not follow "
                f"{entry.last_seq}",
                pid,
            )
        self._check_txn_state(header, entry)
        return None

    @staticmethod
    def _check_epoch(pid: int, epoch: int, entry: ProducerStateEntry) -> None:
        if epoch < entry.producer_epoch:
            raise InvalidProducerEpochError(
                f"producer {pid} epoch {epoch} is older than the current epoch "
                f"{entry.producer_epoch}",
                pid,
            )

    @staticmethod
    def _check_txn_state(header: BatchHeader, entry: ProducerStateEntry) -> None:
        # Kafka's ProducerAppendInfo.appendDataBatch: once a transaction is open, every
        # data batch of the producer belongs to it until its marker.
        if entry.current_txn_first_offset >= 0 and not header.is_transactional:
            raise InvalidTxnStateError(
                f"producer {entry.producer_id} has a transaction open at "
                f"{entry.current_txn_first_offset}: a non-transactional batch is not allowed",
                entry.producer_id,
            )

    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> None:
        """Validate a transaction marker the coordinator asks this leader to write
        (WriteTxnMarkers; Kafka's ``ProducerAppendInfo.appendEndTxnMarker``).

        Raises:
            InvalidProducerEpochError: ``producer_epoch`` below the producer's (47);
                markers may carry the current epoch or a newer one.
            TransactionCoordinatorFencedError: ``coordinator_epoch`` below the one of the
                last marker written for the producer (52).
        """
        entry = self._producers.get(producer_id)
        if entry is None:
            return
        self._check_epoch(producer_id, producer_epoch, entry)
        if coordinator_epoch < entry.coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"marker for producer {producer_id} from coordinator epoch "
                f"{coordinator_epoch}, older than {entry.coordinator_epoch}",
                producer_id,
            )

    def update(
        self,
        header: BatchHeader,
        first_offset: int,
        last_offset: int,
        timestamp_ms: int,
        marker: EndTxnMarker | None = None,
    ) -> CompletedTxn | None:
        """Record an appended batch with producer id >= 0, without validating it.

        Used after a successful client append (with the offsets the log assigned) and when
        rebuilding from the log or replicating (``first_offset = header.base_offset``).
        ``timestamp_ms`` is the batch's max timestamp (the append time for LogAppendTime
        topics), as in Kafka; it drives expiration and is returned for duplicates.
        ``marker`` is what a control batch's record says (``end_txn_marker``); a control
        batch without it is taken as a COMMIT whose coordinator epoch is unknown.

        Returns:
            For a marker ending an open transaction, that transaction (already removed
            from the ongoing ones, so ``last_stable_offset(completed)`` is its LSO); None
            otherwise.
        """
        pid = header.producer_id
        if pid < 0:
            raise ValueError(f"update needs a producer id, got {pid}")
        entry = self._producers.get(pid)
        if entry is None:
            entry = ProducerStateEntry(
                pid, header.producer_epoch, deque(maxlen=self.max_batches_per_producer)
            )
            self._producers[pid] = entry
        if header.producer_epoch != entry.producer_epoch:
            # A new epoch restarts sequences at 0: older batches can no longer be retried.
            entry.batches.clear()
            entry.producer_epoch = header.producer_epoch
        completed = None
        if header.is_control:
            # A transaction marker ends any transaction; it carries no data sequence. A
            # marker of an empty transaction completes nothing (Kafka emits no CompletedTxn).
            if entry.current_txn_first_offset >= 0:
                aborted = marker is not None and not marker.commit
                completed = CompletedTxn(pid, entry.current_txn_first_offset, first_offset, aborted)
                self._ongoing.pop(pid, None)
            entry.current_txn_first_offset = NO_OFFSET
            if marker is not None:
                entry.coordinator_epoch = marker.coordinator_epoch
        else:
            entry.batches.append(
                BatchMetadata(
                    header.base_sequence,
                    header.last_sequence,
                    first_offset,
                    last_offset,
                    timestamp_ms,
                )
            )
            if header.is_transactional and entry.current_txn_first_offset < 0:
                entry.current_txn_first_offset = first_offset
                self._ongoing[pid] = first_offset
        entry.last_timestamp = timestamp_ms
        self.map_end_offset = max(self.map_end_offset, last_offset + 1)
        return completed

    def update_map_end_offset(self, offset: int) -> None:
        """Note that every batch below ``offset`` has been applied (Kafka calls this for
        every append, with or without a producer id)."""
        self.map_end_offset = max(self.map_end_offset, offset)

    def rebuild_from(
        self,
        headers: Iterable[BatchHeader],
        marker_of: Callable[[BatchHeader], EndTxnMarker | None] | None = None,
    ) -> int:
        """Replay batch headers read from the log (any kind; real offsets in
        ``base_offset``), skipping batches wholly below ``map_end_offset``. ``marker_of``
        reads a control batch's marker (without it markers count as COMMITs); a caller
        that needs the completed transactions calls ``replay`` for each batch instead.

        Returns the number of producer batches applied.
        """
        applied = 0
        for header in headers:
            if header.last_offset < self.map_end_offset:
                continue
            marker = None
            if header.is_control and header.producer_id >= 0 and marker_of is not None:
                marker = marker_of(header)
            self.replay(header, marker)
            applied += header.producer_id >= 0
        return applied

    def replay(
        self, header: BatchHeader, marker: EndTxnMarker | None = None
    ) -> CompletedTxn | None:
        """Apply one batch read from the log or replicated (offsets in the header), as
        ``rebuild_from`` does; a batch wholly below ``map_end_offset`` is skipped.

        Returns what ``update`` returns (the transaction a marker completed, if any).
        """
        if header.last_offset < self.map_end_offset:
            return None
        completed = None
        if header.producer_id >= 0:
            completed = self.update(
                header, header.base_offset, header.last_offset, header.max_timestamp, marker
            )
        self.update_map_end_offset(header.next_offset)
        return completed

    def remove_expired_producers(self, now_ms: int | None = None) -> int:
        """Forget producers idle for ``producer_id_expiration_ms`` (measured from their
        last batch timestamp) and not in a transaction. Returns how many were removed."""
        now = self.clock.milliseconds() if now_ms is None else now_ms
        expired = [pid for pid, entry in self._producers.items() if self._expired(entry, now)]
        for pid in expired:
            del self._producers[pid]
        return len(expired)

    def _expired(self, entry: ProducerStateEntry, now_ms: int) -> bool:
        return (
            entry.current_txn_first_offset < 0
            and now_ms - entry.last_timestamp >= self.producer_id_expiration_ms
        )

    # -- snapshots -------------------------------------------------------------------

    def snapshot_offsets(self) -> list[int]:
        """Offsets of the snapshot files on disk, ascending (the directory is the truth;
        it is listed on each call, which happens on roll, retention and load only)."""
        found = []
        with os.scandir(self.directory) as entries:
            for entry in entries:
                stem = entry.name[: -len(SNAPSHOT_SUFFIX)]
                if entry.name.endswith(SNAPSHOT_SUFFIX) and stem.isdigit():
                    found.append(int(stem))
        return sorted(found)

    def oldest_snapshot_offset(self) -> int | None:
        offsets = self.snapshot_offsets()
        return offsets[0] if offsets else None

    def latest_snapshot_offset(self) -> int | None:
        offsets = self.snapshot_offsets()
        return offsets[-1] if offsets else None

    def _delete_snapshot(self, offset: int, why: str) -> None:
        path = snapshot_path(self.directory, offset)
        # Routine (a snapshot outside the log after truncation, retention or recovery):
        # debug, so a restart of a log with many segments does not print one line each;
        # a corrupt one is reported as a warning where it is found.
        log.debug("%s: deleting producer snapshot (%s)", path, why)
        path.unlink(missing_ok=True)

    def take_snapshot(self, offset: int, *, durable: bool = True) -> Path:
        """Write the state as ``<offset>.snapshot`` (temp file, fsync, rename).

        The caller promises that every batch with a producer id below ``offset`` has been
        applied; ``map_end_offset`` moves up to ``offset``. Returns the file's path.

        Args:
            durable: False writes without fsync (Kafka's async snapshot flush at a roll):
                the caller fsyncs the returned path and its directory later, off the event
                loop. A crash before that may leave the file torn, and loading deletes a
                corrupt snapshot and falls back to an older one or to the log.

        Raises:
            ValueError: ``offset`` is below ``map_end_offset`` (batches at or above it are
                already in the state, so the snapshot would claim too much).
        """
        if offset < self.map_end_offset:
            raise ValueError(
                f"snapshot offset {offset} is below the applied end {self.map_end_offset}"
            )
        self.map_end_offset = offset
        path = snapshot_path(self.directory, offset)
        data = encode_snapshot(self._snapshot_entries())
        if durable:
            atomic_write(path, data)
        else:
            replace_unsynced(path, data)
        log.debug("%s: wrote %d producers", path, len(self._producers))
        return path

    def _snapshot_entries(self) -> Iterable[SnapshotEntry]:
        for pid in sorted(self._producers):
            entry = self._producers[pid]
            last = entry.batches[-1] if entry.batches else None
            yield SnapshotEntry(
                pid,
                entry.producer_epoch,
                last.last_seq if last else NO_SEQUENCE,
                last.last_offset if last else NO_OFFSET,
                last.offset_delta if last else 0,
                entry.last_timestamp,
                entry.coordinator_epoch,
                entry.current_txn_first_offset,
            )

    def _load_entry(self, row: SnapshotEntry) -> ProducerStateEntry:
        batches: deque[BatchMetadata] = deque(maxlen=self.max_batches_per_producer)
        if row.last_offset >= 0:
            batches.append(
                BatchMetadata(
                    decrement_sequence(row.last_sequence, row.offset_delta),
                    row.last_sequence,
                    row.last_offset - row.offset_delta,
                    row.last_offset,
                    row.timestamp,
                )
            )
        return ProducerStateEntry(
            row.producer_id,
            row.epoch,
            batches,
            row.timestamp,
            row.coordinator_epoch,
            row.current_txn_first_offset,
        )

    def load(self, log_start_offset: int, log_end_offset: int) -> int:
        """Reset the state to the latest valid snapshot in [log start, log end].

        Deletes snapshots above the log end (the log was truncated below them), below the
        log start (the batches between them and the log start are gone, so they would give
        a stale last sequence) and unreadable ones (logged). Expired producers are skipped.

        Returns:
            The offset to replay from: the snapshot's offset, or the log start when there
            is none. The caller passes every batch header from there to the log end to
            ``rebuild_from`` (or ``update`` for each batch with a producer id).
        """
        self._producers.clear()
        self._ongoing.clear()
        now = self.clock.milliseconds()
        for offset in reversed(self._drop_out_of_range(log_start_offset, log_end_offset)):
            path = snapshot_path(self.directory, offset)
            try:
                rows = decode_snapshot(path.read_bytes(), str(path))
            except CorruptSnapshotError as exc:
                log.warning("%s: corrupt producer snapshot: %s", path, exc)
                self._delete_snapshot(offset, "corrupt")
                continue
            except OSError as exc:
                # Not proven corrupt (permissions, I/O): keep it, fall back to an older one.
                log.warning("%s: cannot read producer snapshot: %s", path, exc)
                continue
            for row in rows:
                entry = self._load_entry(row)
                if not self._expired(entry, now):
                    self._producers[entry.producer_id] = entry
            self._ongoing = dict(
                sorted(
                    (
                        (e.producer_id, e.current_txn_first_offset)
                        for e in self._producers.values()
                        if e.current_txn_first_offset >= 0
                    ),
                    key=lambda item: item[1],
                )
            )
            self.map_end_offset = offset
            return offset
        self.map_end_offset = log_start_offset
        return log_start_offset

    def _drop_out_of_range(self, log_start_offset: int, log_end_offset: int) -> list[int]:
        """Delete snapshots outside [log start, log end]; return the others, ascending."""
        kept = []
        for offset in self.snapshot_offsets():
            if offset > log_end_offset:
                self._delete_snapshot(offset, f"above the log end {log_end_offset}")
            elif offset < log_start_offset:
                self._delete_snapshot(offset, f"below the log start {log_start_offset}")
            else:
                kept.append(offset)
        return kept

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int) -> int:
        """After the log was truncated to ``log_end_offset``: delete snapshots outside the
        log, reset the state and reload it like ``load``. Returns the offset to replay
        from; that is the log end itself, with the state kept, when nothing at or above it
        had been applied."""
        if log_end_offset == self.map_end_offset:
            self._drop_out_of_range(log_start_offset, log_end_offset)
            return log_end_offset
        return self.load(log_start_offset, log_end_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """The log was emptied and restarts at ``offset``: forget everything."""
        self._producers.clear()
        self._ongoing.clear()
        for snap in self.snapshot_offsets():
            self._delete_snapshot(snap, f"log restarted at {offset}")
        self.map_end_offset = offset

    def restore_snapshot(self, offset: int, data: bytes) -> None:
        """Start from a snapshot taken elsewhere (KIP-405: the one uploaded beside the
        remote segment that ends just below ``offset``, for a replica restarting empty at
        its leader's local log start): check it, store it as ``<offset>.snapshot`` and load
        it. Only call on an empty state at ``offset`` (``truncate_fully_and_start_at``).

        Raises:
            CorruptSnapshotError: ``data`` is not a valid snapshot (nothing is written).
        """
        decode_snapshot(data, f"remote snapshot at {offset}")
        atomic_write(snapshot_path(self.directory, offset), data)
        self.load(offset, offset)

    def delete_snapshots_below(self, offset: int) -> int:
        """The log start moved to ``offset``: delete snapshots below it (the state in
        memory is kept). Returns how many were deleted."""
        doomed = [snap for snap in self.snapshot_offsets() if snap < offset]
        for snap in doomed:
            self._delete_snapshot(snap, f"below the log start {offset}")
        return len(doomed)

    def __repr__(self) -> str:
        return (
            f"ProducerStateManager({self.directory.name}, producers={len(self._producers)}, "
            f"map_end={self.map_end_offset})"
        )
