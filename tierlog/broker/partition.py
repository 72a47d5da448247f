"""One partition hosted by this broker: its replication state above its log (Kafka's
``cluster/Partition``), and the fetches waiting for data on it (long polls).

The partition owns what replication decides — leadership, leader epoch, ISR and the high
watermark — while the ``UnifiedLog`` below it owns the bytes on both tiers. The high
watermark is the smallest log end offset among the ISR (with this broker the only ISR
member: its own log end after each append); only records below it are visible to
consumers, offloaded to the remote tier or deleted by retention. It is checkpointed by the
``ReplicaManager`` in Kafka's ``replication-offset-checkpoint`` file and restored from it.

Not thread-safe: used from the broker's event loop.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass

from tierlog.broker.coordination.api import PartitionState
from tierlog.local.errors import LogError
from tierlog.local.log import AppendInfo, Log
from tierlog.local.segment import FileSlice
from tierlog.remote.unified_log import LATEST_TIMESTAMP, UnifiedLog


class PartitionError(LogError):
    """Carries the Kafka error code to answer with."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


# Kafka error codes raised from here (tierlog.protocol.errors.ErrorCode has them all).
OFFSET_OUT_OF_RANGE = 1
NOT_LEADER_OR_FOLLOWER = 6
NOT_ENOUGH_REPLICAS = 19
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75


@dataclass(slots=True)
class ReadResult:
    records: FileSlice | bytes | None
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int

    @property
    def size(self) -> int:
        if self.records is None:
            return 0
        return self.records.size if isinstance(self.records, FileSlice) else len(self.records)


