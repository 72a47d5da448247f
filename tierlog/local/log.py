"""The local log of one partition: an ordered list of segments with one active at the end.

Owns the partition directory's files (segments, indexes, ``leader-epoch-checkpoint``) and the
rules that span segments: offset assignment, rolling, the flush policy, retention, truncation
and recovery after an unclean stop. Appends read batch headers and write the producer's bytes
with baseOffset/partitionLeaderEpoch rewritten; records are decoded only when the validator
says so (a compacted topic's keys, a possible decompression bomb, a batch to re-encode in
the topic's ``compression.type``), and the broker has that done off its event loop before
it calls ``append`` (``records.validate``).

The segment list is a ``LogSegments`` (``log_segments.py``), which the loader builds
(``log_loader.load`` returns it with the offsets it settled, and the log is built from
that), the compaction swap changes through ``replace_segments``, and the log changes as it
rolls, retains and truncates.

Size: ~1,010 lines, past the ~600 guideline, because append (with its single-batch fast
path), read (with the check before serving and the damage it finds), retention,
truncation and the transaction markers all work on the same segment list and offsets;
loading lives in ``log_loader.py``, the producer replay in ``producer_replay.py``, the
index file in ``txn_index.py``, and every check of an appended batch in
``tierlog.records.validate`` (one validator for the client, coordinator and follower paths
alike; issue 21, item 5).

Transactions (KIP-98): the producer state tracks open transactions, whose first offset
bounds the last stable offset (``first_unstable_offset``); ``append_marker`` writes a
COMMIT or ABORT marker as leader, and every transaction an ABORT ends gets an entry in the
``.txnindex`` of the segment holding its marker, whoever writes it (leader, follower,
recovery), from the same sequential replay, so replicas' index files are identical.
``collect_aborted_transactions`` answers read_committed fetches from those files.

Single-threaded by contract, like Kafka's ``LocalLog``: the broker calls it from its event
loop and the ``LogManager``'s scheduled tasks run on that same loop. Whoever adds threads
takes a lock around the whole ``Log``.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tierlog.local import damage_marks
from tierlog.local.config import LogConfig
from tierlog.local.crc_worker import CRC_WORKER, OVERLAP_MIN_BYTES
from tierlog.local.errors import (
    CorruptSegmentError,
    LogClosedError,
    OffsetOutOfRangeError,
)
from tierlog.local.leader_epoch import LeaderEpochCache
from tierlog.local.log_loader import load
from tierlog.local.log_segments import LogSegments
from tierlog.local.open_files import PROCESS_FILES, OpenFiles
from tierlog.local.producer_replay import index_if_aborted, replay_producers
from tierlog.local.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    CompletedTxn,
    EndTxnMarker,
    ProducerStateManager,
    end_txn_marker,
)
from tierlog.local.segment import (
    BatchEntry,
    FileSlice,
    LogSegment,
)
from tierlog.local.segment_swap import swap_in
from tierlog.local.time_index import NO_TIMESTAMP
from tierlog.records.builder import ControlType, build_control_batch
from tierlog.records.errors import InvalidRecordError
from tierlog.records.header import (
    ATTRIBUTES_OFFSET,
    MAGIC_OFFSET,
    MAGIC_V2,
    Attr,
    BatchHeader,
    parse_header,
    rewrite_prefix,
    set_log_append_time,
)
from tierlog.records.txn_index_codec import AbortedTxn
from tierlog.records.validate import (
    AppendRules,
    Origin,
    RequestBudget,
    ValidatedBatches,
    check_crc,
    complete,
    prepare,
    validate,
)
from tierlog.util.atomic_files import fsync_paths
from tierlog.util.clock import Clock, SystemClock
from tierlog.util.scheduler import Scheduler

log = logging.getLogger(__name__)

_unpack_header = struct.Struct(">qiibIhiqqqhii").unpack_from  # BatchHeader's layout
# baseOffset, batchLength, partitionLeaderEpoch, magic: the bytes before the CRC'd range.
_pack_prefix = struct.Struct(">qiib").pack

# ListOffsets special timestamps (Kafka's ListOffsetsRequest).
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3


@dataclass(slots=True)
class AppendInfo:
    """What an append did: the offsets it assigned and the timestamps it saw."""

    first_offset: int = -1
    last_offset: int = -1
    max_timestamp: int = NO_TIMESTAMP
    offset_of_max_timestamp: int = -1
    log_append_time: int = NO_TIMESTAMP
    record_count: int = 0
    size: int = 0
    batches: list[BatchHeader] = field(default_factory=list)
    # True when the batch was an idempotent producer's retry of one already in the log:
    # nothing was written and the offsets are the original append's.
    duplicate: bool = False
    # The transactions the appended markers ended (markers and replicated batches only):
    # the partition holds its LSO at their start until their marker is replicated.
    completed_txns: list[CompletedTxn] = field(default_factory=list)


class Log:
    """One partition's local log.

    Args:
        directory: ``<log.dir>/<topic>-<partition>``; created if missing.
        config: the topic's ``LogConfig``.
        clock: wall and monotonic time (tests pass a ``ManualClock``).
        scheduler: runs the delayed unlink of deleted segments; None deletes at once.
        recovery_point: offset up to which the log is known flushed (checkpointed).
        log_start_offset: checkpointed log start; raised to the first segment's base.
        had_clean_shutdown: True skips recovery; False re-checks every batch from the
            segment holding ``recovery_point`` to the end.
        producer_id_expiration_ms: idle idempotent producers are forgotten after this.
        verify_reads: check the CRC-32C of bytes before they are first served
            (``log.read.verify.enable``; issue 20, item 6).
        open_files: the budget of open segments its segments count in (``open_files``).
        cleaned_up_to: the log cleaner's checkpoint for this log, if it ever cleaned it
            (gaps below it are compaction's; ``log_loader``).
    """

    def __init__(
        self,
        directory: Path,
        config: LogConfig | None = None,
        *,
        clock: Clock | None = None,
        scheduler: Scheduler | None = None,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        had_clean_shutdown: bool = False,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        verify_reads: bool = True,
        open_files: OpenFiles = PROCESS_FILES,
        cleaned_up_to: int | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.config = config or LogConfig()
        self.clock = clock or SystemClock()
        self.scheduler = scheduler
        self.verify_reads = verify_reads
        self._open_files = open_files
        self.unflushed_messages = 0
        self.last_flush_ms = self.clock.monotonic_ms()
        # Truncations so far: a background flush begun before one does not move the
        # recovery point (``_flush_rolled``).
        self._truncations = 0
        self.closed = False
        self.leader_epoch_cache = LeaderEpochCache(self.directory)
        self.producer_state = ProducerStateManager(
            self.directory, clock=self.clock, producer_id_expiration_ms=producer_id_expiration_ms
        )
        # Set by the remote log manager for a tiered log: offsets below it are committed to
        # the remote tier. None = not tiered (local retention uses retention.* alone).
        self.remote_end_offset: int | None = None
        self._rules: AppendRules | None = None
        self._rules_of: LogConfig | None = None  # the config ``_rules`` was made from
        loaded = load(
            self.directory,
            self._new_segment,
            config=self.config,
            recovery_point=recovery_point,
            log_start_offset=log_start_offset,
            had_clean_shutdown=had_clean_shutdown,
            leader_epoch_cache=self.leader_epoch_cache,
            producer_state=self.producer_state,
            cleaned_up_to=cleaned_up_to,
        )
        self.segments: LogSegments = loaded.segments
        self.log_start_offset = loaded.log_start_offset
        self.recovery_point = loaded.recovery_point
        self.recovered_bytes_truncated = loaded.recovered_bytes_truncated

    # -- properties ----------------------------------------------------------------------

    @property
    def active_segment(self) -> LogSegment:
        return self.segments.active

    @property
    def log_end_offset(self) -> int:
        return self.active_segment.next_offset

    @property
    def size(self) -> int:
        return sum(seg.size for seg in self.segments)

    @property
    def name(self) -> str:
        return self.directory.name

    def _new_segment(self, base_offset: int) -> LogSegment:
        """Open the segment at ``base_offset`` (creating its files when new)."""
        return LogSegment(
            self.directory,
            base_offset,
            index_interval_bytes=self.config.index_interval_bytes,
            max_index_size=self.config.segment_index_bytes,
            created_ms=self.clock.milliseconds(),
            open_files=self._open_files,
        )

    # -- appending -----------------------------------------------------------------------

    def append(
        self,
        records: bytes | bytearray | memoryview | ValidatedBatches,
        leader_epoch: int = 0,
        *,
        coordinator: bool = False,
    ) -> AppendInfo:
        """Append a producer's batches, assigning offsets from the log end.

        ``records``: raw batches, or batches ``validate`` checked already (the produce
        handler does, to decode off the event loop what needs decoding). Every check is
        ``tierlog.records.validate``'s, made before anything is written, so a bad request
        leaves the log untouched. ``coordinator``: written by this broker's group
        coordinator (Kafka's ``AppendOrigin.COORDINATOR``, transactional offset commits
        with base sequence -1): sequences are not checked, epochs and transactions are.

        Raises:
            CorruptBatchError: malformed or CRC-failing batch.
            InvalidRecordError: count/offset mismatch or a control batch from a client.
            RecordTooLargeError / RecordBatchTooLargeError: size limits.
            DecompressedTooLargeError: a compressed batch too large to decompress.
            ProducerStateError: an idempotence or transaction rule (its ``code``).
        """
        if self.closed:
            self._check_open()  # raises LogClosedError
        origin = Origin.COORDINATOR if coordinator else Origin.CLIENT
        if (
            isinstance(records, ValidatedBatches)
            and records.rules is self._rules  # this config's rules (``append_rules``)
            and self._rules_of is self.config
            and records.origin is origin
        ):
            batches = records  # the produce handler validated them: no second call
        else:
            batches = self.validate(records, origin)
        if (batches.needs_decoding and not batches.decoded) or batches.needs_recompression:
            prepare(batches)  # here, for callers that did not (tools, tests, coordinators)
        headers = batches.headers
        if not headers:
            return AppendInfo()
        # The common case, a producer's single non-idempotent batch on a CreateTime
        # topic, takes a path with no per-batch objects beyond the result.
        if (
            len(headers) == 1
            and headers[0].producer_id < 0
            and self.config.message_timestamp_type == "CreateTime"
        ):
            return self._append_one(batches, leader_epoch)
        complete(batches)  # the CRC of a large batch, inline on this path
        info = AppendInfo(record_count=batches.record_count, size=batches.size)
        info.batches = list(headers)
        duplicate = self._check_producers(info, coordinator)
        if duplicate is not None:
            return duplicate
        records = batches.records
        if self.config.message_timestamp_type == "LogAppendTime":
            records = self._stamp_log_append_time(records, info)
        next_offset = self.log_end_offset
        buffers: list[bytes | memoryview] = []
        entries: list[BatchEntry] = []
        view = memoryview(records)
        position = 0
        info.first_offset = next_offset
        for header in info.batches:
            # Only baseOffset and partitionLeaderEpoch change; both precede the CRC'd range,
            # so the producer's bytes after them are written as they came (no copy).
            buffers.append(rewrite_prefix(view[position:], next_offset, leader_epoch))
            buffers.append(view[position + MAGIC_OFFSET + 1 : position + header.size])
            last = next_offset + header.last_offset_delta
            entries.append(BatchEntry(position, header.size, last, header.max_timestamp))
            if header.max_timestamp > info.max_timestamp:
                info.max_timestamp, info.offset_of_max_timestamp = header.max_timestamp, last
            position += header.size
            next_offset = last + 1
        info.last_offset = next_offset - 1
        self._write(buffers, entries, info)
        self.leader_epoch_cache.assign(leader_epoch, info.first_offset)
        first = info.first_offset
        for header in info.batches:
            if header.producer_id >= 0:
                last = first + header.last_offset_delta
                self.producer_state.update(header, first, last, header.max_timestamp)
            first += header.last_offset_delta + 1
        self.producer_state.update_map_end_offset(info.last_offset + 1)
        return info

    @property
    def append_rules(self) -> AppendRules:
        """What this log's configuration asks of appended batches (``records.validate``)."""
        config = self.config
        rules = self._rules
        if rules is None or self._rules_of is not config:
            rules = self._rules = AppendRules(
                max_batch_bytes=config.max_message_bytes,
                max_append_bytes=config.segment_bytes,
                keys_required=config.compact,
                compression=config.target_compression,
            )
            self._rules_of = config
        return rules

    def validate(
        self,
        records: bytes | bytearray | memoryview | ValidatedBatches,
        origin: Origin = Origin.CLIENT,
        budget: RequestBudget | None = None,
    ) -> ValidatedBatches:
        """``records.validate.validate`` with this log's rules; batches validated already
        under the same rules pass as they are (configs changed meanwhile: checked again).
        One large batch's CRC-32C is left pending for a client append: ``_append_one``
        computes it on the CRC worker beside the write."""
        rules = self.append_rules
        if isinstance(records, ValidatedBatches):
            if records.rules == rules and records.origin is origin:
                return records
            records = records.records
        later = OVERLAP_MIN_BYTES if origin is not Origin.REPLICATION else None
        return validate(records, rules, origin, crc_later_from=later, budget=budget)

    def _append_one(self, batches: ValidatedBatches, leader_epoch: int) -> AppendInfo:
        """``append`` for one whole batch without a producer id: the same writes as the
        general path, with a large batch's CRC-32C and record count computed beside the
        write (see crc_worker) and no per-batch objects beyond the result."""
        config = self.config
        header = batches.headers[0]
        size = batches.size
        view = memoryview(batches.records)
        pending = None
        verify = None
        if batches.crc_pending:
            uncompressed = not header.attributes & Attr.COMPRESSION_MASK
            pending = CRC_WORKER.submit(view[ATTRIBUTES_OFFSET:], count=uncompressed)

            def verify() -> None:
                check_crc(batches, pending.value(), pending.records())

        try:
            segment = self.segments.active
            first = segment.next_offset
            last = first + header.last_offset_delta
            max_timestamp = header.max_timestamp
            if segment.size and segment.should_roll(
                size,
                max_timestamp,
                last,
                self.clock.milliseconds,
                config.segment_bytes,
                config.roll_ms,
            ):
                segment = self.roll(first)
            segment.append_batch(
                _pack_prefix(first, header.batch_length, leader_epoch, MAGIC_V2),
                view[MAGIC_OFFSET + 1 :],
                size,
                last,
                max_timestamp,
                verify,
            )
        finally:
            if pending is not None:
                pending.value()  # never leave a result behind for the next append
        count = header.record_count
        self.unflushed_messages += count
        if self.unflushed_messages >= config.flush_messages:
            self.flush()
        if leader_epoch > self.leader_epoch_cache.latest_epoch:
            self.leader_epoch_cache.assign(leader_epoch, first)
        return AppendInfo(first, last, max_timestamp, last, NO_TIMESTAMP, count, size, [header])

    def _check_producers(self, info: AppendInfo, coordinator: bool = False) -> AppendInfo | None:
        """Idempotent producers (KIP-98): a retry of a recent batch gets the original
        offsets back and nothing is written; a gap or an old epoch raises."""
        headers = [h for h in info.batches if h.producer_id >= 0]
        if not headers:
            return None
        if len(info.batches) > 1:
            # Sequences are checked against the state before the request; Kafka too
            # allows only one v2 batch per partition in a client's produce request.
            raise InvalidRecordError(
                "an idempotent produce request may carry only one batch per partition"
            )
        found = self.producer_state.check(headers[0], coordinator=coordinator)
        if found is None:
            return None
        stamped = self.config.message_timestamp_type == "LogAppendTime"
        return AppendInfo(
            first_offset=found.first_offset,
            last_offset=found.last_offset,
            log_append_time=found.timestamp if stamped else NO_TIMESTAMP,
            duplicate=True,
        )

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> AppendInfo:
        """Append batches whose offsets the leader assigned (replication, compaction).

        Raises:
            InvalidRecordError: offsets that do not continue from the log end.
        """
        self._check_open()
        batches = self.validate(records, Origin.REPLICATION)
        info = AppendInfo(record_count=batches.record_count, size=batches.size)
        info.batches = list(batches.headers)
        if not info.batches:
            return info
        first = info.batches[0]
        if first.base_offset < self.log_end_offset:
            raise InvalidRecordError(
                f"{self.name}: replicated batch at {first.base_offset} is below the log end "
                f"{self.log_end_offset}"
            )
        entries: list[BatchEntry] = []
        positions: list[int] = []
        position = 0
        previous_next = first.base_offset
        for header in info.batches:
            positions.append(position)
            if header.base_offset < previous_next:
                raise InvalidRecordError(f"{self.name}: replicated offsets go backwards")
            entries.append(
                BatchEntry(position, header.size, header.last_offset, header.max_timestamp)
            )
            if header.max_timestamp > info.max_timestamp:
                info.max_timestamp = header.max_timestamp
                info.offset_of_max_timestamp = header.last_offset
            position += header.size
            previous_next = header.next_offset
        info.first_offset = first.base_offset
        info.last_offset = info.batches[-1].last_offset
        self._write([memoryview(records)], entries, info)
        for header in info.batches:
            self.leader_epoch_cache.assign(header.partition_leader_epoch, header.base_offset)
        # The leader validated these; a follower only keeps its state in step (Kafka too),
        # batch after batch as the leader did, so its .txnindex entries are the leader's.
        view = memoryview(records)
        for header, start in zip(info.batches, positions, strict=True):
            marker = None
            if header.is_control and header.producer_id >= 0:
                marker = end_txn_marker(view[start : start + header.size])
            completed = self.producer_state.replay(header, marker)
            if completed is not None:
                info.completed_txns.append(completed)
                index_if_aborted(self.producer_state, completed, self.active_segment)
        return info

    def append_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        commit: bool,
        leader_epoch: int,
        timestamp_ms: int | None = None,
    ) -> AppendInfo:
        """Write a transaction marker (COMMIT or ABORT control batch) at the log end, as
        leader (Kafka's ``UnifiedLog.appendAsLeader`` with a WriteTxnMarkers batch). The
        producer's open transaction ends; an aborted one is added to the ``.txnindex`` of
        the segment holding the marker with the LSO after it.

        Raises:
            InvalidProducerEpochError: ``producer_epoch`` below the producer's (47).
            TransactionCoordinatorFencedError: an older coordinator epoch (52).
        """
        self._check_open()
        self.producer_state.check_marker(producer_id, producer_epoch, coordinator_epoch)
        offset = self.log_end_offset
        timestamp = self.clock.milliseconds() if timestamp_ms is None else timestamp_ms
        batch = build_control_batch(
            ControlType.COMMIT if commit else ControlType.ABORT,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_offset=offset,
            timestamp=timestamp,
            partition_leader_epoch=leader_epoch,
            coordinator_epoch=coordinator_epoch,
        )
        header = parse_header(batch)
        info = AppendInfo(
            first_offset=offset,
            last_offset=offset,
            max_timestamp=timestamp,
            offset_of_max_timestamp=offset,
            record_count=1,
            size=len(batch),
            batches=[header],
        )
        self._write([batch], [BatchEntry(0, len(batch), offset, timestamp)], info)
        self.leader_epoch_cache.assign(leader_epoch, offset)
        completed = self.producer_state.replay(header, EndTxnMarker(commit, coordinator_epoch))
        if completed is not None:
            info.completed_txns.append(completed)
        index_if_aborted(self.producer_state, completed, self.active_segment)
        return info

    @property
    def first_unstable_offset(self) -> int | None:
        """First offset of the earliest open transaction (at least the log start), or
        None when none is open: read_committed reads stop there."""
        first = self.producer_state.first_unstable_offset
        return None if first is None else max(first, self.log_start_offset)

    def collect_aborted_transactions(
        self, fetch_offset: int, upper_bound_offset: int
    ) -> list[AbortedTxn]:
        """The aborted transactions a read_committed fetch of [fetch_offset,
        upper_bound_offset) must list: from the ``.txnindex`` of the segment holding
        ``fetch_offset`` onwards, until an entry whose LSO reaches the upper bound (Kafka's
        ``LocalLog.collectAbortedTransactions``)."""
        self._check_open()
        found: list[AbortedTxn] = []
        for segment in self.segments.from_offset(fetch_offset):
            # Segments starting past the upper bound still count: a transaction begun
            # below it may have its marker, and so its entry, far later.
            txns, complete = segment.txn_index.collect(fetch_offset, upper_bound_offset)
            found += txns
            if complete:
                break
        return found

    def _stamp_log_append_time(
        self, records: bytes | bytearray | memoryview, info: AppendInfo
    ) -> bytearray:
        now = self.clock.milliseconds()
        stamped = bytearray(records)
        position = 0
        for n, header in enumerate(info.batches):
            set_log_append_time(stamped, position, now)
            info.batches[n] = header._replace(
                max_timestamp=now, attributes=header.attributes | 0x08
            )
            position += header.size
        info.log_append_time = now
        return stamped

    def _write(
        self, buffers: list[bytes | memoryview], entries: list[BatchEntry], info: AppendInfo
    ) -> None:
        now = self.clock.milliseconds()
        segment = self.active_segment
        if segment.should_roll(
            info.size,
            info.max_timestamp,
            info.last_offset,
            now,
            self.config.segment_bytes,
            self.config.roll_ms,
        ):
            segment = self.roll(info.first_offset)
        segment.append(buffers, entries)
        self.unflushed_messages += info.record_count
        if self.unflushed_messages >= self.config.flush_messages:
            self.flush()

    # -- segments ------------------------------------------------------------------------

    def roll(self, base_offset: int | None = None) -> LogSegment:
        """Close the active segment and start a new one at the log end (or ``base_offset``,
        for a follower whose next batch starts past a gap). Returns the new segment."""
        base = self.log_end_offset if base_offset is None else max(base_offset, self.log_end_offset)
        old = self.active_segment
        if old.size == 0:
            # Kafka never leaves an empty segment behind: reuse it if the base still fits.
            if old.base_offset == base:
                return old
            self._remove_segments([old], delete_async=False)
        else:
            old.close_for_append()
        segment = self._new_segment(base)
        segment.make_active()
        self.segments.append(segment)
        # Kafka flushes the rolled segment right away, so the recovery point moves past it
        # and recovery after a crash never rescans closed segments. With a scheduler, the
        # fsyncs (the segment's files, the directory naming the new one, the snapshot) run
        # off the event loop; without one (tools, tests), here.
        # A snapshot per segment bounds how much a restart replays to rebuild the state.
        if self.scheduler is not None:
            snapshot = self.producer_state.take_snapshot(base, durable=False)
            self._flush_rolled(base, also=[snapshot])
        else:
            self._fsync_directory()
            self.producer_state.take_snapshot(base)
            self.flush(base)
        return segment

    def _flush_rolled(self, up_to: int, also: Sequence[Path] = ()) -> None:
        """fsync the closed segments below ``up_to``, the files ``also`` names and the
        directory (which now names the new segment) off the event loop, then move the
        recovery point to ``up_to``
        (issue 26, item 7). On the loop, fsyncing a rolled segment's dirty pages held
        every request for ~0.5 s on a busy disk; Kafka runs this flush on its scheduler's
        thread too. The job opens the files by name, so it shares no descriptor with the
        log: a file deleted or replaced meanwhile (retention, compaction's swap, which
        fsyncs its own files) is skipped. A truncation meanwhile (a follower) may have
        rewritten what the job flushed, so the recovery point then stays where it is."""
        assert self.scheduler is not None
        segments = [
            s for s in self.segments.from_offset(self.recovery_point) if s.base_offset < up_to
        ]
        paths = [path for s in segments for path in s.file_paths()]
        paths += [*also, self.directory]
        truncations = self._truncations

        def done(error: BaseException | None) -> None:
            if self.closed:
                return  # a clean close flushed everything itself
            if error is not None:
                log.warning("%s: flushing the rolled segment failed: %s; retrying", self, error)
                assert self.scheduler is not None
                self.scheduler.schedule(
                    f"flush {self.name}", lambda: self._flush_if_open(up_to), 0, 0
                )
                return
            if self._truncations != truncations:
                return
            self.recovery_point = max(self.recovery_point, min(up_to, self.log_end_offset))
            for segment in segments:
                if segment is not self.active_segment and segment.can_release():
                    # Rolled and now durable: no descriptor until it is read again.
                    segment.release_files()

        self.scheduler.run_blocking(f"flush {self.name}", lambda: fsync_paths(paths), done)

    def _flush_if_open(self, up_to: int) -> None:
        if not self.closed:
            self.flush(up_to)

    def replace_segments(self, replaced: Sequence[LogSegment], sizes: Sequence[int]) -> LogSegment:
        """Put a compaction's cleaned segment in place of ``replaced`` (consecutive closed
        segments that had ``sizes`` bytes when cleaned), crash-safely (``segment_swap``).

        Raises:
            StaleSwapError: the segments changed meanwhile; nothing was changed.
        """
        self._check_open()
        return swap_in(
            self.segments,
            replaced,
            sizes,
            open_segment=self._new_segment,
            retire=self._delete_segments,
        )

    def _remove_segments(self, doomed: list[LogSegment], delete_async: bool = True) -> None:
        self.segments.remove_all(doomed)
        self._delete_segments(doomed, delete_async)

    def _delete_segments(self, doomed: list[LogSegment], delete_async: bool = True) -> None:
        """Delete segments already out of the list: at once, or after
        file.delete.delay.ms (renamed ``*.deleted`` meanwhile)."""
        for segment in doomed:
            if delete_async and self.scheduler is not None and self.config.file_delete_delay_ms:
                # Readers may still hold the fd (a fetch in flight); unlink later (Kafka's
                # file.delete.delay.ms).
                segment.rename_for_delete()
                self.scheduler.schedule(
                    f"delete {segment.path.name}",
                    segment.delete,
                    self.config.file_delete_delay_ms,
                    0,
                )
            else:
                segment.delete()

    # -- reading -------------------------------------------------------------------------

    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_batch: bool = True,
    ) -> FileSlice | bytes | None:
        """Batches from ``offset`` (the batch holding it first) below ``max_offset`` (e.g.
        the high watermark), at most ``max_bytes`` unless the first batch alone is larger.

        Returns a slice of the segment file, leased until released (``FileSlice``); the
        bytes themselves when every open segment is leased and the open-file budget is
        full (a fetch of thousands of partitions, issue 20 item 8): the segment's file is
        then closed again at once instead of being held past the limit. None when there
        is nothing to read yet (``offset`` at the bound).

        Raises:
            OffsetOutOfRangeError: ``offset`` below the log start or above the log end.
        """
        self._check_open()
        end = self.log_end_offset
        if offset < self.log_start_offset or offset > end:
            raise OffsetOutOfRangeError(offset, self.log_start_offset, end)
        bound = end if max_offset is None else min(max_offset, end)
        if offset >= bound:
            return None
        for n in range(self.segments.floor_index(offset), len(self.segments)):
            segment = self.segments[n]
            if segment.base_offset >= bound:
                return None
            max_position = None
            if bound < segment.next_offset:
                max_position = segment.position_of(bound)
            found = self._read_segment(
                segment, max(offset, segment.base_offset), max_bytes, max_position, min_one_batch
            )
            if found is not None:
                return found
        return None

    def _read_segment(
        self,
        segment: LogSegment,
        offset: int,
        max_bytes: int,
        max_position: int | None,
        min_one_batch: bool,
    ) -> FileSlice | bytes | None:
        """``segment.read``, with bytes not verified yet checked before they are served.

        Verified before served (issue 20, item 6): a bit flip in a segment, the active one
        included, was served as it was, and a consumer with ``check.crcs=false``
        (librdkafka's default) received a changed value. Bytes past a segment's verified
        ranges are read back and CRC-checked here once, before their first answer; what
        passes is served with ``sendfile`` as before (zero copy), then and every later
        time. Damage found takes the scrubber's path: marked, reported, saved, repaired
        from a replica in a cluster, and the answer stops before it.
        """
        was_open = segment.is_open
        try:
            found = segment.read(offset, max_bytes, max_position, min_one_batch)
            if found is not None and self.verify_reads:
                end = found.position + found.size
                if not segment.is_verified(found.position, end):
                    problems = segment.verify(found.position, end)
                    if problems:
                        found.release()
                        self._mark_damage(segment, problems, "before serving them")
                        found = segment.read(offset, max_bytes, max_position, min_one_batch)
        except CorruptSegmentError as exc:
            self._mark_found_on_read(segment, exc)
            raise
        if found is not None and not was_open and self._open_files.full:
            data = found.read()
            found.release()
            segment.release_files()
            return data
        return found

    def _mark_damage(
        self, segment: LogSegment, problems: list[tuple[int, int, str]], when: str
    ) -> None:
        """Mark and report damage found in ``segment``, save the marks, and start a new
        segment when the damage runs to the end of the active one (appends after bytes
        that cannot be read could not be found)."""
        for position, end, problem in problems:
            if segment.is_marked_damaged(position):
                continue
            segment.mark_damaged(position, end, problem)
            log.error(
                "%s: bytes %d-%d are damaged, found %s (%s); reads of them answer "
                "KAFKA_STORAGE_ERROR until they are repaired from a replica",
                segment.path,
                position,
                end,
                when,
                problem,
            )
        try:
            damage_marks.save(self.segments)
        except OSError as exc:
            log.warning("%s: damage marks not saved (%s); kept in memory", self.name, exc)
        if segment is self.active_segment and any(end >= segment.size for _, end, _ in problems):
            self.roll()

    def _mark_found_on_read(self, segment: LogSegment, exc: CorruptSegmentError) -> None:
        """Damage a read met that nothing had marked (a closed segment's file cut or
        overwritten while the broker runs): mark it, so the next start keeps it marked
        instead of truncating there, and the repairer finds it (issue 20, item 1)."""
        if (
            exc.position < 0
            or exc.position >= segment.size
            or segment.is_marked_damaged(exc.position)
        ):
            return
        position, problem = segment.locate_damage(exc.position, str(exc))
        self._mark_damage(segment, [(position, segment.size, problem)], "by a read")

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """ListOffsets: ``(offset, timestamp)`` of the first record with a timestamp >=
        ``timestamp``; handles EARLIEST (-2), LATEST (-1) and MAX_TIMESTAMP (-3).
        Returns None when no record is that late."""
        self._check_open()
        if timestamp == EARLIEST_TIMESTAMP:
            return self.log_start_offset, NO_TIMESTAMP
        if timestamp == LATEST_TIMESTAMP:
            return self.log_end_offset, NO_TIMESTAMP
        if timestamp == MAX_TIMESTAMP:
            best = max(self.segments, key=lambda s: s.max_timestamp)
            if best.max_timestamp == NO_TIMESTAMP:
                return None
            # Kafka (KIP-734, UnifiedLog.fetchOffsetByTimestamp) answers with the record
            # holding the max timestamp, not the last offset of its batch.
            exact = self._search_segment(best, best.max_timestamp)
            if exact is not None:
                return exact
            return best.offset_of_max_timestamp, best.max_timestamp
        for segment in self.segments:
            if segment.max_timestamp < timestamp:
                continue
            found = self._search_segment(segment, timestamp)
            if found is not None:
                return found
        return None

    def _search_segment(self, segment: LogSegment, timestamp: int) -> tuple[int, int] | None:
        # Imported here: decoding is off the hot path (only ListOffsets by time needs it).
        from tierlog.records.reader import iter_records

        indexed_timestamp, indexed_offset = segment.time_index.lookup(timestamp)
        start = max(indexed_offset, self.log_start_offset)
        found = segment.find_batch(start)
        if (
            indexed_timestamp != NO_TIMESTAMP
            and start == indexed_offset
            and (
                found is None
                or found[1].last_offset != indexed_offset
                or found[1].max_timestamp != indexed_timestamp
            )
        ):
            # An entry names the batch that raised the segment's max timestamp to it: one
            # that does not (garbled) could start the search past the answer (issue 20,
            # item 3, as for the offset index). Search from the segment's start instead.
            log.warning(
                "%s: time index entry (%d, offset %d) does not match the log; searching "
                "from the segment's first batch and rebuilding its indexes",
                segment.path,
                indexed_timestamp,
                indexed_offset,
            )
            segment.rebuild_indexes()
            found = segment.find_batch(max(segment.base_offset, self.log_start_offset))
        if found is None:
            return None
        for position, header in segment.batches(found[0]):
            if header.max_timestamp < timestamp or header.is_control:
                continue
            batch = os.pread(segment.fd, header.size, position)
            for record in iter_records(batch):
                # Filter by the log start only: ``start`` comes from the time index, which
                # holds the *last* offset of the batch that reached a timestamp, so the
                # answer can be an earlier record of that same batch.
                if record.timestamp >= timestamp and record.offset >= self.log_start_offset:
                    return record.offset, record.timestamp
        return None

    def batches(self, start_offset: int = 0) -> Iterator[tuple[LogSegment, int, BatchHeader]]:
        """Every batch header from ``start_offset`` on, with its segment and position
        (``LogSegments.batches``: ranges marked damaged are passed over)."""
        return self.segments.batches(start_offset)

    # -- flush, truncation, retention ----------------------------------------------------

    def flush(self, up_to: int | None = None) -> None:
        """fsync every segment holding offsets in [recovery_point, up_to); advance the
        recovery point. ``up_to`` defaults to the log end."""
        self._check_open()
        target = self.log_end_offset if up_to is None else min(up_to, self.log_end_offset)
        for segment in self.segments.from_offset(self.recovery_point):
            if segment.base_offset >= target or target <= self.recovery_point:
                break
            segment.flush()
            if segment is not self.active_segment and segment.can_release():
                # Rolled and now durable: it holds no descriptor until it is read again
                # (issue 20, item 8: one per partition in use, not one per segment).
                segment.release_files()
        self.recovery_point = max(self.recovery_point, target)
        if target >= self.log_end_offset:
            self.unflushed_messages = 0
        self.last_flush_ms = self.clock.monotonic_ms()

    def flush_if_due(self) -> bool:
        """The time half of the flush policy (flush.ms); the scheduler calls it."""
        if self.unflushed_messages and (
            self.clock.monotonic_ms() - self.last_flush_ms >= self.config.flush_ms
        ):
            self.flush()
            return True
        return False

    def truncate_to(self, offset: int) -> None:
        """Cut the log so it ends at ``offset`` (or at the start of the batch holding it):
        a follower removing what diverged from its new leader."""
        self._check_open()
        if offset >= self.log_end_offset:
            return
        if offset < self.log_start_offset:
            self.truncate_fully_and_start_at(offset)
            return
        doomed = [s for s in self.segments if s.base_offset > offset]
        self._remove_segments(doomed, delete_async=False)
        active = self.active_segment
        active.truncate_to(offset)
        active.make_active()
        self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
        self.recovery_point = min(self.recovery_point, self.log_end_offset)
        self._truncations += 1
        self.rebuild_producer_state(
            self.producer_state.truncate_and_reload(self.log_start_offset, self.log_end_offset)
        )

    def rebuild_producer_state(self, from_offset: int) -> None:
        """Replay producer batches from ``from_offset`` to the log end into the state."""
        replay_producers(self.segments, self.producer_state, from_offset, self.log_end_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete everything and restart the log empty at ``offset``."""
        self._check_open()
        # The epoch history goes first, for the reason given in delete_old_segments.
        self.leader_epoch_cache.clear()
        self._remove_segments(list(self.segments), delete_async=False)
        segment = self._new_segment(offset)
        segment.make_active()
        self.segments.append(segment)
        self.producer_state.truncate_fully_and_start_at(offset)
        self.log_start_offset = self.recovery_point = offset
        self._truncations += 1
        self.unflushed_messages = 0

    def advance_log_start_offset(self, offset: int) -> int:
        """DeleteRecords: records below ``offset`` become unreadable now; segments wholly
        below go at the next retention pass. Returns the new log start offset."""
        self._check_open()
        if offset > self.log_end_offset:
            raise OffsetOutOfRangeError(offset, self.log_start_offset, self.log_end_offset)
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            self.leader_epoch_cache.truncate_from_start(offset)
        return self.log_start_offset

    def delete_old_segments(self, may_delete: Callable[[LogSegment], bool] | None = None) -> int:
        """One retention pass: segments wholly below the log start offset, then (for
        cleanup.policy=delete) past retention.ms by their max timestamp, then beyond
        retention.bytes, oldest first. The active segment is never deleted.

        A tiered log (``remote_end_offset`` set) keeps its segments locally by
        local.retention.ms/bytes instead, and never deletes one whose upload is not
        committed yet (KIP-405). ``may_delete`` can veto further segments.
        Returns the number of segments deleted.
        """
        self._check_open()
        now = self.clock.milliseconds()
        config = self.config
        tiered_end = self.remote_end_offset
        if tiered_end is None and config.remote_storage_enable:
            tiered_end = 0  # tiered, manifest not read yet: nothing is provably remote
        if tiered_end is None:
            retention_ms, retention_bytes = config.retention_ms, config.retention_bytes
        else:
            retention_ms = config.effective_local_retention_ms
            retention_bytes = config.effective_local_retention_bytes
        total = self.size
        doomed: list[LogSegment] = []
        for n, segment in enumerate(self.segments[:-1]):
            next_base = self.segments[n + 1].base_offset
            below_start = next_base <= self.log_start_offset
            # Local retention of a tiered log applies whatever the cleanup policy: what it
            # deletes is in the remote tier (a compacted topic's too, cleaned there).
            by_policy = config.delete or tiered_end is not None
            too_old = (
                by_policy and retention_ms >= 0 and (now - segment.largest_timestamp > retention_ms)
            )
            too_big = (
                by_policy and retention_bytes >= 0 and (total - segment.size >= retention_bytes)
            )
            if not (below_start or too_old or too_big):
                break
            if tiered_end is not None and segment.next_offset > tiered_end and not below_start:
                break  # not remote yet: the local copy is the only one
            if may_delete is not None and not may_delete(segment):
                break
            doomed.append(segment)
            total -= segment.size
        if doomed:
            new_start = self.segments[len(doomed)].base_offset
            self.log_start_offset = max(self.log_start_offset, new_start)
            # The epoch history moves first (its file is written at once): a start that
            # finds segments gone which the history still names reports them missing
            # (log_loader), and must not after a retention a crash interrupted.
            self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
            self._remove_segments(doomed)
            self.producer_state.delete_snapshots_below(self.log_start_offset)
            log.info(
                "%s: retention deleted %d segments; log start now %d",
                self.name,
                len(doomed),
                self.log_start_offset,
            )
        return len(doomed)

    # -- lifecycle -----------------------------------------------------------------------

    def _fsync_directory(self) -> None:
        fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def _check_open(self) -> None:
        if self.closed:
            raise LogClosedError(f"log {self.name} is closed")

    def close(self) -> None:
        """Clean close: flush, trim the indexes, release the files."""
        if self.closed:
            return
        self.flush()
        # With a snapshot at the log end, the next start replays nothing; a log without
        # idempotent producers has nothing to save (and skips an fsync per partition).
        if not self.producer_state.is_empty():
            self.producer_state.take_snapshot(self.log_end_offset)
        for segment in self.segments:
            segment.close()
        self.closed = True

    def delete(self) -> None:
        """Remove the whole partition directory (topic deleted)."""
        for segment in self.segments:
            segment.delete()
        self.closed = True
        for entry in os.scandir(self.directory):
            os.unlink(entry.path)
        self.directory.rmdir()

    def __repr__(self) -> str:
        return (
            f"Log({self.name}, start={self.log_start_offset}, end={self.log_end_offset}, "
            f"segments={len(self.segments)})"
        )
