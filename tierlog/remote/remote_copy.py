"""Offload for the remote log manager (KIP-405's copy task): which closed local segments
are due, what an upload needs of one (``SegmentFiles``), the upload and its manifest
commit (``RemoteCopier``).

Rules (DESIGN.md "Remote tier"): a segment is offloaded when it is closed and wholly below
the high watermark and the last stable offset; its data, indexes and auxiliary objects are
uploaded first, then it is committed to the manifest (COPY_FINISHED), so an interrupted
upload leaves only orphans; a segment whose batches fail their CRC-32C check is never
offloaded.

A backlog goes up ``COPY_PARALLELISM`` segments at a time and is committed in one
manifest write per batch (``upload_batch``; issue 24): with small segments the commit
(two PUTs and a GET on S3, two fsyncs on ``file://``) cost more than the upload itself.
Only the uploaded prefix of a batch is committed, in offset order, so the manifest never
has a gap; a failed upload leaves only orphans, as before.

Threads: ``RemoteCopier.eligible`` and ``SegmentFiles.of`` run on the event loop (they
read the live ``Log``); ``RemoteCopier.upload_batch`` runs on the manager's ``remote-log``
worker thread, the partition manifest's one writer, which alone commits; the segments'
files are read and uploaded on the copier's ``remote-copy`` pool (those threads touch
only the files and the store); the upload throttle (the manager's) sleeps on them, never
the event loop.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tierlog.local.checkpoint import encode_checkpoint
from tierlog.local.errors import CorruptSegmentError
from tierlog.local.log import Log
from tierlog.local.producer_state import snapshot_path
from tierlog.local.scrubber import verify_segment_crc
from tierlog.local.segment import INDEX_SUFFIX, TIME_INDEX_SUFFIX, LogSegment
from tierlog.records.txn_index_codec import TXN_INDEX_SUFFIX, decode_entries
from tierlog.remote import manifest as mf
from tierlog.remote.api import IndexKind, RemoteSegment, RemoteStore, SegmentState
from tierlog.remote.tiered_partition import TieredPartition
from tierlog.util.clock import Clock

log = logging.getLogger(__name__)

# Segments uploaded at once, and committed together: enough to hide a store's per-request
# latency behind each other with small segments; each upload holds at most
# (parts in flight + 1) x the copy chunk in memory (``fsspec_uploads``). Kafka sizes the
# same work with remote.log.manager.copier.thread.pool.size (refused here: sized by us).
COPY_PARALLELISM = 4


@dataclasses.dataclass(frozen=True)
class SegmentFiles:
    """What an upload needs of a closed local segment, read on the event loop; files are
    read on the worker."""

    base_offset: int
    next_offset: int
    size: int
    max_timestamp: int
    first_timestamp: int
    leader_epochs: tuple[tuple[int, int], ...]
    log_path: Path
    index_path: Path
    time_index_path: Path
    # KIP-405's auxiliary state at the segment's end: the producer snapshot the log took
    # when it rolled past the segment, and the leader-epoch history up to the segment's end.
    producer_snapshot_path: Path
    leader_epoch_checkpoint: bytes
    # KIP-98's aborted-transaction index; the local log writes it only for segments an
    # aborted transaction's marker went into.
    txn_index_path: Path

    def aux_state(self) -> dict[IndexKind, bytes] | None:
        """Both auxiliary objects, or None when the producer snapshot is gone (a restart
        that found it corrupt, or a snapshot-less segment): the segment is then uploaded
        without them, and a replica starting after it rebuilds no producer state."""
        try:
            snapshot = self.producer_snapshot_path.read_bytes()
        except FileNotFoundError:
            return None
        return {
            IndexKind.PRODUCER_SNAPSHOT: snapshot,
            IndexKind.LEADER_EPOCH: self.leader_epoch_checkpoint,
        }

    def txn_index(self) -> bytes | None:
        """The segment's ``.txnindex`` bytes, None when it has none or it is empty.

        Raises:
            CorruptTxnIndexError: not a whole number of entries (a ValueError: reported
                and retried like any failed upload, never uploaded).
        """
        try:
            data = self.txn_index_path.read_bytes()
        except FileNotFoundError:
            return None
        decode_entries(data, str(self.txn_index_path))  # checks it: readers trust it
        return data or None

    @classmethod
    def of(cls, segment: LogSegment, log_: Log) -> SegmentFiles:
        """Raises:
        CorruptSegmentError: the segment answers for offsets its file does not hold (a
            segment file gone or cut short, issue 20 item 2): its bytes would check out,
            and the remote tier would then hold a silent gap. Offload stops before it,
            as for damaged bytes (``upload``)."""
        missing = segment.missing_offsets
        if missing is not None:
            raise CorruptSegmentError(
                f"{segment.path}: not offloaded, offsets {missing[0]}-{missing[1] - 1} are "
                "missing from it",
                segment.path,
                segment.size,
            )
        stem = segment.path.with_suffix("")
        epochs = mf.segment_leader_epochs(
            log_.leader_epoch_cache.entries, segment.base_offset, segment.next_offset - 1
        )
        return cls(
            segment.base_offset,
            segment.next_offset,
            segment.size,
            max(segment.max_timestamp, -1),
            segment.first_batch_timestamp if segment.first_batch_timestamp is not None else -1,
            epochs,
            segment.path,
            stem.with_suffix(INDEX_SUFFIX),
            stem.with_suffix(TIME_INDEX_SUFFIX),
            snapshot_path(log_.producer_state.directory, segment.next_offset),
            encode_checkpoint(
                e for e in log_.leader_epoch_cache.entries if e.start_offset < segment.next_offset
            ),
            stem.with_suffix(TXN_INDEX_SUFFIX),
        )


class RemoteCopier:
    """Args:
    store: the remote storage and metadata the segments are copied to.
    clock: stamps each remote segment's creation time.
    """

    def __init__(
        self, store: RemoteStore, clock: Clock, parallelism: int = COPY_PARALLELISM
    ) -> None:
        self.store = store
        self.clock = clock
        self.parallelism = max(1, parallelism)
        self.uploaded_segments = 0
        self.uploaded_bytes = 0
        self.commits = 0  # manifest commits of uploads (a batch shares one)
        self._pool: ThreadPoolExecutor | None = None
        self._guard = threading.Lock()

    def eligible(self, state: TieredPartition) -> list[LogSegment]:
        """Closed segments wholly below the last stable offset and not yet remote, in
        order. The LSO is the high watermark capped by the first offset of the earliest
        open transaction (KIP-98); Kafka's RLM copies only segments below it, so a remote
        segment never holds records of a transaction still open, and its uploaded
        ``.txnindex`` is final."""
        log_, end = state.log, state.remote_end()
        stable = state.high_watermark()
        # getattr: logs without transactions support (and test doubles) have no such field.
        first_unstable = getattr(log_, "first_unstable_offset", None)
        if first_unstable is not None:
            stable = min(stable, first_unstable)
        return [
            s
            for s in log_.segments[:-1]
            if s.base_offset >= end and s.next_offset <= stable and s.size
        ]

    def upload(self, state: TieredPartition, files: SegmentFiles, epoch: int) -> mf.Manifest:
        """Copy one segment and commit it to the manifest as ``epoch``; on the worker
        thread. Returns the stored manifest (also assigned to ``state.manifest``)."""
        return self.upload_batch(state, [files], epoch)

    def upload_batch(
        self, state: TieredPartition, batch: Sequence[SegmentFiles], epoch: int
    ) -> mf.Manifest:
        """Copy ``batch`` (consecutive segments, in offset order; at most
        ``parallelism``) at once, then commit the uploaded ones in one manifest write as
        ``epoch``; on the worker thread. When an upload fails, the segments before it are
        committed all the same and its error is raised (those after it are orphans).
        Returns the stored manifest (also assigned to ``state.manifest``)."""
        assert state.manifest is not None
        pool = self._copy_pool()
        futures = [pool.submit(self._copy, state, files) for files in batch]
        uploaded: list[RemoteSegment] = []
        failure: BaseException | None = None
        for future in futures:
            try:
                segment = future.result()
            except BaseException as exc:
                failure = failure or exc
                continue
            if failure is None:
                uploaded.append(segment)
        if uploaded:
            self._commit(state, uploaded, epoch)
        if failure is not None:
            raise failure
        assert state.manifest is not None
        return state.manifest

    def _copy_pool(self) -> ThreadPoolExecutor:
        with self._guard:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.parallelism, thread_name_prefix="remote-copy")
            return self._pool

    def close(self) -> None:
        with self._guard:
            if self._pool is not None:
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = None

    def _copy(self, state: TieredPartition, files: SegmentFiles) -> RemoteSegment:
        """Check and upload one segment (on the copy pool); the segment as uploaded."""
        # Never offload damage: the remote copy outlives the local one, and readers of the
        # remote tier trust what is there. The partition's offload stops here until the
        # segment is repaired or removed; the log and the scrubber report the range.
        problems = verify_segment_crc(files.log_path)
        if problems:
            first = problems[0]
            raise CorruptSegmentError(
                f"{files.log_path}: not offloaded, {len(problems)} damaged range(s), the "
                f"first at byte {first.position} (offsets {first.first_offset}-"
                f"{first.last_offset}): {first.problem}",
                files.log_path,
                first.position,
            )
        aux_state = files.aux_state()
        txn_index = files.txn_index()
        objects = dict(aux_state or {})
        if txn_index is not None:
            objects[IndexKind.TRANSACTION] = txn_index
        segment = RemoteSegment(
            topic=state.topic,
            partition=state.partition,
            topic_id=state.topic_id,
            base_offset=files.base_offset,
            end_offset=files.next_offset - 1,
            segment_id=str(uuid.uuid4()),
            size_bytes=files.size,
            max_timestamp=files.max_timestamp,
            first_batch_timestamp=files.first_timestamp,
            leader_epochs=files.leader_epochs,
            state=SegmentState.COPY_FINISHED,
            created_ms=self.clock.milliseconds(),
            has_aux_state=aux_state is not None,
            has_txn_index=txn_index is not None,
        )
        # The store says where each part went, with its CRC-32C: that goes in the manifest.
        return self.store.copy_segment(
            segment, files.log_path, files.index_path, files.time_index_path, objects or None
        )

    def _commit(self, state: TieredPartition, segments: list[RemoteSegment], epoch: int) -> None:
        """Commit uploaded ``segments`` in one manifest write: only after their data and
        indexes are all uploaded."""
        manifest = state.manifest
        assert manifest is not None
        updated = manifest
        for segment in segments:
            updated = mf.with_segment(updated, segment)
        updated = dataclasses.replace(updated, leader_epoch=epoch)
        stored = self.store.commit(state.topic, state.partition, updated, manifest.version)
        state.manifest = stored  # the next worker job builds on it, not on a stale copy
        self.commits += 1
        for segment in segments:
            self.uploaded_segments += 1
            self.uploaded_bytes += segment.size_bytes
            log.info(
                "%s: offloaded segment %d-%d (%d bytes)",
                state.name,
                segment.base_offset,
                segment.end_offset,
                segment.size_bytes,
            )
