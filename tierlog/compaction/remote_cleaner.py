"""Cleaning a compacted topic's remote segments (beyond Kafka: KIP-1272 is still a
proposal, and Kafka refuses ``remote.storage.enable`` with ``cleanup.policy=compact``).

The partition leader's remote log manager calls ``RemoteCompactor.clean`` on its worker
thread, the one thread that writes the partition's manifest, after each cycle's uploads.
A pass over the remote segments is the local pass (``segment_cleaner.clean``) on copies:

1. Due? The remote part's dirty ratio (bytes of committed segments at or after the remote
   first dirty offset, over all committed bytes) against ``min.cleanable.dirty.ratio``,
   or a tombstone's delete horizon passed (KIP-534). The first dirty offset is kept in
   ``remote-cleaner-offset-checkpoint`` in the log dir (Kafka's format); a new leader
   without one treats the whole remote part as dirty once.
2. The committed segments' ``.log`` objects are downloaded into a work directory
   (``<log dir>/.remote-cleaning/<topic>-<partition>``), and cleaned there into
   ``.cleaned`` files, grouped up to ``segment.bytes``.
3. Each cleaned group is uploaded as a new remote segment (a fresh segment id, so no
   object of a committed segment is ever overwritten), with the producer snapshot and
   leader-epoch checkpoint of the last segment it replaces (it ends where that one did).
4. One manifest commit (compare-and-set on the version read in step 1, fenced by this
   leader's epoch) swaps every replaced range for its new segment.
5. The replaced segments' objects are deleted ``delete_delay_ms`` later, so that readers
   holding the previous manifest (a Spark job planned before the commit) finish first.

Crash safety: before step 4 nothing any reader sees has changed; objects uploaded by an
interrupted pass belong to no manifest entry and the orphan scan removes them. After it,
the replaced objects belong to no entry either: if the broker stops before deleting them,
the orphan scan does. A failed commit deletes this pass's uploads at once.

Transactions (KIP-98): the aborted transactions come from the remote segments'
``IndexKind.TRANSACTION`` objects, and each cleaned group is uploaded with its rewritten
index (``has_txn_index``). Remote segments lie below the last stable offset when
offloaded, but a transaction's marker may still be in a local segment not offloaded yet:
a pass stops before the first transaction the downloaded segments open and do not end
(``txn_tracker.undecided_from``), as the local pass stops at the first unstable offset.

The local part of a tiered compacted log is not cleaned (its closed segments are the
remote log manager's to upload), so the hot tail keeps every record until it is offloaded
and cleaned remotely; readers see one log with offset gaps either way.
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path

from tierlog.compaction.segment_cleaner import (
    CleanedGroup,
    CleanJob,
    CleanResult,
    SegmentFile,
    clean,
    read_batches,
)
from tierlog.compaction.txn_tracker import undecided_from
from tierlog.local.checkpoint import CorruptCheckpointError, read_offsets, write_offsets
from tierlog.local.log import Log
from tierlog.local.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, segment_name
from tierlog.local.segment_swap import CLEANED_SUFFIX
from tierlog.records.header import parse_header
from tierlog.records.txn_index_codec import AbortedTxn, decode_entries
from tierlog.remote import manifest as mf
from tierlog.remote.api import IndexKind, RemoteSegment, RemoteStore, SegmentState
from tierlog.util.clock import Clock, SystemClock

log = logging.getLogger(__name__)

CHECKPOINT_FILE = "remote-cleaner-offset-checkpoint"
WORK_DIR = ".remote-cleaning"
_DOWNLOAD_CHUNK = 32 << 20

TopicPartition = tuple[str, int]


class RemoteCompactor:
    """Cleans the remote segments of the compacted tiered logs this broker leads.

    Args:
        log_dir_of: the log dir holding a partition (for its work dir and checkpoint).
        map_memory_bytes: the offset map's size for a pass.
        run_pass: runs a ``CleanJob`` (the cleaner's worker processes; ``clean`` here).
        delete_delay_ms: how long replaced objects stay after the commit.
    """

    def __init__(
        self,
        log_dir_of: Callable[[str, int], Path],
        *,
        map_memory_bytes: int = 128 << 20,
        run_pass: Callable[[CleanJob], CleanResult] = clean,
        delete_delay_ms: int = 60_000,
        clock: Clock | None = None,
    ) -> None:
        self.log_dir_of = log_dir_of
        self.map_memory_bytes = map_memory_bytes
        self.run_pass = run_pass
        self.delete_delay_ms = delete_delay_ms
        self.clock = clock or SystemClock()
        self.first_dirty: dict[TopicPartition, int] = {}
        self.next_horizon: dict[TopicPartition, int] = {}
        self._loaded_dirs: set[Path] = set()
        self._doomed: list[tuple[int, RemoteSegment]] = []
        self.passes = 0
        self.replaced_segments = 0

    # -- checkpoint ----------------------------------------------------------------------

    def _load(self, log_dir: Path) -> None:
        if log_dir in self._loaded_dirs:
            return
        self._loaded_dirs.add(log_dir)
        try:
            for tp, offset in read_offsets(log_dir / CHECKPOINT_FILE).items():
                self.first_dirty.setdefault(tp, offset)
        except CorruptCheckpointError as exc:
            log.warning("%s; the remote parts there are dirty from their start", exc)

    def _save(self, log_dir: Path) -> None:
        entries = {
            tp: offset for tp, offset in self.first_dirty.items() if self.log_dir_of(*tp) == log_dir
        }
        write_offsets(log_dir / CHECKPOINT_FILE, entries)

    # -- a pass --------------------------------------------------------------------------

    def delete_replaced(self, store: RemoteStore) -> None:
        """Delete the objects of replaced segments whose delay has passed."""
        now = self.clock.milliseconds()
        due = [segment for when, segment in self._doomed if when <= now]
        self._doomed = [(when, segment) for when, segment in self._doomed if when > now]
        for segment in due:
            _delete_segment(store, segment)

    def _due(
        self, tp: TopicPartition, topic_log: Log, committed: list[RemoteSegment], first_dirty: int
    ) -> bool:
        total = sum(s.size_bytes for s in committed)
        dirty = sum(s.size_bytes for s in committed if s.end_offset >= first_dirty)
        horizon = self.next_horizon.get(tp, -1)
        if 0 <= horizon <= self.clock.milliseconds():
            return True
        return (
            bool(total) and dirty > 0 and dirty / total > topic_log.config.min_cleanable_dirty_ratio
        )

    def clean(
        self,
        store: RemoteStore,
        topic_log: Log,
        manifest: mf.Manifest,
        leader_epoch: int,
        producer_last_offsets: dict[int, int],
    ) -> mf.Manifest | None:
        """One remote pass over the partition of ``manifest`` when it is due; returns the
        committed manifest, or None when nothing was due or nothing changed.

        Raises:
            RemoteStorageError: the store failed (this pass's uploads are deleted).
            RecordsError: a remote segment is corrupt (nothing changes).
        """
        self.delete_replaced(store)
        if not topic_log.config.compact:
            return None
        tp = (manifest.topic, manifest.partition)
        log_dir = self.log_dir_of(*tp)
        self._load(log_dir)
        committed = [
            s for s in mf.committed_segments(manifest) if s.end_offset >= manifest.log_start_offset
        ]
        if not committed:
            return None
        first_dirty = self.first_dirty.get(tp, 0)
        if first_dirty > committed[-1].end_offset + 1:
            first_dirty = committed[0].base_offset  # the remote tier was reset
        if not self._due(tp, topic_log, committed, first_dirty):
            return None
        work = log_dir / WORK_DIR / f"{tp[0]}-{tp[1]}"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        try:
            job = self._job(store, topic_log, manifest, committed, first_dirty, work)
            if job is None:
                return None
            job = dataclasses.replace(job, producer_last_offsets=producer_last_offsets)
            result = self.run_pass(job)
            stored = self._replace(store, manifest, committed, result, leader_epoch)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        self.first_dirty[tp] = result.map_end_offset
        self.next_horizon[tp] = result.next_delete_horizon_ms
        self._save(log_dir)
        self.passes += 1
        s = result.stats
        log.info(
            "%s-%d remote segments cleaned: offsets %d-%d, %d segments replaced by %d, "
            "%.1f MB written, %d of %d records kept, %d tombstones removed, %d aborted "
            "records and %d markers removed",
            *tp,
            committed[0].base_offset,
            result.map_end_offset - 1,
            sum(len(g.replaced) for g in result.groups),
            len(result.groups),
            s.bytes_written / 1e6,
            s.records_kept,
            s.records_read,
            s.tombstones_removed,
            s.aborted_removed,
            s.markers_removed,
        )
        return stored

    def _job(
        self,
        store: RemoteStore,
        topic_log: Log,
        manifest: mf.Manifest,
        committed: list[RemoteSegment],
        first_dirty: int,
        work: Path,
    ) -> CleanJob | None:
        """Download the committed segments' logs into ``work`` and describe the pass; None
        when an undecided transaction leaves nothing to clean."""
        files = []
        aborted: list[AbortedTxn] = []
        for n, segment in enumerate(committed):
            path = work / (segment_name(segment.base_offset) + LOG_SUFFIX)
            with open(path, "wb") as out:
                position = 0
                while position < segment.size_bytes:
                    end = min(position + _DOWNLOAD_CHUNK, segment.size_bytes)
                    data = store.fetch_range(segment, position, end)
                    out.write(data)
                    position += len(data)
                    if not data:
                        break
            end_offset = (
                committed[n + 1].base_offset if n + 1 < len(committed) else segment.next_offset
            )
            files.append(SegmentFile(segment.base_offset, str(path), position, end_offset))
            if segment.has_txn_index:
                data = store.fetch_index(segment, IndexKind.TRANSACTION)
                aborted += decode_entries(data, f"{segment.segment_id} txn index")
        undecided = undecided_from(
            header for file in files for chunk in read_batches(file) for _, header in chunk
        )
        if undecided is not None:
            files = [f for f in files if f.next_offset <= undecided]
            if not files or files[-1].next_offset <= first_dirty:
                return None
        config = topic_log.config
        return CleanJob(
            name=f"{manifest.topic}-{manifest.partition} (remote)",
            segments=tuple(files),
            log_start_offset=manifest.log_start_offset,
            first_dirty_offset=max(first_dirty, committed[0].base_offset),
            now_ms=self.clock.milliseconds(),
            delete_retention_ms=config.delete_retention_ms,
            segment_bytes=config.segment_bytes,
            index_interval_bytes=config.index_interval_bytes,
            max_index_size=config.segment_index_bytes,
            map_memory_bytes=self.map_memory_bytes,
            hash_seed=(secrets.randbits(64), secrets.randbits(64)),
            aborted_transactions=tuple(aborted),
        )

    def _replace(
        self,
        store: RemoteStore,
        manifest: mf.Manifest,
        committed: list[RemoteSegment],
        result: CleanResult,
        leader_epoch: int,
    ) -> mf.Manifest | None:
        """Upload each cleaned group as a new segment, then commit them all at once."""
        if not result.groups:
            return None
        by_base = {s.base_offset: s for s in committed}
        uploaded: list[RemoteSegment] = []
        replaced: list[RemoteSegment] = []
        updated = manifest
        try:
            for group in result.groups:
                old = [by_base[f.base_offset] for f in group.replaced]
                new = _new_segment(group, old, self.clock.milliseconds())
                stem = group.log_path.removesuffix(LOG_SUFFIX + CLEANED_SUFFIX)
                aux = {}
                if new.has_aux_state:
                    aux = {
                        kind: store.fetch_index(old[-1], kind)
                        for kind in (IndexKind.PRODUCER_SNAPSHOT, IndexKind.LEADER_EPOCH)
                    }
                if group.txn_index_path is not None:
                    aux[IndexKind.TRANSACTION] = Path(group.txn_index_path).read_bytes()
                uploaded.append(new)  # before the upload: a partial one is deleted too
                # As stored: with each part's CRC-32C, for the manifest.
                new = store.copy_segment(
                    new,
                    Path(group.log_path),
                    Path(stem + INDEX_SUFFIX + CLEANED_SUFFIX),
                    Path(stem + TIME_INDEX_SUFFIX + CLEANED_SUFFIX),
                    aux or None,
                )
                uploaded[-1] = new  # where its parts went: what a cleanup deletes
                for segment in old:
                    updated = mf.without(updated, segment.segment_id)
                updated = mf.with_segment(updated, new)
                replaced.extend(old)
            stored = store.commit(
                manifest.topic,
                manifest.partition,
                dataclasses.replace(updated, leader_epoch=leader_epoch),
                manifest.version,
            )
        except BaseException:
            for segment in uploaded:
                _delete_segment(store, segment)
            raise
        deadline = self.clock.milliseconds() + self.delete_delay_ms
        self._doomed.extend((deadline, segment) for segment in replaced)
        self.replaced_segments += len(replaced)
        return stored


def _delete_segment(store: RemoteStore, segment: RemoteSegment) -> None:
    """Every object of a segment: its ``.txnindex`` by name first (the store's
    ``delete_segment`` knows the others only), as the remote log manager deletes them."""
    name = mf.txn_index_object_name(segment)
    if name is not None:
        store.delete_object(segment.topic, segment.partition, name)
    if not segment.parts:
        # An upload that failed before it said where its parts went: they may be in one
        # object (issue 24) as well as in one each.
        name = mf.single_object_name(segment.base_offset, segment.segment_id)
        store.delete_object(segment.topic, segment.partition, name)
    store.delete_segment(segment)


def _new_segment(group: CleanedGroup, old: list[RemoteSegment], now_ms: int) -> RemoteSegment:
    """The manifest entry of a cleaned group: the replaced range, a fresh segment id."""
    epochs: list[tuple[int, int]] = []
    for segment in old:
        for epoch, start in segment.leader_epochs:
            if not epochs or epoch > epochs[-1][0]:
                epochs.append((epoch, start))
    first_timestamp = -1
    if group.size:
        with open(group.log_path, "rb") as f:
            first_timestamp = parse_header(f.read(61)).max_timestamp
    end = group.replaced[-1].next_offset - 1
    return RemoteSegment(
        topic=old[0].topic,
        partition=old[0].partition,
        topic_id=old[0].topic_id,
        base_offset=old[0].base_offset,
        end_offset=end,
        segment_id=str(uuid.uuid4()),
        size_bytes=group.size,
        max_timestamp=max(s.max_timestamp for s in old),
        first_batch_timestamp=first_timestamp,
        leader_epochs=tuple(epochs),
        state=SegmentState.COPY_FINISHED,
        created_ms=now_ms,
        has_aux_state=old[-1].has_aux_state,
        has_txn_index=group.txn_index_path is not None,
    )
