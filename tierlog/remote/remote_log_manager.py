"""The broker's remote log manager (KIP-405's RemoteLogManager): offload, remote retention,
orphan cleanup and remote reads for the partitions this broker leads.

Threads: all object-store I/O runs off the event loop. Uploads, deletes and manifest
commits run one at a time on the ``remote-log`` worker thread, so a partition's manifest is
only ever written by that thread; remote reads run on a small ``remote-fetch`` pool. The
event loop only reads immutable ``Manifest`` snapshots, published by assigning
``TieredPartition.manifest``, and tells each ``Log`` how far its upload is committed
(``Log.remote_end_offset``), which is what lets local retention delete a segment.

Rules (DESIGN.md "Remote tier"):
- a segment is offloaded when it is closed and wholly below the high watermark and the
  last stable offset (KIP-98: Kafka's RLM copies only segments below the LSO, so every
  transaction with records in a remote segment has its COMMIT or ABORT marker written);
  its data and indexes (with its ``.txnindex`` when it has aborted transactions) are
  uploaded first, then it is committed to the manifest (COPY_FINISHED);
  an upload interrupted by a crash leaves objects no manifest entry names, which the orphan
  cleanup removes; the segment is simply uploaded again;
- a segment whose batches fail their CRC-32C check is never offloaded: the partition's
  offload stops before it (reported once, counted in ``copy_errors``) until it is repaired
  or removed, so the remote tier never holds damage and never has a gap for it;
- a local segment is deleted by local retention only once its upload is committed;
- retention.ms / retention.bytes bound the whole log: remote-only segments past them are
  marked DELETE_STARTED, their objects deleted, then dropped from the manifest, and the
  remote log start offset advances;
- a read_committed fetch of remote offsets is told the aborted transactions from the
  remote ``.txnindex`` objects (``aborted_transactions``, Kafka's
  ``RemoteLogManager.collectAbortedTransactions``), kept decoded in a small LRU;
- the manifest is written only by the partition leader, fenced by its leader epoch; a
  manifest stored by a newer epoch stops this broker's uploads, deletes and orphan cleanup;
- every cycle starts by reading the stored manifest (one small GET per partition), so a
  commit whose answer was lost, a conflicting or fencing writer, a corrupted, replaced or
  emptied manifest are all seen within a cycle; while it cannot be decoded nothing counts
  as remote (``Log.remote_end_offset = 0``), so local retention deletes nothing because
  of it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol, TypeVar

from tierlog.local.checkpoint import (
    CorruptCheckpointError,
    atomic_write,
    decode_checkpoint,
    encode_checkpoint,
)
from tierlog.local.errors import CorruptSegmentError
from tierlog.local.leader_epoch import EpochEntry
from tierlog.local.log import Log
from tierlog.local.producer_state import snapshot_path
from tierlog.local.scrubber import verify_segment_crc
from tierlog.local.segment import INDEX_SUFFIX, TIME_INDEX_SUFFIX, LogSegment
from tierlog.local.txn_index_codec import TXN_INDEX_SUFFIX, AbortedTxn, decode_entries
from tierlog.remote import manifest as mf
from tierlog.remote import remote_checkpoint as rc
from tierlog.remote.api import (
    CorruptManifestError,
    FencedLeaderEpochError,
    IndexKind,
    RemoteSegment,
    RemoteStorageError,
    RemoteStore,
    SegmentState,
)
from tierlog.remote.chunk_cache import ChunkCache
from tierlog.remote.remote_txn_index import RemoteTxnIndexes
from tierlog.remote.segment_reader import RemoteSegmentReader
from tierlog.util.clock import Clock, SystemClock

log = logging.getLogger(__name__)

T = TypeVar("T")
# Readers keep a segment's remote indexes in memory; this many stay open (an LRU).
READER_CACHE_SIZE = 64
# Orphans are looked for when a partition is first tracked and every this many cycles.
ORPHAN_SCAN_EVERY = 20


class Throttle:
    """remote.log.manager.copy.max.bytes.per.second: a token bucket the uploader sleeps
    on (on its own thread, never the event loop)."""

    def __init__(self, bytes_per_second: int) -> None:
        self.rate = bytes_per_second
        self._allowance = float(bytes_per_second)
        self._last = time.monotonic()

    def __call__(self, nbytes: int) -> None:
        if self.rate <= 0:
            return
        now = time.monotonic()
        self._allowance = min(self.rate, self._allowance + (now - self._last) * self.rate)
        self._last = now
        self._allowance -= nbytes
        if self._allowance < 0:
            time.sleep(-self._allowance / self.rate)


class RemoteCompaction(Protocol):
    """What cleans a compacted partition's remote segments
    (``tierlog.compaction.remote_cleaner.RemoteCompactor``)."""

    def clean(
        self,
        store: RemoteStore,
        topic_log: Log,
        manifest: mf.Manifest,
        leader_epoch: int,
        producer_last_offsets: dict[int, int],
    ) -> mf.Manifest | None: ...


@dataclasses.dataclass
class TieredPartition:
    """What the manager knows of one partition; ``manifest`` is replaced, never mutated."""

    topic: str
    partition: int
    topic_id: uuid.UUID
    log: Log
    leader_epoch: Callable[[], int]
    # The partition's high watermark (its replication state owns it): only segments
    # wholly below it are offloaded, so nothing uncommitted ever reaches the remote tier.
    high_watermark: Callable[[], int]
    # True for a partition this broker follows: its manifest is read, never written.
    follower: bool = False
    manifest: mf.Manifest | None = None
    problem: str | None = None  # the last error, reported once per change
    cycles: int = 0
    readers: OrderedDict[str, RemoteSegmentReader] = dataclasses.field(default_factory=OrderedDict)
    # How far the remote tier was known to reach, and what it lost (remote_checkpoint.py).
    checkpoint: rc.RemoteCheckpoint = dataclasses.field(default_factory=rc.RemoteCheckpoint)

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    def committed(self) -> list[RemoteSegment]:
        return mf.committed_segments(self.manifest) if self.manifest else []

    def remote_end(self) -> int:
        """Next offset after the last committed remote segment (0 when none)."""
        committed = self.committed()
        return committed[-1].end_offset + 1 if committed else 0

    def earliest_offset(self) -> int:
        """The whole log's start: the remote log start when remote data exists. A range
        the remote tier lost still counts (its reads fail loudly): the log start never
        moves over acknowledged data without DeleteRecords saying so."""
        start = self.log.log_start_offset
        committed = self.committed()
        if committed and self.manifest is not None:
            remote_start = max(committed[0].base_offset, self.manifest.log_start_offset)
            start = min(remote_start, start)
        lost = self.lost()
        return min(lost[0], start) if lost is not None else start

    def lost(self) -> tuple[int, int] | None:
        """``[start, end)`` the remote tier lost, None when it lost nothing."""
        return self.checkpoint.lost if self.checkpoint.has_loss else None


class RemoteLogManager:
    """Args:
    store: the remote storage and metadata (one fsspec URL).
    cache_dir, cache_bytes: the on-disk chunk cache of remote reads.
    copy_bytes_per_second: upload throttle; <= 0 means unthrottled.
    fetch_timeout_ms: remote.fetch.max.wait.ms, the bound on one remote read.
    """

    def __init__(
        self,
        store: RemoteStore,
        cache_dir: Path,
        cache_bytes: int,
        *,
        clock: Clock | None = None,
        copy_bytes_per_second: int = 0,
        fetch_timeout_ms: int = 500,
    ) -> None:
        self.store = store
        self.clock = clock or SystemClock()
        self.cache = ChunkCache(cache_dir, max(cache_bytes, 4 << 20))
        self.fetch_timeout_s = fetch_timeout_ms / 1000
        self.throttle = Throttle(copy_bytes_per_second)
        if store.throttle is None:
            # Paced per uploaded chunk (8 MiB) by the store, not per segment up front.
            store.throttle = self.throttle
        self.partitions: dict[tuple[str, int], TieredPartition] = {}
        # Partitions of deleted topics whose remote data is still to be deleted (retried
        # every cycle until the store lets it go): (topic, topic id, partition).
        self.deleted_partitions: set[tuple[str, uuid.UUID, int]] = set()
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="remote-log")
        self._fetchers = ThreadPoolExecutor(2, thread_name_prefix="remote-fetch")
        self._lock = threading.Lock()
        self._cycle_running = False
        self.uploaded_segments = 0
        self.uploaded_bytes = 0
        self.deleted_segments = 0
        self.orphans_removed = 0
        self.fetched_bytes = 0
        self.copy_errors = 0
        self.fetch_errors = 0
        self.lost_ranges = 0  # times the remote tier was found to have lost committed data
        self.compaction_errors = 0
        # The remote .txnindex objects, decoded, for read_committed fetches.
        self.txn_indexes = RemoteTxnIndexes(store, self._off_loop)
        # Cleans compacted topics' remote segments after each cycle (tierlog.compaction
        # sets it; the remote tier does not import the cleaner).
        self.compactor: RemoteCompaction | None = None

    # -- tracking ------------------------------------------------------------------------

    def track(
        self,
        topic: str,
        partition: int,
        topic_id: uuid.UUID,
        log: Log,
        leader_epoch: Callable[[], int],
        high_watermark: Callable[[], int],
        *,
        follower: bool = False,
    ) -> TieredPartition:
        """Offload and retain ``partition`` as its leader, or (``follower``) only follow
        its manifest. A partition changing role starts afresh: the manifest is read again
        before anything counts as remote."""
        key = (topic, partition)
        state = self.partitions.get(key)
        if state is None or state.log is not log or state.follower != follower:
            state = TieredPartition(
                topic, partition, topic_id, log, leader_epoch, high_watermark, follower
            )
            state.checkpoint = _read_checkpoint(log.directory)
            self.partitions[key] = state
            # Until the manifest is read nothing counts as uploaded: local retention
            # deletes nothing of a tiered log it cannot prove is remote.
            log.remote_end_offset = 0
        return state

    def untrack(self, topic: str, partition: int, *, topic_deleted: bool = False) -> None:
        """Stop offloading a partition; with ``topic_deleted`` also delete its remote data
        (KIP-405: a deleted topic's remote segments go with it), from the next cycle on."""
        state = self.partitions.pop((topic, partition), None)
        if state is not None:
            state.log.remote_end_offset = None
            if topic_deleted:
                self.deleted_partitions.add((topic, state.topic_id, partition))

    def get(self, topic: str, partition: int) -> TieredPartition | None:
        return self.partitions.get((topic, partition))

    # -- the periodic cycle --------------------------------------------------------------

    async def run_cycle(self) -> None:
        """One pass over every tracked partition: load manifests, clean orphans, offload
        eligible segments, apply remote retention. Errors are logged and retried on the
        next pass (the cycle itself never raises)."""
        if self._cycle_running:
            return
        self._cycle_running = True
        try:
            await self._delete_deleted_topics()
            for state in list(self.partitions.values()):
                if state.log.closed:
                    continue
                try:
                    await self._cycle_partition(state)
                    if state.problem is not None:
                        log.info("%s: remote tier reachable again", state.name)
                        state.problem = None
                except (RemoteStorageError, CorruptSegmentError, OSError, ValueError) as exc:
                    self.copy_errors += 1
                    if isinstance(exc, CorruptManifestError):
                        # Nothing is provably remote while the manifest cannot be read, so
                        # local retention must delete nothing because of it (issue 4,
                        # "Failures"); the last good snapshot still serves remote reads.
                        state.log.remote_end_offset = 0
                    self._report(state, exc)
        finally:
            self._cycle_running = False

    def _report(self, state: TieredPartition, exc: BaseException) -> None:
        problem = f"{type(exc).__name__}: {exc}"
        if problem != state.problem:
            if isinstance(exc, CorruptSegmentError):
                log.error("%s: %s", state.name, exc)
            elif isinstance(exc, CorruptManifestError):
                log.error("%s: %s; keeping local data until it is fixed", state.name, exc)
            else:
                log.warning("%s: remote tier: %s (will retry)", state.name, problem)
            state.problem = problem

    async def _cycle_partition(self, state: TieredPartition) -> None:
        loop = asyncio.get_running_loop()
        if state.follower:
            # A follower only learns how far the leader's uploads are committed, so that
            # its local retention deletes only what is remote (KIP-405); it never writes.
            manifest = await loop.run_in_executor(
                self._worker, self.store.read_manifest, state.topic, state.partition
            )
            if manifest.topic_id in (mf.ZERO_UUID, state.topic_id):
                state.manifest = manifest
                self._publish(state)
            return
        scan = state.cycles % ORPHAN_SCAN_EVERY == 0
        # Read the stored manifest every cycle (one small GET), not only after a failed
        # commit: an idle partition (no commit to fail) must find out within a cycle that
        # its manifest was corrupted, replaced or emptied with its bucket, stop vouching
        # for local deletion, and report lost data (remote_checkpoint.py); the orphan scan
        # must compare the listing with what is stored, too.
        manifest = await loop.run_in_executor(
            self._worker, self.store.read_manifest, state.topic, state.partition
        )
        if manifest.topic_id not in (mf.ZERO_UUID, state.topic_id):
            manifest = await loop.run_in_executor(
                self._worker, self._discard_previous_topic, state, manifest
            )
        state.manifest = manifest
        self._publish(state)
        self._check_not_fenced(state, state.manifest)
        if scan:
            await loop.run_in_executor(
                self._worker, self._remove_orphans, state, state.leader_epoch()
            )
        state.cycles += 1
        for segment in self._eligible(state):
            snapshot = _SegmentFiles.of(segment, state.log)
            state.manifest = await loop.run_in_executor(
                self._worker, self._upload, state, snapshot, state.leader_epoch()
            )
            self._publish(state)
        doomed = self._retention_candidates(state)
        if doomed:
            state.manifest = await loop.run_in_executor(
                self._worker, self._delete, state, doomed, state.leader_epoch()
            )
            self._publish(state)
        if self.compactor is not None and state.log.config.compact:
            await self._compact(state)

    async def _compact(self, state: TieredPartition) -> None:
        """Clean the partition's remote segments when due (``RemoteCompaction``), on the
        worker thread: the manifest's one writer. A failure is reported and retried next
        cycle; it never stops the cycle's offload and retention."""
        assert self.compactor is not None and state.manifest is not None
        producers = {
            pid: entry.last_offset
            for pid, entry in list(state.log.producer_state.producers.items())
            if entry.batches
        }
        loop = asyncio.get_running_loop()
        try:
            cleaned = await loop.run_in_executor(
                self._worker,
                self.compactor.clean,
                self.store,
                state.log,
                state.manifest,
                state.leader_epoch(),
                producers,
            )
        except Exception as exc:
            self.compaction_errors += 1
            log.warning("%s: cleaning the remote segments failed: %s (will retry)", state.name, exc)
            return
        if cleaned is not None:
            state.manifest = cleaned
            self._publish(state)

    def _publish(self, state: TieredPartition) -> None:
        state.log.remote_end_offset = state.remote_end()
        if state.manifest is None:
            return
        before = state.checkpoint
        after = rc.observe(before, state.manifest, state.log.log_start_offset)
        if after == before:
            return
        if after.has_loss and after.lost != before.lost:
            self.lost_ranges += 1
            log.error(
                "%s: the remote tier lost committed data: offsets %d-%d were in %s and are "
                "not any more (an emptied or replaced bucket?). Reads of them fail with "
                "KAFKA_STORAGE_ERROR until the data is restored or DeleteRecords moves the "
                "log start past %d.",
                state.name,
                after.lost[0],
                after.lost[1] - 1,
                self.store.manifest_url(state.topic, state.partition),
                after.lost[1],
            )
        elif before.has_loss and not after.has_loss:
            log.warning("%s: the remote tier holds offsets %d-%d again", state.name, *before.lost)
        self._save_checkpoint(state, after)

    def _save_checkpoint(self, state: TieredPartition, checkpoint: rc.RemoteCheckpoint) -> None:
        state.checkpoint = checkpoint
        path = rc.path_in(state.log.directory)
        data = rc.encode(checkpoint)

        def write() -> None:
            try:
                atomic_write(path, data)
            except OSError as exc:  # the partition was deleted meanwhile, or the disk is full
                log.warning("%s: cannot write %s: %s", state.name, path, exc)

        # On the worker (one thread): writes land in order, and the fsync stays off the loop.
        self._worker.submit(write)

    def acknowledge_loss(self, state: TieredPartition, log_start: int) -> None:
        """DeleteRecords moved the log start to ``log_start``: a lost range below it is
        given up on knowingly (logged), and no longer fails reads."""
        after = rc.acknowledge(state.checkpoint, log_start)
        if after != state.checkpoint:
            log.warning(
                "%s: DeleteRecords to %d gives up the lost remote offsets %d-%d",
                state.name,
                log_start,
                state.checkpoint.lost[0],
                state.checkpoint.lost[1] - 1,
            )
            self._save_checkpoint(state, after)

    def _check_not_fenced(self, state: TieredPartition, manifest: mf.Manifest) -> None:
        """A manifest written by a newer leader epoch means this broker is deposed: it must
        not upload (each commit would be fenced, leaving an orphan per cycle) nor clean up
        orphans (they may be the new leader's uploads in flight)."""
        epoch = state.leader_epoch()
        if manifest.leader_epoch > epoch:
            where = self.store.manifest_url(state.topic, state.partition)
            raise FencedLeaderEpochError(
                f"{where}: leader epoch {epoch} is fenced by the stored epoch "
                f"{manifest.leader_epoch}; not offloading",
                stored_epoch=manifest.leader_epoch,
                writer_epoch=epoch,
            )

    def _eligible(self, state: TieredPartition) -> list[LogSegment]:
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

    # -- worker-thread jobs --------------------------------------------------------------

    def _upload(self, state: TieredPartition, files: _SegmentFiles, epoch: int) -> mf.Manifest:
        manifest = state.manifest
        assert manifest is not None
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
        self.store.copy_segment(
            segment, files.log_path, files.index_path, files.time_index_path, objects or None
        )
        # Committed only after data and indexes are all uploaded.
        updated = dataclasses.replace(mf.with_segment(manifest, segment), leader_epoch=epoch)
        stored = self.store.commit(state.topic, state.partition, updated, manifest.version)
        state.manifest = stored  # the next worker job builds on it, not on a stale copy
        self.uploaded_segments += 1
        self.uploaded_bytes += files.size
        log.info(
            "%s: offloaded segment %d-%d (%d bytes)",
            state.name,
            segment.base_offset,
            segment.end_offset,
            segment.size_bytes,
        )
        return stored

    def _delete(
        self, state: TieredPartition, doomed: list[RemoteSegment], epoch: int
    ) -> mf.Manifest:
        manifest = state.manifest
        assert manifest is not None
        for segment in doomed:
            marked = dataclasses.replace(
                mf.mark(manifest, segment.segment_id, SegmentState.DELETE_STARTED),
                leader_epoch=epoch,
            )
            manifest = self.store.commit(state.topic, state.partition, marked, manifest.version)
            state.manifest = manifest
            self._delete_segment_objects(segment)
            state.readers.pop(segment.segment_id, None)
            dropped = mf.with_log_start_offset(
                mf.without(manifest, segment.segment_id), segment.end_offset + 1
            )
            manifest = self.store.commit(state.topic, state.partition, dropped, manifest.version)
            state.manifest = manifest
            self.deleted_segments += 1
            log.info(
                "%s: remote retention deleted segment %d-%d",
                state.name,
                segment.base_offset,
                segment.end_offset,
            )
        return manifest

    def _delete_segment_objects(self, segment: RemoteSegment) -> None:
        """Every object of one remote segment and what is cached of it. A decoded
        ``.txnindex`` stays in its LRU until evicted: a segment id is never reused, so
        nothing asks for it again."""
        self.store.delete_segment(segment)
        self.cache.remove_segment(segment.segment_id)

    async def _delete_deleted_topics(self) -> None:
        loop = asyncio.get_running_loop()
        for item in sorted(self.deleted_partitions, key=str):
            topic, topic_id, partition = item
            try:
                await loop.run_in_executor(
                    self._worker, self._delete_partition_data, topic, topic_id, partition
                )
                self.deleted_partitions.discard(item)
            except (RemoteStorageError, OSError, ValueError) as exc:
                log.warning("%s-%d: deleting remote data: %s (will retry)", topic, partition, exc)

    def _delete_partition_data(self, topic: str, topic_id: uuid.UUID, partition: int) -> None:
        """Every object of a deleted topic's partition, then its manifest; nothing when the
        manifest already belongs to a newer topic of the same name."""
        manifest = self.store.read_manifest(topic, partition)
        if manifest.topic_id not in (mf.ZERO_UUID, topic_id):
            return
        for segment in manifest.segments:
            self._delete_segment_objects(segment)
        for name in self.store.list_objects(topic, partition):
            if name != mf.MANIFEST_NAME:
                self.store.delete_object(topic, partition, name)
        self.store.delete_object(topic, partition, mf.MANIFEST_NAME)
        log.info("%s-%d: deleted the remote data of the deleted topic", topic, partition)

    def _discard_previous_topic(self, state: TieredPartition, manifest: mf.Manifest) -> mf.Manifest:
        """The manifest belongs to a deleted topic of the same name (another topic id):
        delete its objects, then the manifest, and start the new topic empty (KIP-405
        deletes a topic's remote data with it). Until then ``state.manifest`` is unset, so
        nothing of the new log counts as remote — without this, local retention took the
        old manifest's end offset as proof that the new topic's segments were uploaded.
        A crash half-way is finished by the next cycle: the old manifest is still there."""
        log.warning(
            "%s: remote data of a deleted topic with the same name (topic id %s, this one "
            "is %s): deleting it",
            state.name,
            manifest.topic_id,
            state.topic_id,
        )
        state.readers.clear()
        self._delete_partition_data(state.topic, manifest.topic_id, state.partition)
        return self.store.read_manifest(state.topic, state.partition)

    def _remove_orphans(self, state: TieredPartition, epoch: int) -> None:
        """Objects no manifest entry names: interrupted uploads, left-over temp files.
        Runs on the worker thread, so no upload of this broker is in flight meanwhile."""
        manifest = state.manifest
        assert manifest is not None
        # Entries a crash left half-way (DELETE_STARTED) finish their deletion, as
        # ``_delete`` would have: objects, then the entry, and the log start moves past it.
        # Deleting the objects alone left the entry in the manifest for ever, and the
        # remote log start never advanced over it.
        for segment in manifest.segments:
            if segment.state is SegmentState.DELETE_STARTED:
                self._delete_segment_objects(segment)
                dropped = dataclasses.replace(
                    mf.with_log_start_offset(
                        mf.without(manifest, segment.segment_id), segment.end_offset + 1
                    ),
                    leader_epoch=epoch,
                )
                manifest = self.store.commit(
                    state.topic, state.partition, dropped, manifest.version
                )
                state.manifest = manifest
        names = self.store.list_objects(state.topic, state.partition)
        for name in mf.orphaned_objects(manifest, names):
            self.store.delete_object(state.topic, state.partition, name)
            self.orphans_removed += 1
            log.info("%s: removed orphaned remote object %s", state.name, name)

    # -- retention -----------------------------------------------------------------------

    def _retention_candidates(self, state: TieredPartition) -> list[RemoteSegment]:
        """Remote-only segments past retention.ms / retention.bytes (whole log), or below a
        log start offset raised by DeleteRecords."""
        log_, config = state.log, state.log.config
        now = self.clock.milliseconds()
        remote_only = [s for s in state.committed() if s.end_offset < log_.log_start_offset]
        total = sum(s.size_bytes for s in remote_only) + log_.size
        start = state.manifest.log_start_offset if state.manifest else 0
        doomed = []
        for segment in remote_only:
            below_start = segment.end_offset < start
            too_old = (
                config.delete
                and config.retention_ms >= 0
                and (now - segment.max_timestamp > config.retention_ms)
            )
            too_big = (
                config.delete
                and config.retention_bytes >= 0
                and (total - segment.size_bytes >= config.retention_bytes)
            )
            if not (below_start or too_old or too_big):
                break
            doomed.append(segment)
            total -= segment.size_bytes
        return doomed

    async def advance_log_start_offset(self, state: TieredPartition, offset: int) -> int:
        """DeleteRecords reaching into the remote tier: the remote log start moves now
        (committed), and the next cycle deletes the segments wholly below it. Returns
        the whole log's start offset afterwards."""
        loop = asyncio.get_running_loop()

        def commit() -> None:
            manifest = state.manifest or self.store.read_manifest(state.topic, state.partition)
            raised = dataclasses.replace(
                mf.with_log_start_offset(manifest, offset), leader_epoch=state.leader_epoch()
            )
            state.manifest = self.store.commit(
                state.topic, state.partition, raised, manifest.version
            )

        # On failure the next cycle re-reads what was (or was not) stored.
        await loop.run_in_executor(self._worker, commit)
        return max(offset, state.earliest_offset())

    # -- reads ---------------------------------------------------------------------------

    def _reader(self, state: TieredPartition, segment: RemoteSegment) -> RemoteSegmentReader:
        reader = state.readers.get(segment.segment_id)
        if reader is None:
            # A store on the local filesystem is read in place: copying its objects into
            # a local cache would only add a copy (measured: it halved replay speed).
            cache = None if self.store.is_local else self.cache
            reader = RemoteSegmentReader(self.store, segment, cache)
            state.readers[segment.segment_id] = reader
            while len(state.readers) > READER_CACHE_SIZE:
                state.readers.popitem(last=False)
        else:
            state.readers.move_to_end(segment.segment_id)
        return reader

    async def _off_loop(self, call: Callable[[], T]) -> T:
        loop = asyncio.get_running_loop()
        return await asyncio.wait_for(
            loop.run_in_executor(self._fetchers, call), self.fetch_timeout_s
        )

    async def read(
        self, state: TieredPartition, offset: int, max_bytes: int, min_one_batch: bool = True
    ) -> bytes | None:
        """Batches from the remote segment holding ``offset``, or from the next one that
        has any when it has none at or after ``offset`` (a compacted segment can lose its
        last records without its range shrinking). None when no remote segment from
        ``offset`` on has a batch. Raises RemoteStorageError or TimeoutError when the store
        cannot answer."""
        manifest = state.manifest
        segment = mf.segment_for_offset(manifest, offset) if manifest else None
        data: bytes | None = None
        while segment is not None and not data:
            assert manifest is not None
            reader = self._reader(state, segment)
            start = max(offset, segment.base_offset)
            try:
                data = await self._off_loop(
                    functools.partial(reader.read, start, max_bytes, min_one_batch=min_one_batch)
                )
            except (RemoteStorageError, OSError, TimeoutError):
                self.fetch_errors += 1
                raise
            segment = mf.segment_for_offset(manifest, segment.end_offset + 1)
        self.fetched_bytes += len(data) if data else 0
        return data or None

    async def offset_for_timestamp(
        self, state: TieredPartition, timestamp: int
    ) -> tuple[int, int] | None:
        """First remote record at or after ``timestamp`` (remote-only segments)."""
        if state.manifest is None:
            return None
        start = state.earliest_offset()
        for segment in mf.segments_for_timestamp(state.manifest, timestamp):
            if segment.end_offset >= state.log.log_start_offset:
                break  # the local tier answers from here on
            reader = self._reader(state, segment)
            found = await self._off_loop(
                functools.partial(reader.offset_for_timestamp, timestamp, start)
            )
            if found is not None:
                return found
        return None

    async def aborted_transactions(
        self, topic: str, partition: int, fetch_offset: int, upper_bound_offset: int
    ) -> list[AbortedTxn]:
        """The aborted transactions a read_committed fetch of remote offsets
        ``[fetch_offset, upper_bound_offset)`` must be told about, from the ``.txnindex``
        objects of the committed segments from the one holding ``fetch_offset`` on
        (Kafka's ``RemoteLogManager.collectAbortedTransactions``): each index's entries
        overlapping the range, in segment order, until an entry's last stable offset
        reaches ``upper_bound_offset`` or the remote segments run out (the local tier's
        indexes are the caller's to add then). Segments without an index are skipped.
        Each index is fetched once off the event loop and kept decoded (an LRU:
        ``tierlog.remote.remote_txn_index``).

        Raises:
            RemoteStorageError: an index cannot be fetched or decoded.
            TimeoutError: the store did not answer within remote.fetch.max.wait.ms.
        """
        state = self.partitions.get((topic, partition))
        if state is None or state.manifest is None:
            return []
        try:
            return await self.txn_indexes.collect(state.manifest, fetch_offset, upper_bound_offset)
        except (RemoteStorageError, OSError, TimeoutError):
            self.fetch_errors += 1
            raise

    # -- replicas starting at the leader's local log start (KIP-405) --------------------

    async def aux_state_before(
        self, topic: str, partition: int, topic_id: uuid.UUID, offset: int
    ) -> AuxState:
        """The producer state and leader-epoch history at the end of the remote segment
        holding ``offset - 1``: what a replica restarting empty near its leader's local log
        start ``offset`` needs, without downloading the remote log (Kafka's
        ``ReplicaFetcherTierStateMachine.buildRemoteLogAuxState``). The replica restarts at
        that segment's ``next_offset``. Reads the manifest afresh: a follower's cached copy
        may lag the leader's uploads.

        Raises:
            RemoteStorageError: the store cannot answer, or no committed segment holds
                ``offset - 1`` yet (retriable: the leader's upload is on its way).
        """
        manifest = await self._off_loop(
            functools.partial(self.store.read_manifest, topic, partition)
        )
        if manifest.topic_id not in (mf.ZERO_UUID, topic_id):
            raise RemoteStorageError(
                f"{topic}-{partition}: the remote manifest is another topic's "
                f"(topic id {manifest.topic_id}, ours {topic_id})",
                retriable=True,
            )
        # The segment holding the offset just below: a new leader's local segments need
        # not end where the old leader's uploads did, so the replica restarts at this
        # segment's end + 1, which is at or above ``offset`` and inside the leader's local
        # log (Kafka's follower does the same).
        segment = mf.segment_for_offset(manifest, offset - 1)
        if segment is None or segment.base_offset > offset - 1:
            raise RemoteStorageError(
                f"{topic}-{partition}: no remote segment holds offset {offset - 1} "
                f"(remote end {mf.end_offset(manifest)})",
                retriable=True,
            )
        if not segment.has_aux_state:
            # Uploaded before segments carried it: the epochs are still in the manifest;
            # the producer state is lost (idempotent producers get a fresh start).
            epochs = [EpochEntry(*pair) for pair in mf.leader_epoch_history(manifest, offset)]
            return AuxState(segment, epochs, None)
        checkpoint, snapshot = await self._off_loop(
            lambda: (
                self.store.fetch_index(segment, IndexKind.LEADER_EPOCH),
                self.store.fetch_index(segment, IndexKind.PRODUCER_SNAPSHOT),
            )
        )
        where = self.store.manifest_url(topic, partition)
        try:
            rows = decode_checkpoint(checkpoint, 2, f"{where}: {segment.segment_id}")
            entries = [EpochEntry(int(epoch), int(start)) for epoch, start in rows]
        except (CorruptCheckpointError, ValueError) as exc:
            raise RemoteStorageError(f"corrupt leader-epoch checkpoint: {exc}") from None
        return AuxState(segment, entries, snapshot)

    # -- lifecycle -----------------------------------------------------------------------

    def close(self) -> None:
        self._worker.shutdown(wait=True, cancel_futures=True)
        self._fetchers.shutdown(wait=False, cancel_futures=True)
        self.cache.close()  # its chunks may be kept by the next start

    def stats(self) -> dict[str, Any]:
        return {
            "uploaded_segments": self.uploaded_segments,
            "uploaded_bytes": self.uploaded_bytes,
            "deleted_segments": self.deleted_segments,
            "orphans_removed": self.orphans_removed,
            "fetched_bytes": self.fetched_bytes,
            "copy_errors": self.copy_errors,
            "fetch_errors": self.fetch_errors,
            "lost_ranges": self.lost_ranges,
            "cache_hits": self.cache.hits,
            "cache_misses": self.cache.misses,
        }


def _read_checkpoint(directory: Path) -> rc.RemoteCheckpoint:
    path = rc.path_in(directory)
    try:
        return rc.decode(path.read_bytes(), str(path))
    except FileNotFoundError:
        return rc.RemoteCheckpoint()
    except (CorruptCheckpointError, OSError) as exc:
        log.warning("%s; starting without it (a loss before now may go unnoticed)", exc)
        return rc.RemoteCheckpoint()


@dataclasses.dataclass(frozen=True, slots=True)
class AuxState:
    """KIP-405's auxiliary state of a partition at the end of ``segment``: a replica
    restarts at ``segment.next_offset`` with it."""

    segment: RemoteSegment
    leader_epochs: list[EpochEntry]
    producer_snapshot: bytes | None  # None: the segment was uploaded without one


@dataclasses.dataclass(frozen=True)
class _SegmentFiles:
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
    def of(cls, segment: LogSegment, log_: Log) -> _SegmentFiles:
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
