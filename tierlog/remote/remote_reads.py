"""The remote tier's read path (KIP-405's remote fetch), for the remote log manager:
batches and timestamp lookups on the committed remote segments, the aborted transactions
of a read_committed fetch of remote offsets, and the auxiliary state a replica restarting
near its leader's local log start needs (``AuxState``).

Owns the ``remote-fetch`` thread pool (every object-store read of a fetch runs there,
bounded by remote.fetch.max.wait.ms), each partition's LRU of open
``RemoteSegmentReader``s (``TieredPartition.readers``), the decoded remote ``.txnindex``
LRU (``remote_txn_index``) and the fetch counters. After each read through the chunk
cache it asks the ``ReadAhead`` (issue 24) to fetch the partition's next chunks.

Threads: the public methods are coroutines on the event loop. They read only the immutable
``Manifest`` snapshots the ``remote-log`` worker thread publishes
(``TieredPartition.manifest``), or a manifest freshly fetched on the pool, and never write
a manifest: that is the worker's alone (``remote_log_manager``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from tierlog.local.checkpoint import CorruptCheckpointError, decode_checkpoint
from tierlog.local.file_lease import FileSlice, records_size
from tierlog.local.leader_epoch import EpochEntry
from tierlog.records.txn_index_codec import AbortedTxn
from tierlog.remote import manifest as mf
from tierlog.remote.api import (
    CorruptRemoteDataError,
    IndexKind,
    RemoteSegment,
    RemoteStorageError,
    RemoteStore,
)
from tierlog.remote.chunk_cache import ChunkCache, ChunkNotCached
from tierlog.remote.read_ahead import ReadAhead
from tierlog.remote.remote_txn_index import RemoteTxnIndexes
from tierlog.remote.segment_reader import RemoteSegmentReader
from tierlog.remote.tiered_partition import TieredPartition

log = logging.getLogger(__name__)

T = TypeVar("T")
# Readers keep a segment's remote indexes in memory; this many stay open (an LRU).
READER_CACHE_SIZE = 64


@dataclasses.dataclass(frozen=True, slots=True)
class AuxState:
    """KIP-405's auxiliary state of a partition at the end of ``segment``: a replica
    restarts at ``segment.next_offset`` with it."""

    segment: RemoteSegment
    leader_epochs: list[EpochEntry]
    producer_snapshot: bytes | None  # None: the segment was uploaded without one


class RemoteReads:
    """Args:
    store: the remote storage and metadata.
    cache: the on-disk chunk cache of remote reads (unused when the store is local).
    fetch_timeout_s: remote.fetch.max.wait.ms, the bound on one remote read.
    read_ahead: fetches the chunks after each cached read (None: none).
    """

    def __init__(
        self,
        store: RemoteStore,
        cache: ChunkCache,
        fetch_timeout_s: float,
        read_ahead: ReadAhead | None = None,
    ) -> None:
        self.store = store
        self.cache = cache
        self.fetch_timeout_s = fetch_timeout_s
        self.read_ahead = read_ahead
        self._fetchers = ThreadPoolExecutor(2, thread_name_prefix="remote-fetch")
        # What the event loop reads cached chunks into to check them (grows to the
        # largest read; only the loop uses it).
        self._loop_buffer = bytearray()
        self.fetched_bytes = 0
        self.fetch_errors = 0
        # Damaged remote ranges found by reads (each reported once: consumers retry).
        self.corrupt_ranges = 0
        self._reported: set[tuple[str, int]] = set()
        # The remote .txnindex objects, decoded, for read_committed fetches.
        self.txn_indexes = RemoteTxnIndexes(store, self._off_loop)

    def _reader(self, state: TieredPartition, segment: RemoteSegment) -> RemoteSegmentReader:
        with state.readers_lock:  # retention prunes them on the worker thread
            reader = state.readers.get(segment.segment_id)
            if reader is not None:
                state.readers.move_to_end(segment.segment_id)
                return reader
            # A store on the local filesystem is read in place: copying its objects into
            # a local cache would only add a copy (measured: it halved replay speed).
            cache = None if self.store.is_local else self.cache
            reader = RemoteSegmentReader(self.store, segment, cache)
            state.readers[segment.segment_id] = reader
            while len(state.readers) > READER_CACHE_SIZE:
                state.readers.popitem(last=False)
            return reader

    async def _off_loop(self, call: Callable[[], T]) -> T:
        loop = asyncio.get_running_loop()
        return await asyncio.wait_for(
            loop.run_in_executor(self._fetchers, call), self.fetch_timeout_s
        )

    async def read(
        self, state: TieredPartition, offset: int, max_bytes: int, min_one_batch: bool = True
    ) -> FileSlice | bytes | None:
        """Batches from the remote segment holding ``offset``, or from the next one that
        has any when it has none at or after ``offset`` (a compacted segment can lose its
        last records without its range shrinking); every batch checked
        (``RemoteSegmentReader.read``). Empty when the first batch is larger than
        ``max_bytes`` and not ``min_one_batch``; None when no remote segment from
        ``offset`` on has a batch.

        Raises:
            CorruptRemoteDataError: the range is damaged (logged once, with the object,
                offsets and store; never served).
            RemoteStorageError, TimeoutError: the store cannot answer.
        """
        manifest = state.manifest
        segment = mf.segment_for_offset(manifest, offset) if manifest else None
        data: FileSlice | bytes | None = None
        while segment is not None and data is None:
            assert manifest is not None
            reader = self._reader(state, segment)
            start = max(offset, segment.base_offset)
            read = functools.partial(
                self._read_ahead_of, state, manifest, reader, start, max_bytes, min_one_batch
            )
            try:
                try:
                    # A read whose bytes are all in the chunk cache (the read-ahead's
                    # work, or a repeat) is served here, as a sendfile slice of the chunk
                    # file: handing it to a thread and back, and sending a copy, cost
                    # more than the read (a file read into a reused buffer and the CRC,
                    # what a local segment's read costs the loop too).
                    data = read(cached_into=self._loop_buffer)
                except ChunkNotCached:
                    data = await self._off_loop(read)
            except CorruptRemoteDataError as exc:
                self.fetch_errors += 1
                self._report(segment, exc)
                raise
            except (RemoteStorageError, OSError, TimeoutError):
                self.fetch_errors += 1
                raise
            segment = mf.segment_for_offset(manifest, segment.end_offset + 1)
        self.fetched_bytes += records_size(data)
        return data

    def _read_ahead_of(
        self,
        state: TieredPartition,
        manifest: mf.Manifest,
        reader: RemoteSegmentReader,
        offset: int,
        max_bytes: int,
        min_one_batch: bool,
        *,
        cached_into: bytearray | None = None,
    ) -> FileSlice | bytes | None:
        """``reader.read``, then the read-ahead of what follows it: on a fetch thread, or
        on the loop with ``cached_into`` (``reader.read_cached`` with that buffer: a slice
        of a cached chunk, or ``ChunkNotCached`` rather than a wait)."""
        data = (
            reader.read(offset, max_bytes, min_one_batch=min_one_batch)
            if cached_into is None
            else reader.read_cached(offset, max_bytes, cached_into, min_one_batch=min_one_batch)
        )
        if data and self.read_ahead is not None and reader.cache is not None:
            following = [(reader.segment, reader.fetch_from_store)]
            chunk = self.cache.chunk_bytes
            # Bytes the window still wants beyond this segment's end (it starts at the
            # chunk holding the read's end).
            short = self.read_ahead.window_bytes - (
                reader.size - reader.last_read_end // chunk * chunk
            )
            segment = reader.segment
            while short > 0:
                nxt_segment = mf.segment_for_offset(manifest, segment.end_offset + 1)
                if nxt_segment is None:
                    break
                segment = nxt_segment
                following.append((segment, self._reader(state, segment).fetch_from_store))
                short -= segment.size_bytes
            self.read_ahead.advise(following, reader.last_read_end)
        return data

    def _report(self, segment: RemoteSegment, exc: CorruptRemoteDataError) -> None:
        """One ERROR line per damaged range, however often consumers retry it."""
        key = (segment.segment_id, exc.first_offset)
        if key in self._reported:
            return
        self._reported.add(key)
        self.corrupt_ranges += 1
        log.error("%s", exc)

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
        self, state: TieredPartition | None, fetch_offset: int, upper_bound_offset: int
    ) -> list[AbortedTxn]:
        """The aborted transactions a read_committed fetch of remote offsets
        ``[fetch_offset, upper_bound_offset)`` must be told about, from the ``.txnindex``
        objects of the committed segments from the one holding ``fetch_offset`` on
        (Kafka's ``RemoteLogManager.collectAbortedTransactions``): each index's entries
        overlapping the range, in segment order, until an entry's last stable offset
        reaches ``upper_bound_offset`` or the remote segments run out (the local tier's
        indexes are the caller's to add then). Segments without an index are skipped.
        Each index is fetched once off the event loop and kept decoded (an LRU:
        ``tierlog.remote.remote_txn_index``). None (an untracked partition): none.

        Raises:
            RemoteStorageError: an index cannot be fetched or decoded.
            TimeoutError: the store did not answer within remote.fetch.max.wait.ms.
        """
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

    def close(self) -> None:
        """Stop the fetch pool; a read in flight is not waited for."""
        self._fetchers.shutdown(wait=False, cancel_futures=True)
        if self.read_ahead is not None:
            self.read_ahead.close()
