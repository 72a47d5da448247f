"""One partition hosted by this broker: its local log, its leadership and the fetches
waiting for data on it (long polls).

The high watermark lives in the ``Log``; this class decides when it moves: with the ISR being
this broker alone, to the log end after each append; with followers (the cluster work), to
the smallest log end among the ISR. Not thread-safe: used from the broker's event loop.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass

from tierlog.broker.coordination.api import PartitionState
from tierlog.local.errors import LogError
from tierlog.local.log import AppendInfo, Log
from tierlog.local.segment import FileSlice


class PartitionError(LogError):
    """Carries the Kafka error code to answer with."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


# Kafka error codes raised from here (tierlog.protocol.errors.ErrorCode has them all).
NOT_LEADER_OR_FOLLOWER = 6
NOT_ENOUGH_REPLICAS = 19
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75


@dataclass(slots=True)
class ReadResult:
    records: FileSlice | None
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int

    @property
    def size(self) -> int:
        return self.records.size if self.records is not None else 0


class Partition:
    def __init__(
        self,
        topic: str,
        topic_id: uuid.UUID,
        index: int,
        log: Log,
        state: PartitionState,
        broker_id: int,
    ) -> None:
        self.topic = topic
        self.topic_id = topic_id
        self.index = index
        self.log = log
        self.state = state
        self.broker_id = broker_id
        self._waiters: set[asyncio.Future[None]] = set()
        self._maybe_advance_high_watermark()

    @property
    def is_leader(self) -> bool:
        return self.state.leader == self.broker_id

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

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

    def append(
        self, records: bytes | memoryview, acks: int, min_insync_replicas: int
    ) -> AppendInfo:
        """Append a producer's batches as leader; for a single-replica ISR acks=all is met
        as soon as the local write returns."""
        if not self.is_leader:
            raise PartitionError(
                NOT_LEADER_OR_FOLLOWER, f"broker {self.broker_id} does not lead {self}"
            )
        if acks == -1 and len(self.state.isr) < min_insync_replicas:
            raise PartitionError(
                NOT_ENOUGH_REPLICAS,
                f"{self}: ISR {self.state.isr} is smaller than min.insync.replicas "
                f"{min_insync_replicas}",
            )
        info = self.log.append(records, self.state.leader_epoch)
        if info.batches:
            self._maybe_advance_high_watermark()
            self._wake()
        return info

    def _maybe_advance_high_watermark(self) -> None:
        if self.state.isr == [self.broker_id]:
            self.log.high_watermark = self.log.log_end_offset

    def read(
        self, offset: int, max_bytes: int, *, read_committed: bool, min_one_batch: bool
    ) -> ReadResult:
        """Records from ``offset`` up to the high watermark (also the last stable offset:
        there are no open transactions). Raises OffsetOutOfRangeError."""
        bound = self.log.high_watermark
        chunk = self.log.read(offset, max_bytes, max_offset=bound, min_one_batch=min_one_batch)
        return ReadResult(chunk, bound, bound, self.log.log_start_offset)

    def waiter(self) -> asyncio.Future[None]:
        """A future resolved at the next append (a long-polling fetch waits on it)."""
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