class Partition:
    """Args:
    log: the partition's log over both tiers.
    state: leader, leader epoch and ISR as the coordination metadata has them.
    high_watermark: the checkpointed high watermark, if any (clamped to the log).
    """

    def __init__(
        self,
        topic: str,
        topic_id: uuid.UUID,
        index: int,
        log: UnifiedLog,
        state: PartitionState,
        broker_id: int,
        *,
        high_watermark: int = 0,
    ) -> None:
        self.topic = topic
        self.topic_id = topic_id
        self.index = index
        self.log = log
        self.state = state
        self.broker_id = broker_id
        self._high_watermark = 0
        self._waiters: set[asyncio.Future[None]] = set()
        self._set_high_watermark(high_watermark)
        self._maybe_advance_high_watermark()

    @property
    def local(self) -> Log:
        return self.log.local

    @property
    def is_leader(self) -> bool:
        return self.state.leader == self.broker_id

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch

    # -- the high watermark --------------------------------------------------------------

    @property
    def high_watermark(self) -> int:
        """Offsets below it are committed: replicated to the whole ISR."""
        # The local log start can pass a checkpointed high watermark (a follower that
        # truncated fully, DeleteRecords on the leader): nothing below the start exists.
        return max(self._high_watermark, self.local.log_start_offset)

    @property
    def last_stable_offset(self) -> int:
        # No transactions yet: nothing is pending, so the LSO is the high watermark.
        return self.high_watermark

    def _set_high_watermark(self, offset: int) -> None:
        local = self.local
        self._high_watermark = min(max(offset, local.log_start_offset), local.log_end_offset)

    def _maybe_advance_high_watermark(self) -> None:
        """Leader only: the high watermark is the smallest log end among the ISR; with
        this broker alone in the ISR, its own log end (Kafka's maybeIncrementLeaderHW)."""
        if self.is_leader and self.state.isr == [self.broker_id]:
            new = self.local.log_end_offset
            if new > self._high_watermark:
                self._high_watermark = new
                self._wake()

    def truncate_to(self, offset: int) -> None:
        """Cut the local log at ``offset`` (a follower removing what diverged from its
        leader); the high watermark never stays above the log end."""
        self.local.truncate_to(offset)
        self._set_high_watermark(min(self._high_watermark, self.local.log_end_offset))

    # -- leader operations ---------------------------------------------------------------

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """KIP-320: a client naming an older epoch is fenced, a newer one is ahead of us."""
        if current_leader_epoch < 0:
            return
        if current_leader_epoch < self.state.leader_epoch:
            raise PartitionError(
                FENCED_LEADER_EPOCH, f"leader epoch {current_leader_epoch} is fenced"
            )
        if current_leader_epoch > self.state.leader_epoch:
            raise PartitionError(
                UNKNOWN_LEADER_EPOCH, f"leader epoch {current_leader_epoch} is unknown"
            )

    def _require_leader(self) -> None:
        if not self.is_leader:
            raise PartitionError(
                NOT_LEADER_OR_FOLLOWER, f"broker {self.broker_id} does not lead {self}"
            )

    def append(
        self, records: bytes | memoryview, acks: int, min_insync_replicas: int
    ) -> AppendInfo:
        """Append a producer's batches as leader; for a single-replica ISR acks=all is met
        as soon as the local write returns."""
        self._require_leader()
        if acks == -1 and len(self.state.isr) < min_insync_replicas:
            raise PartitionError(
                NOT_ENOUGH_REPLICAS,
                f"{self}: ISR {self.state.isr} is smaller than min.insync.replicas "
                f"{min_insync_replicas}",
            )
        info = self.local.append(records, self.state.leader_epoch)
        if info.batches:
            self._maybe_advance_high_watermark()
        return info

    async def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        read_committed: bool,
        min_one_batch: bool,
        current_leader_epoch: int = -1,
    ) -> ReadResult:
        """Records from ``offset`` up to the high watermark (the last stable offset for
        ``read_committed``), from whichever tier holds them.

        Raises:
            PartitionError: a fenced or unknown leader epoch.
            OffsetOutOfRangeError, RemoteStorageError, TimeoutError: from the log.
        """
        self.check_leader_epoch(current_leader_epoch)
        bound = self.last_stable_offset if read_committed else self.high_watermark
        result = await self.log.read(
            offset, max_bytes, max_offset=bound, min_one_batch=min_one_batch
        )
        return ReadResult(
            result.records, self.high_watermark, self.last_stable_offset, result.log_start_offset
        )

    async def list_offset(self, timestamp: int, current_leader_epoch: int) -> tuple[int, int, int]:
        """``(offset, timestamp, leader epoch)`` answering one ListOffsets query."""
        self.check_leader_epoch(current_leader_epoch)
        offset, found_ts = await self.log.list_offset(timestamp, self.high_watermark)
        if timestamp == LATEST_TIMESTAMP:
            # Kafka answers the latest offset with the current leader epoch
            # (Partition.fetchOffsetForTimestamp), not the epoch of the last batch, which
            # an empty log does not have.
            epoch = self.leader_epoch
        else:
            epoch = self.log.epoch_at(offset) if offset >= 0 else -1
        return offset, found_ts, epoch

    def end_offset_for_epoch(self, leader_epoch: int, current_leader_epoch: int) -> tuple[int, int]:
        self.check_leader_epoch(current_leader_epoch)
        return self.log.end_offset_for_epoch(leader_epoch)

    async def delete_records(self, offset: int) -> int:
        """DeleteRecords as leader: ``offset`` -1 means the high watermark. Only committed
        records can be deleted (Kafka). Returns the new low watermark."""
        self._require_leader()
        target = self.high_watermark if offset == -1 else offset
        if target < 0 or target > self.high_watermark:
            raise PartitionError(
                OFFSET_OUT_OF_RANGE,
                f"{self}: cannot delete below {target}: the high watermark is "
                f"{self.high_watermark}",
            )
        return await self.log.advance_log_start_offset(target)

    # -- long polls ----------------------------------------------------------------------

    def waiter(self) -> asyncio.Future[None]:
        """A future resolved when the high watermark next moves (a long-polling fetch
        waits on it: records become visible to consumers only then)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.add(future)
        future.add_done_callback(self._waiters.discard)
        return future

    def _wake(self) -> None:
        for future in list(self._waiters):
            if not future.done():
                future.set_result(None)

    def __str__(self) -> str:
        return f"{self.topic}-{self.index}"
