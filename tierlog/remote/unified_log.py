"""One partition's log over both tiers (Kafka's ``UnifiedLog`` idea): the local segments of
the hot tail and the remote segments committed to the manifest, seen as one offset range.

This is the one place that decides which tier serves an offset. Request handlers only
translate the protocol; they ask this class for records, offsets and the log start, and
never look at the remote tier themselves::

    earliest_offset()        local_log_start_offset         log_end_offset
         |---- remote only ----|------ local (and maybe remote too) ------|
         read from object store  read from segment files (sendfile slices)

What it does not own: the high watermark (the partition's replication state passes it in
as the upper bound of every read and lookup) and the remote manifest (the
``RemoteLogManager`` keeps it; this class reads its immutable snapshots).

Not thread-safe: used from the broker's event loop, like ``Log``.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass

from tierlog.local.errors import OffsetOutOfRangeError
from tierlog.local.file_lease import records_size
from tierlog.local.leader_epoch import EpochEntry, end_offset_for
from tierlog.local.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, Log
from tierlog.local.segment import FileSlice
from tierlog.records.errors import RecordsError
from tierlog.records.header import HEADER_SIZE, parse_header
from tierlog.records.txn_index_codec import AbortedTxn
from tierlog.remote import manifest as mf
from tierlog.remote.api import (
    RemoteDataLostError,
    RemoteStorageError,
    RemoteStorageUnavailableError,
)
from tierlog.remote.remote_log_manager import RemoteLogManager
from tierlog.remote.remote_reads import AuxState
from tierlog.remote.tiered_partition import TieredPartition

# KIP-405/KIP-1005 special timestamps: earliest local offset, latest tiered offset, first
# offset not uploaded yet.
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5
EARLIEST_PENDING_UPLOAD_TIMESTAMP = -6


@dataclass(slots=True)
class LogReadResult:
    """Records read from one tier: a sendfile slice of a local segment or of a cached
    remote chunk, bytes fetched from the remote tier, or None when there is nothing (yet)
    at the offset."""

    records: FileSlice | bytes | None
    log_start_offset: int

    @property
    def size(self) -> int:
        return records_size(self.records)


def records_end_offset(records: FileSlice | bytes | None) -> int | None:
    """The offset after the last batch that starts in ``records`` (a read's answer), None
    when there is none: a fetch's upper bound for its aborted transactions. A batch cut
    short at the end counts whole, as Kafka's ``fetchUpperBoundOffset`` (listing one
    aborted transaction too many is harmless; one too few shows aborted records)."""
    if records is None:
        return None
    end: int | None = None
    if isinstance(records, FileSlice):
        position, limit = records.position, records.position + records.size
        while position < limit:
            raw = os.pread(records.fd, HEADER_SIZE, position)
            try:
                header = parse_header(raw)
            except RecordsError:
                break
            end = header.next_offset
            position += header.size
        return end
    position = 0
    while position + HEADER_SIZE <= len(records):
        try:
            header = parse_header(records, position)
        except RecordsError:
            break
        end = header.next_offset
        position += header.size
    return end


class UnifiedLog:
    """Args:
    local: the partition's local ``Log`` (hot tail, appends).
    remote: the broker's remote log manager, or None when the remote tier is off.
    """

    def __init__(self, local: Log, remote: RemoteLogManager | None, topic: str, partition: int):
        self.local = local
        self.remote = remote
        self.topic = topic
        self.partition = partition

    # -- offsets -------------------------------------------------------------------------

    @property
    def log_end_offset(self) -> int:
        return self.local.log_end_offset

    @property
    def local_log_start_offset(self) -> int:
        return self.local.log_start_offset

    def tiered(self) -> TieredPartition | None:
        """The remote tier's view of this partition, when it is tracked (a tiered topic
        this broker leads)."""
        if self.remote is None or not self.local.config.remote_storage_enable:
            return None
        return self.remote.get(self.topic, self.partition)

    def earliest_offset(self) -> int:
        """The whole log's start: the remote log start when remote data exists."""
        tiered = self.tiered()
        return tiered.earliest_offset() if tiered is not None else self.local.log_start_offset

    def remote_tier_unknown(self) -> bool:
        """True for a tiered partition whose manifest this broker has not read: not tracked
        yet (start-up) or unreadable since start-up (store down, manifest corrupt). Its
        remote range, and so its earliest offset, is unknown until then."""
        if self.remote is None or not self.local.config.remote_storage_enable:
            return False
        tiered = self.remote.get(self.topic, self.partition)
        return tiered is None or tiered.manifest is None

    def _require_remote_known(self) -> None:
        # What lies below the local log start is unknown, not gone: answering
        # OFFSET_OUT_OF_RANGE would make consumers with auto.offset.reset jump past the
        # remote data; a retriable error makes them wait for it.
        if self.remote_tier_unknown():
            raise RemoteStorageUnavailableError(
                f"{self.topic}-{self.partition}: remote tier not loaded yet"
            )

    # -- reads ---------------------------------------------------------------------------

    async def read(
        self, offset: int, max_bytes: int, *, max_offset: int, min_one_batch: bool
    ) -> LogReadResult:
        """Batches from ``offset`` below ``max_offset`` (the high watermark), from whichever
        tier holds it: offsets below the local log start (and, for a compacted topic, below
        the remote end: ``_cleaned_remotely``) come from the remote tier (off the event
        loop), the rest from local segment files as sendfile slices.

        Raises:
            OffsetOutOfRangeError: below the earliest offset or past the log end.
            RemoteStorageError, TimeoutError: the remote tier cannot answer (retriable).
        """
        local = self.local
        if offset < local.log_start_offset or self._cleaned_remotely(offset):
            self._require_remote_known()
            tiered = self.tiered()
            lost = tiered.lost() if tiered is not None else None
            if lost is not None and lost[0] <= offset < lost[1]:
                raise RemoteDataLostError(
                    f"{self.topic}-{self.partition}: offsets {lost[0]}-{lost[1] - 1} were "
                    "committed to the remote tier and it lost them"
                )
            earliest = self.earliest_offset()
            if tiered is not None and self.remote is not None and offset >= earliest:
                remote = await self.remote.read(tiered, offset, max_bytes, min_one_batch)
                if remote is not None:
                    return LogReadResult(remote, earliest)
                # No remote segment from ``offset`` on has a batch left (compaction removed
                # the rest of the range): the next batch is local, past the remote part.
                offset = max(offset, local.log_start_offset, tiered.remote_end())
        chunk = local.read(offset, max_bytes, max_offset=max_offset, min_one_batch=min_one_batch)
        return LogReadResult(chunk, self.earliest_offset())

    async def collect_aborted_transactions(
        self, fetch_offset: int, upper_bound_offset: int
    ) -> list[AbortedTxn]:
        """The aborted transactions a read_committed fetch of [fetch_offset,
        upper_bound_offset) must list, from both tiers: the remote ``.txnindex`` objects
        when the range starts below the local log start, and the local segments'; merged,
        without duplicates (a range both tiers hold), by first offset.

        Raises:
            RemoteStorageError, TimeoutError: the remote tier cannot answer (retriable).
        """
        local = self.local
        found: set[AbortedTxn] = set()
        remote = self.remote
        if fetch_offset < local.log_start_offset and remote is not None:
            found.update(
                await remote.aborted_transactions(
                    self.topic, self.partition, fetch_offset, upper_bound_offset
                )
            )
        found.update(local.collect_aborted_transactions(fetch_offset, upper_bound_offset))
        return sorted(found, key=lambda txn: (txn.first_offset, txn.last_offset))

    def _cleaned_remotely(self, offset: int) -> bool:
        """A compacted tiered log's offsets below the remote end are read from the remote
        tier even while the local copy still holds them: that copy is not cleaned (the
        remote one is), and two reads of one range must not differ."""
        if not self.local.config.compact:
            return False
        tiered = self.tiered()
        return tiered is not None and offset < tiered.remote_end()

    async def remote_aux_state(self, topic_id: uuid.UUID, offset: int) -> AuxState:
        """The producer state and leader-epoch history the remote tier holds just below
        ``offset``, for a replica restarting at its leader's local log start (KIP-405).

        Raises:
            RemoteStorageError: no remote tier, or it cannot answer yet.
        """
        if self.remote is None:
            raise RemoteStorageError(
                f"{self.topic}-{self.partition}: this broker has no remote tier", retriable=False
            )
        return await self.remote.aux_state_before(self.topic, self.partition, topic_id, offset)

    # -- offset lookups ------------------------------------------------------------------

    async def list_offset(self, timestamp: int, high_watermark: int) -> tuple[int, int]:
        """``(offset, timestamp)`` answering one ListOffsets query; (-1, -1) when none.

        Earliest is the whole log's start (remote), -4 the local log start, -5 the last
        offset in the remote tier, -6 the first not uploaded yet (KIP-405, KIP-1005);
        timestamp lookups search remote-only segments first. Only records below the high
        watermark are visible.
        """
        local = self.local
        tiered = self.tiered()
        if timestamp == LATEST_TIMESTAMP:
            return high_watermark, -1
        if (timestamp == EARLIEST_TIMESTAMP or timestamp >= 0) and local.log_start_offset > 0:
            # The local log start is not the earliest offset while the manifest is unread,
            # and a timestamp may fall in the remote range: a retriable error rather than
            # a local answer that skips remote data.
            self._require_remote_known()
        if timestamp == EARLIEST_TIMESTAMP:
            return self.earliest_offset(), -1
        if timestamp == EARLIEST_LOCAL_TIMESTAMP:
            return local.log_start_offset, -1
        if timestamp == LATEST_TIERED_TIMESTAMP:
            return (tiered.remote_end() - 1 if tiered and tiered.committed() else -1), -1
        if timestamp == EARLIEST_PENDING_UPLOAD_TIMESTAMP:
            return (max(tiered.remote_end(), local.log_start_offset) if tiered else -1), -1
        if timestamp >= 0 and tiered is not None and self.remote is not None:
            found_remote = await self.remote.offset_for_timestamp(tiered, timestamp)
            if found_remote is not None:
                # Remote segments lie below the high watermark, but the caller's bound may
                # be lower (read_committed: the LSO, while a marker is not yet replicated).
                return found_remote if found_remote[0] < high_watermark else (-1, -1)
        if timestamp == MAX_TIMESTAMP or timestamp >= 0:
            found = local.offset_for_timestamp(timestamp)
            if found is None or found[0] >= high_watermark:
                return -1, -1
            return found[0], found[1]
        raise OffsetOutOfRangeError(timestamp, local.log_start_offset, local.log_end_offset)

    def epoch_at(self, offset: int) -> int:
        """The leader epoch in force at ``offset`` (the cache's last entry starting at or
        before it), -1 when unknown."""
        epoch = -1
        for entry in self.local.leader_epoch_cache.entries:
            if entry.start_offset > offset:
                break
            epoch = entry.epoch
        return epoch

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch (KIP-101/279): ``(epoch, end offset)`` of the largest epoch
        <= ``leader_epoch``. An epoch older than the local history (local retention cut
        it) is looked up in the remote tier's: answering with the local log start instead
        would let a follower keep records that diverged before it."""
        entries = self.local.leader_epoch_cache.entries
        tiered = self.tiered()
        older = not entries or leader_epoch < entries[0].epoch
        if older and tiered is not None and tiered.manifest is not None:
            below = entries[0].start_offset if entries else self.log_end_offset
            remote = mf.leader_epoch_history(tiered.manifest, below)
            entries = [EpochEntry(*pair) for pair in remote] + entries
        return end_offset_for(entries, leader_epoch, self.log_end_offset)

    # -- changes -------------------------------------------------------------------------

    async def advance_log_start_offset(self, offset: int) -> int:
        """DeleteRecords: nothing below ``offset`` is readable afterwards, on either tier;
        returns the whole log's start offset (the new low watermark)."""
        low_watermark = self.local.advance_log_start_offset(offset)
        tiered = self.tiered()
        if self.remote is not None and tiered is not None:
            self.remote.acknowledge_loss(tiered, offset)
        if self.remote is not None and tiered is not None and tiered.committed():
            low_watermark = await self.remote.advance_log_start_offset(tiered, offset)
        return low_watermark
