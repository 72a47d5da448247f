"""The broker's remote log manager (KIP-405's RemoteLogManager): offload, remote retention,
orphan cleanup and remote reads for the partitions this broker leads.

This module owns the orchestration: which partitions are tracked (leader or follower),
the periodic cycle and its order (manifest read, fencing, orphan scan, offload, retention,
compaction), the ``remote-log`` worker thread, publishing each new manifest to the event
loop and the remote checkpoint, and the public API the broker calls. The work itself is
in sibling modules it composes: ``remote_copy`` (which segments are due, the upload),
``remote_retention`` (retention, deletes, orphans, deleted topics), ``remote_reads`` (the
read path and its ``remote-fetch`` pool), over ``tiered_partition.TieredPartition``.

Threads: all object-store I/O runs off the event loop. Uploads, deletes and manifest
commits (``remote_copy``, ``remote_retention``, compaction) run one at a time on the
``remote-log`` worker thread this class owns, so a partition's manifest is only ever
written by that thread; remote reads run on a small ``remote-fetch`` pool
(``remote_reads``). The event loop only reads immutable ``Manifest`` snapshots, published
by assigning ``TieredPartition.manifest``, and tells each ``Log`` how far its upload is
committed (``Log.remote_end_offset``), which is what lets local retention delete a segment.

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
import logging
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from tierlog.local.checkpoint import CorruptCheckpointError, atomic_write
from tierlog.local.errors import CorruptSegmentError
from tierlog.local.file_lease import FileSlice, records_size
from tierlog.local.log import Log
from tierlog.records.txn_index_codec import AbortedTxn
from tierlog.remote import manifest as mf
from tierlog.remote import read_ahead
from tierlog.remote import remote_checkpoint as rc
from tierlog.remote.api import (
    CorruptManifestError,
    FencedLeaderEpochError,
    RemoteStorageError,
    RemoteStore,
)
from tierlog.remote.chunk_cache import ChunkCache
from tierlog.remote.remote_copy import RemoteCopier, SegmentFiles
from tierlog.remote.remote_reads import AuxState, RemoteReads
from tierlog.remote.remote_retention import RemoteRetention
from tierlog.remote.tiered_partition import TieredPartition
from tierlog.util.clock import Clock, SystemClock
from tierlog.util.throttle import Throttle

log = logging.getLogger(__name__)

# Orphans are looked for when a partition is first tracked and every this many cycles.
ORPHAN_SCAN_EVERY = 20
# How long a clean stop waits for the upload in progress (``stop``).
CLOSE_TIMEOUT_S = 30.0


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


class RemoteLogManager:
    """Args:
    store: the remote storage and metadata (``registry.open_store``; its upload throttle,
        remote.log.manager.copy.max.bytes.per.second, is given to it when opened).
    cache_dir, cache_bytes: the on-disk chunk cache of remote reads.
    fetch_timeout_ms: remote.fetch.max.wait.ms, the bound on one remote read.
    reader_threads: remote.log.reader.threads, the read-ahead's GETs at once.
    read_ahead_chunks, read_ahead_max_bytes: remote.log.reader.read.ahead.chunks (per
        partition; 0 disables) and remote.log.reader.read.ahead.max.bytes (all
        partitions' GETs in flight): ``tierlog.remote.read_ahead``.
    fetch_throttle: remote.log.manager.fetch.max.bytes.per.second (KIP-956), the bytes
        per second fetches read from the remote tier; None: unthrottled.
    """

    def __init__(
        self,
        store: RemoteStore,
        cache_dir: Path,
        cache_bytes: int,
        *,
        clock: Clock | None = None,
        fetch_timeout_ms: int = 500,
        compactor: RemoteCompaction | None = None,
        reader_threads: int = read_ahead.DEFAULT_THREADS,
        read_ahead_chunks: int = read_ahead.DEFAULT_WINDOW_CHUNKS,
        read_ahead_max_bytes: int = read_ahead.DEFAULT_MAX_BYTES,
        fetch_throttle: Throttle | None = None,
    ) -> None:
        self.store = store
        self.fetch_throttle = fetch_throttle
        # Remote reads answered empty because the fetch quota was used up (KIP-956).
        self.fetches_throttled = 0
        self.clock = clock or SystemClock()
        self.cache = ChunkCache(cache_dir, max(cache_bytes, 4 << 20))
        self.partitions: dict[tuple[str, int], TieredPartition] = {}
        # Partitions of deleted topics whose remote data is still to be deleted (retried
        # every cycle until the store lets it go): (topic, topic id, partition).
        self.deleted_partitions: set[tuple[str, uuid.UUID, int]] = set()
        # The one thread that writes manifests (every commit of every partition).
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="remote-log")
        self._cycle_running = False
        # Set by ``stop``: the cycle in progress stops before its next upload.
        self._closing = False
        self._cycle_done: asyncio.Event | None = None
        self.copier = RemoteCopier(store, self.clock)
        self.retention = RemoteRetention(store, self.cache, self.clock)
        # A store on the local filesystem is read in place, without the cache: nothing
        # to read ahead into.
        self.read_ahead = (
            None
            if store.is_local or read_ahead_chunks <= 0
            else read_ahead.ReadAhead(
                self.cache, read_ahead_chunks, read_ahead_max_bytes, threads=reader_threads
            )
        )
        self.reads = RemoteReads(store, self.cache, fetch_timeout_ms / 1000, self.read_ahead)
        self.copy_errors = 0
        # Cycles run to the end (the metrics' tierlog_remote_cycles): how tests and
        # operators see that offload and remote retention keep being looked at.
        self.cycles = 0
        self.lost_ranges = 0  # times the remote tier was found to have lost committed data
        self.compaction_errors = 0
        # Cleans compacted topics' remote segments (the leader's; None: no log cleaner).
        self.compactor = compactor

    def set_fetch_timeout_ms(self, timeout_ms: int) -> None:
        """A new ``remote.fetch.max.wait.ms`` at runtime (KIP-226): remote reads that start
        from now on are bounded by it."""
        self.reads.fetch_timeout_s = timeout_ms / 1000

    # The components' counters, read through the manager as before (stats(), metrics).

    @property
    def uploaded_segments(self) -> int:
        return self.copier.uploaded_segments

    @property
    def uploaded_bytes(self) -> int:
        return self.copier.uploaded_bytes

    @property
    def deleted_segments(self) -> int:
        return self.retention.deleted_segments

    @property
    def orphans_removed(self) -> int:
        return self.retention.orphans_removed

    @property
    def fetched_bytes(self) -> int:
        return self.reads.fetched_bytes

    @property
    def fetch_errors(self) -> int:
        return self.reads.fetch_errors

    @property
    def corrupt_ranges(self) -> int:
        return self.reads.corrupt_ranges

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
        if self._cycle_running or self._closing:
            return
        self._cycle_running = True
        self._cycle_done = asyncio.Event()
        try:
            await self._delete_deleted_topics()
            for state in list(self.partitions.values()):
                if state.log.closed or self._closing:
                    continue
                try:
                    await self._cycle_partition(state)
                    if state.problem is not None:
                        log.info("%s: remote tier reachable again", state.name)
                        state.problem = None
                except RuntimeError:
                    if not self._closing:
                        raise
                    return  # the worker stopped under an abandoned upload (``stop``)
                except (RemoteStorageError, CorruptSegmentError, OSError, ValueError) as exc:
                    self.copy_errors += 1
                    if isinstance(exc, CorruptManifestError):
                        # Nothing is provably remote while the manifest cannot be read, so
                        # local retention must delete nothing because of it (issue 4,
                        # "Failures"); the last good snapshot still serves remote reads.
                        state.log.remote_end_offset = 0
                    self._report(state, exc)
            self.cycles += 1
        finally:
            self._cycle_running = False
            self._cycle_done.set()

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
                self._worker, self.retention.discard_previous_topic, state, manifest
            )
        state.manifest = manifest
        self._publish(state)
        self._check_not_fenced(state, state.manifest)
        if scan:
            await loop.run_in_executor(
                self._worker, self.retention.remove_orphans, state, state.leader_epoch()
            )
        state.cycles += 1
        eligible = self.copier.eligible(state)
        step = self.copier.parallelism
        for n in range(0, len(eligible), step):
            if self._closing:
                return  # stopping: what is left goes at the next start
            # A segment that cannot be offloaded ends the batch: the ones before it still
            # go, in order (the manifest never has a gap), then its error is reported.
            batch: list[SegmentFiles] = []
            problem: Exception | None = None
            for segment in eligible[n : n + step]:
                try:
                    batch.append(SegmentFiles.of(segment, state.log))
                except Exception as exc:  # raised once the prefix is in
                    problem = exc
                    break
            if batch:
                try:
                    state.manifest = await loop.run_in_executor(
                        self._worker, self.copier.upload_batch, state, batch, state.leader_epoch()
                    )
                finally:
                    self._publish(state)  # a failed batch may still have committed its prefix
            if problem is not None:
                raise problem
        doomed = self.retention.candidates(state)
        if doomed:
            state.manifest = await loop.run_in_executor(
                self._worker, self.retention.delete, state, doomed, state.leader_epoch()
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
        try:
            self._worker.submit(write)
        except RuntimeError:  # stopped (``stop`` gave up waiting): the next start re-reads
            log.warning("%s: stopping; %s not updated", state.name, path)

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

    async def _delete_deleted_topics(self) -> None:
        loop = asyncio.get_running_loop()
        for item in sorted(self.deleted_partitions, key=str):
            topic, topic_id, partition = item
            try:
                await loop.run_in_executor(
                    self._worker, self.retention.delete_partition_data, topic, topic_id, partition
                )
                self.deleted_partitions.discard(item)
            except (RemoteStorageError, OSError, ValueError) as exc:
                log.warning("%s-%d: deleting remote data: %s (will retry)", topic, partition, exc)

    # -- retention (remote_retention) ----------------------------------------------------

    async def advance_log_start_offset(self, state: TieredPartition, offset: int) -> int:
        """DeleteRecords reaching into the remote tier: the remote log start moves now
        (committed), and the next cycle deletes the segments wholly below it. Returns
        the whole log's start offset afterwards."""
        loop = asyncio.get_running_loop()
        # On failure the next cycle re-reads what was (or was not) stored.
        await loop.run_in_executor(self._worker, self.retention.raise_log_start, state, offset)
        return max(offset, state.earliest_offset())

    # -- reads (remote_reads) -------------------------------------------------------------

    async def read(
        self, state: TieredPartition, offset: int, max_bytes: int, min_one_batch: bool = True
    ) -> FileSlice | bytes | None:
        """``RemoteReads.read``: batches from the remote segment holding ``offset`` (or the
        next one that has any), None when none from ``offset`` on has a batch; ``b""``
        (nothing, read again later) while the fetch quota is used up.

        The quota (KIP-956) is Kafka's: while the bytes fetches read from the remote tier
        are over ``remote.log.manager.fetch.max.bytes.per.second``, a fetch gets no remote
        bytes (an empty answer for the partition, no error; the consumer asks again);
        otherwise the read goes ahead whole and its bytes count, so one read may put the
        quota in debt (a token bucket with one second of credit at most).

        Raises:
            RemoteStorageError, TimeoutError: the store cannot answer.
        """
        throttle = self.fetch_throttle
        if throttle is not None and throttle.credit() <= 0:
            self.fetches_throttled += 1
            return b""
        found = await self.reads.read(state, offset, max_bytes, min_one_batch)
        if throttle is not None and found:
            throttle.wait_for(records_size(found))
        return found

    async def offset_for_timestamp(
        self, state: TieredPartition, timestamp: int
    ) -> tuple[int, int] | None:
        """First remote record at or after ``timestamp`` (remote-only segments)."""
        return await self.reads.offset_for_timestamp(state, timestamp)

    async def aborted_transactions(
        self, topic: str, partition: int, fetch_offset: int, upper_bound_offset: int
    ) -> list[AbortedTxn]:
        """``RemoteReads.aborted_transactions`` of a tracked partition (none when it is not
        tracked): the remote aborted transactions of ``[fetch_offset, upper_bound_offset)``.

        Raises:
            RemoteStorageError: an index cannot be fetched or decoded.
            TimeoutError: the store did not answer within remote.fetch.max.wait.ms.
        """
        state = self.partitions.get((topic, partition))
        return await self.reads.aborted_transactions(state, fetch_offset, upper_bound_offset)

    async def aux_state_before(
        self, topic: str, partition: int, topic_id: uuid.UUID, offset: int
    ) -> AuxState:
        """``RemoteReads.aux_state_before``: the producer state and leader-epoch history a
        replica restarting empty at its leader's local log start ``offset`` needs (KIP-405).

        Raises:
            RemoteStorageError: the store cannot answer, or no committed segment holds
                ``offset - 1`` yet (retriable).
        """
        return await self.reads.aux_state_before(topic, partition, topic_id, offset)

    # -- lifecycle -----------------------------------------------------------------------

    def close(self) -> None:
        """Release the threads and the cache, when no cycle runs (tools, tests driving
        cycles themselves); a running broker calls ``stop``."""
        self._closing = True
        self._worker.shutdown(wait=True, cancel_futures=True)
        self.copier.close()
        self.reads.close()
        self.cache.close()  # its chunks may be kept by the next start

    async def stop(self, timeout_s: float = CLOSE_TIMEOUT_S) -> None:
        """Stop: the cycle in progress finishes the upload it is in (with its manifest
        commit and its ``remote-log-checkpoint``) and starts no other; then the threads
        stop, after the checkpoint writes queued on the worker. Before, the worker was
        shut down under the running cycle, whose next step then failed with "cannot
        schedule new futures after shutdown" (a traceback) and lost that cycle's
        checkpoint (issue 20, item 12). Bounded by ``timeout_s``: an upload still running
        then is abandoned (its objects are orphans the next start removes) and the
        shutdown goes on, with a WARNING."""
        self._closing = True
        if self._cycle_running and self._cycle_done is not None:
            try:
                await asyncio.wait_for(self._cycle_done.wait(), timeout_s)
            except TimeoutError:
                log.warning(
                    "stopping with a remote upload still running after %.0f s; it is "
                    "retried at the next start",
                    timeout_s,
                )
        # Off the event loop: an abandoned upload may still hold the worker.
        await asyncio.to_thread(self._worker.shutdown, wait=not self._cycle_running)
        self.copier.close()
        self.reads.close()
        self.cache.close()  # its chunks may be kept by the next start

    def stats(self) -> dict[str, Any]:
        return {
            "uploaded_segments": self.uploaded_segments,
            "uploaded_bytes": self.uploaded_bytes,
            "deleted_segments": self.deleted_segments,
            "orphans_removed": self.orphans_removed,
            "fetched_bytes": self.fetched_bytes,
            "copy_errors": self.copy_errors,
            "cycles": self.cycles,
            "fetch_errors": self.fetch_errors,
            "corrupt_ranges": self.corrupt_ranges,
            "lost_ranges": self.lost_ranges,
            "cache_hits": self.cache.hits,
            "cache_misses": self.cache.misses,
            # Requests to the store (what object storage bills; issue 24).
            "remote_get_requests": self.store.requests.gets,
            "remote_put_requests": self.store.requests.puts,
            "read_ahead_chunks": 0 if self.read_ahead is None else self.read_ahead.started,
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
