"""One partition hosted by this broker: its replication state above its log (Kafka's
``cluster/Partition``), and the requests waiting on it (long polls, acks=all produces).

The partition owns what replication decides — leadership, leader epoch, ISR, what the
leader knows of each follower (``replica_progress``) and the high watermark — while the
``UnifiedLog`` below it owns the bytes on both tiers. The high watermark is the smallest
log end offset among the ISR; only records below it are visible to consumers, offloaded to
the remote tier or deleted by retention. It is checkpointed by the ``ReplicaManager`` in
Kafka's ``replication-offset-checkpoint`` file and restored from it.

Transactions (KIP-98): the last stable offset is the first offset of the earliest open
transaction, bounded by the high watermark. On every replica, leader or follower, a
transaction whose marker is not below the high watermark yet still holds it (Kafka's
``unreplicatedTxns`` in ``ProducerStateManager``): until the ISR has the marker, a new
leader might not, and would still show the transaction open. A follower serving
read_committed consumers (KIP-392) must not show them a transaction a truncation could
reopen, and its LSO never goes backwards. read_committed reads stop there and list the
aborted transactions of what they return (from the ``.txnindex`` files of both tiers).
``append_marker`` writes the coordinator's COMMIT/ABORT markers as leader.

Leader side: followers fetch up to the log end (``fetch_for_follower``), which records
their progress, may move the high watermark and may propose adding them to the ISR;
``maybe_shrink_isr`` proposes removing laggards. ISR changes go through ``alter_isr``
(AlterPartition, KIP-497), one at a time. Follower side: the replica fetcher appends the
leader's batches as they are and learns the high watermark from it.

Not thread-safe: used from the broker's event loop.

Past ~600 lines on purpose: like Kafka's ``Partition``, one class owns the transitions
between leader and follower, the high watermark and the ISR proposals, which read and
change the same state on every fetch; follower progress already lives in
``replica_progress``.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from tierlog.broker.coordination.api import PartitionState
from tierlog.broker.replication.replica_progress import UNKNOWN_OFFSET, ReplicaProgress
from tierlog.local.errors import LogError
from tierlog.local.log import AppendInfo, Log
from tierlog.local.segment import FileSlice
from tierlog.protocol.errors import ErrorCode
from tierlog.records.txn_index_codec import AbortedTxn
from tierlog.remote.remote_reads import AuxState
from tierlog.remote.unified_log import LATEST_TIMESTAMP, UnifiedLog, records_end_offset
from tierlog.util.clock import Clock

log = logging.getLogger(__name__)


class PartitionError(LogError):
    """Carries the Kafka error code to answer with."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


# Kafka error codes raised or returned from here, by their protocol names.
NONE = ErrorCode.none
OFFSET_OUT_OF_RANGE = ErrorCode.offset_out_of_range
NOT_LEADER_OR_FOLLOWER = ErrorCode.not_leader_or_follower
REQUEST_TIMED_OUT = ErrorCode.request_timed_out
NOT_ENOUGH_REPLICAS = ErrorCode.not_enough_replicas
NOT_ENOUGH_REPLICAS_AFTER_APPEND = ErrorCode.not_enough_replicas_after_append
FENCED_LEADER_EPOCH = ErrorCode.fenced_leader_epoch
UNKNOWN_LEADER_EPOCH = ErrorCode.unknown_leader_epoch
OFFSET_MOVED_TO_TIERED_STORAGE = ErrorCode.offset_moved_to_tiered_storage

AlterIsr = Callable[["Partition", list[int]], Awaitable[PartitionState | None]]


async def no_isr_change(partition: Partition, isr: list[int]) -> PartitionState | None:
    """The default ``alter_isr``: nothing to ask (a single node's ISR is itself)."""
    return None


@dataclass(slots=True)
class ReadResult:
    records: FileSlice | bytes | None
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    # read_committed reads only: the aborted transactions overlapping what was read
    # (the consumer drops their records); None for other reads.
    aborted_transactions: list[AbortedTxn] | None = None

    @property
    def size(self) -> int:
        if self.records is None:
            return 0
        return self.records.size if isinstance(self.records, FileSlice) else len(self.records)


class Partition:
    """Args:
    log: the partition's log over both tiers.
    state: leader, leader epoch and ISR as the coordination metadata has them.
    broker_id: this broker.
    high_watermark: the checkpointed high watermark, if any (clamped to the log).
    replicas: the assigned replicas (default: the ISR and the leader).
    clock: times follower progress (``milliseconds()``, as Kafka's ``time.milliseconds``);
        default: the log's clock.
    alter_isr: ``async (partition, new_isr) -> PartitionState | None``, from the owner:
        sends AlterPartition naming ``state.leader_epoch`` and ``state.partition_epoch``;
        None (or an exception) means refused. Default: nothing to ask (a single node).
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
        replicas: list[int] | None = None,
        clock: Clock | None = None,
        alter_isr: AlterIsr = no_isr_change,
    ) -> None:
        self.topic = topic
        self.topic_id = topic_id
        self.index = index
        self.log = log
        self.state = state
        self.broker_id = broker_id
        self.replicas = list(replicas) if replicas is not None else _default_replicas(state)
        self.clock = clock or log.local.clock
        self.alter_isr = alter_isr
        self._high_watermark = 0
        self.hosted = True  # False once the broker drops the replica (moved, deleted)
        self._waiters: set[asyncio.Future[None]] = set()
        self._log_end_waiters: set[asyncio.Future[None]] = set()
        self._followers: dict[int, ReplicaProgress] = {}
        self._leader_epoch_start_offset: int | None = None
        # The ISR proposed to the controller and not answered yet (Kafka's PendingExpandIsr
        # / PendingShrinkIsr); a new proposal waits for the answer. ``_isr_generation``
        # tells an answer to a superseded proposal from a current one.
        self._pending_isr: list[int] | None = None
        self._isr_generation = 0
        self._isr_task: asyncio.Task[None] | None = None
        # (first offset, marker offset) of transactions whose marker this replica appended
        # (as leader or follower) and that is not below the high watermark yet: they hold
        # the LSO until it is. Kafka keeps none across a restart either (its snapshots
        # hold only open transactions).
        self._unreplicated_txns: list[tuple[int, int]] = []
        self._set_high_watermark(high_watermark)
        if self.is_leader:
            self._start_leading(new_leader=True)
        self._maybe_advance_high_watermark()

    @property
    def local(self) -> Log:
        return self.log.local

    def replace_log(self, log: UnifiedLog) -> None:
        """Serve from ``log``: the same records, opened again from another log dir
        (AlterReplicaLogDirs). Replication state (high watermark, ISR) is unchanged."""
        self.log = log

    @property
    def is_leader(self) -> bool:
        return self.state.leader == self.broker_id

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch

    def now_ms(self) -> int:
        """The time follower progress is measured in (``maybe_shrink_isr``'s ``now_ms``)."""
        return self.clock.milliseconds()

    # -- leadership ----------------------------------------------------------------------

    def _is_current(self, state: PartitionState) -> bool:
        # A broker never applies an older leader epoch (docs/cluster.md); within one epoch
        # the partition epoch (the state's version, KIP-497) orders ISR changes.
        if state.leader_epoch != self.state.leader_epoch:
            return state.leader_epoch > self.state.leader_epoch
        return state.partition_epoch >= self.state.partition_epoch

    def _in_force(self, state: PartitionState, replicas: list[int]) -> bool:
        # The state applied already, delivered again (the owner re-applies every state on
        # any metadata change): it must not disturb an ISR change in flight.
        current = self.state
        return (
            state.leader == current.leader
            and state.leader_epoch == current.leader_epoch
            and state.partition_epoch == current.partition_epoch
            and state.isr == current.isr
            and replicas == self.replicas
        )

    def make_leader(self, state: PartitionState, replicas: list[int]) -> bool:
        """Apply ``state`` naming this broker leader; False (ignored) if it is older than
        the state applied, True if applied or already in force. Kafka's
        ``Partition.makeLeader``: the epoch starts at the log end in the leader-epoch
        cache, follower progress is reset, the high watermark is recomputed (only ever
        up)."""
        if state.leader != self.broker_id:
            raise ValueError(f"{self}: state {state} does not name broker {self.broker_id}")
        if not self._is_current(state):
            return False
        if self._in_force(state, replicas):
            return True
        new_leader = not self.is_leader or state.leader_epoch != self.state.leader_epoch
        self.state = state
        self.replicas = list(replicas)
        self._drop_pending_isr()
        self._start_leading(new_leader=new_leader)
        self._maybe_advance_high_watermark()
        self._wake_all()  # acks=all waits re-check their epoch
        return True

    def _start_leading(self, *, new_leader: bool) -> None:
        local = self.local
        end = local.log_end_offset
        epoch = self.state.leader_epoch
        # Kafka's makeLeader (KIP-101): followers asking OffsetForLeaderEpoch for an older
        # epoch must learn where it ended, which is where this epoch starts.
        local.leader_epoch_cache.assign(epoch, end)
        self._leader_epoch_start_offset = next(
            (e.start_offset for e in local.leader_epoch_cache.entries if e.epoch == epoch), end
        )
        now = self.now_ms()
        followers: dict[int, ReplicaProgress] = {}
        for replica in self.replicas:
            if replica == self.broker_id:
                continue
            progress = self._followers.get(replica) or ReplicaProgress(replica)
            # A leader new to this epoch resets what it knew (Kafka resets on a new
            # leader; an epoch it did not see may have truncated the followers).
            progress.reset(now, end, new_leader=new_leader, in_sync=replica in self.state.isr)
            followers[replica] = progress
        self._followers = followers

    def make_follower(self, state: PartitionState, replicas: list[int]) -> bool:
        """Apply ``state`` naming another leader (or none); False if older, True if
        applied or already in force. Produce is
        refused from now on; long polls and acks=all waits wake and answer (Kafka's
        ``makeFollower`` completes delayed requests)."""
        if state.leader == self.broker_id:
            raise ValueError(f"{self}: state {state} names this broker leader")
        if not self._is_current(state):
            return False
        if self._in_force(state, replicas):
            return True
        self.state = state
        self.replicas = list(replicas)
        self._drop_pending_isr()
        self._followers = {}
        self._leader_epoch_start_offset = None
        self._wake_all()
        return True

    # -- the high watermark --------------------------------------------------------------

    @property
    def high_watermark(self) -> int:
        """Offsets below it are committed: replicated to the whole ISR."""
        # The local log start can pass a checkpointed high watermark (a follower that
        # truncated fully, DeleteRecords on the leader): nothing below the start exists.
        return max(self._high_watermark, self.local.log_start_offset)

    @property
    def last_stable_offset(self) -> int:
        """Offsets below it are committed and decided: the first offset of the earliest
        open transaction, never above the high watermark (Kafka's
        ``UnifiedLog.lastStableOffset``)."""
        high_watermark = self.high_watermark
        stable = high_watermark
        first_unstable = self.local.first_unstable_offset
        if first_unstable is not None:
            stable = min(first_unstable, stable)
        if self._unreplicated_txns:
            self._unreplicated_txns = [t for t in self._unreplicated_txns if t[1] >= high_watermark]
            for first_offset, _ in self._unreplicated_txns:
                stable = min(stable, max(first_offset, self.local.log_start_offset))
        return stable

    def _set_high_watermark(self, offset: int) -> None:
        local = self.local
        self._high_watermark = min(max(offset, local.log_start_offset), local.log_end_offset)

    def maximal_isr(self) -> list[int]:
        """The ISR as the high watermark must see it: while a change is in flight, the
        current ISR together with the proposed one (Kafka's ``maximalIsr``), so that a
        replica being added already holds the high watermark back and a replica being
        removed still does until the removal is committed."""
        if self._pending_isr is None:
            return self.state.isr
        return list(dict.fromkeys([*self.state.isr, *self._pending_isr]))

    def _maybe_advance_high_watermark(self) -> None:
        """Leader only: the smallest log end among the (maximal) ISR, never lower than
        before (Kafka's ``maybeIncrementLeaderHW``). A follower whose log end is not
        known yet (a new leader's followers before their first fetch) holds it where
        it is."""
        if not self.is_leader:
            return
        new = self.local.log_end_offset
        isr = self.state.isr
        if len(isr) > 1 or self._pending_isr is not None:
            followers = self._followers
            for replica in self.maximal_isr():
                if replica != self.broker_id:
                    progress = followers.get(replica)
                    end = UNKNOWN_OFFSET if progress is None else progress.log_end_offset
                    new = min(new, end)
        if new > self._high_watermark:
            self._high_watermark = new
            self._wake()

    def truncate_to(self, offset: int) -> None:
        """Cut the local log at ``offset`` (a follower removing what diverged from its
        leader); the high watermark never stays above the log end."""
        self.local.truncate_to(offset)
        end = self.local.log_end_offset
        self._set_high_watermark(min(self._high_watermark, end))
        # A truncated marker's transaction is open again in the producer state (which the
        # truncation rebuilt); the markers kept still wait for the high watermark.
        self._unreplicated_txns = [t for t in self._unreplicated_txns if t[1] < end]

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Empty the local log and restart it at ``offset`` (a follower behind its
        leader's log start)."""
        self.local.truncate_fully_and_start_at(offset)
        self._high_watermark = offset
        self._unreplicated_txns = []

    async def remote_aux_state(self, offset: int) -> AuxState:
        """The producer state and leader-epoch history the remote tier holds just below
        ``offset`` (KIP-405), for ``restart_with_aux_state``.

        Raises:
            RemoteStorageError: no remote tier, or it cannot answer yet.
        """
        return await self.log.remote_aux_state(self.topic_id, offset)

    def restart_with_aux_state(self, offset: int, aux: AuxState) -> None:
        """Empty the local log and restart it at ``offset`` (the end of ``aux.segment``,
        at or above the leader's local log start) with the state of everything below it:
        the leader-epoch history (so truncation after a later leader change is exact) and
        the idempotent producers' state (so deduplication survives this replica becoming
        leader)."""
        self.truncate_fully_and_start_at(offset)
        self.local.leader_epoch_cache.restore(
            [e for e in aux.leader_epochs if e.start_offset < offset]
        )
        if aux.producer_snapshot is not None:
            self.local.producer_state.restore_snapshot(offset, aux.producer_snapshot)

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
        self,
        records: bytes | memoryview,
        acks: int,
        min_insync_replicas: int,
        *,
        coordinator: bool = False,
    ) -> AppendInfo:
        """Append a producer's batches as leader. acks=all then waits with
        ``wait_for_replication``; for a single-replica ISR it is met at once.
        ``coordinator``: this broker's group coordinator writes (``Log.append``)."""
        self._require_leader()
        if acks == -1 and len(self.state.isr) < min_insync_replicas:
            raise PartitionError(
                NOT_ENOUGH_REPLICAS,
                f"{self}: ISR {self.state.isr} is smaller than min.insync.replicas "
                f"{min_insync_replicas}",
            )
        info = self.local.append(records, self.state.leader_epoch, coordinator=coordinator)
        if info.batches:
            self._maybe_advance_high_watermark()
            if self._log_end_waiters:
                _resolve(self._log_end_waiters)  # followers' long polls
        return info

    def append_marker(
        self, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool
    ) -> AppendInfo:
        """Write a transaction marker as leader (WriteTxnMarkers), in this leader's epoch;
        acks=all is then ``wait_for_replication(info.last_offset + 1, ...)``.

        Raises:
            PartitionError: NOT_LEADER_OR_FOLLOWER.
            ProducerStateError: INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED.
        """
        self._require_leader()
        stable_before = self.last_stable_offset
        info = self.local.append_marker(
            producer_id, producer_epoch, coordinator_epoch, commit, self.state.leader_epoch
        )
        self._note_completed(info)
        self._maybe_advance_high_watermark()
        if self.last_stable_offset != stable_before:
            self._wake()  # read_committed long polls wait for the LSO
        if self._log_end_waiters:
            _resolve(self._log_end_waiters)
        return info

    def _note_completed(self, info: AppendInfo) -> None:
        # Kafka's ProducerStateManager.completeTxn: an ended transaction stays unstable
        # until its marker is below the high watermark (``last_stable_offset`` drops it).
        for completed in info.completed_txns:
            self._unreplicated_txns.append((completed.first_offset, completed.last_offset))

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
        aborted = None
        if read_committed:
            # Kafka's fetch upper bound: the offset after the last batch returned, or the
            # LSO when nothing was (an empty answer still tells what lies below it).
            end = records_end_offset(result.records)
            upper = bound if end is None else end
            aborted = (
                await self.log.collect_aborted_transactions(offset, upper) if upper > offset else []
            )
        return ReadResult(
            result.records,
            self.high_watermark,
            self.last_stable_offset,
            result.log_start_offset,
            aborted,
        )

    def fetch_for_follower(
        self,
        replica_id: int,
        fetch_offset: int,
        max_bytes: int,
        current_leader_epoch: int,
        *,
        min_one_batch: bool = True,
    ) -> ReadResult:
        """A follower's fetch: batches from ``fetch_offset`` up to the log end, not the
        high watermark (Kafka's FetchIsolation.LOG_END). The fetch offset is the
        follower's log end: it is recorded, may move the high watermark and may propose
        the follower for the ISR. The answer carries the high watermark after that.

        Followers replicate the local tier: ``log_start_offset`` in the answer is the
        local log start. A fetch below it that the remote tier holds gets
        OFFSET_MOVED_TO_TIERED_STORAGE (KIP-405): the follower rebuilds its producer and
        leader-epoch state from the remote tier and restarts at the local log start.

        Raises:
            PartitionError: a fenced or unknown epoch; NOT_LEADER_OR_FOLLOWER when this
                broker does not lead or ``replica_id`` is not an assigned replica (Kafka's
                ``updateFollowerFetchState``); OFFSET_MOVED_TO_TIERED_STORAGE.
            OffsetOutOfRangeError: ``fetch_offset`` outside the log.
        """
        self.check_leader_epoch(current_leader_epoch)
        self._require_leader()
        progress = self._followers.get(replica_id)
        if progress is None:
            raise PartitionError(
                NOT_LEADER_OR_FOLLOWER,
                f"{self}: broker {replica_id} is not a follower (replicas {self.replicas})",
            )
        local = self.local
        if fetch_offset < local.log_start_offset and self.log.earliest_offset() <= fetch_offset:
            raise PartitionError(
                OFFSET_MOVED_TO_TIERED_STORAGE,
                f"{self}: offset {fetch_offset} is in the remote tier only "
                f"(local log start {local.log_start_offset})",
            )
        leader_end = local.log_end_offset
        now = self.now_ms()
        records = local.read(fetch_offset, max_bytes, min_one_batch=min_one_batch)
        progress.update_fetch_state(fetch_offset, now, leader_end)
        self._maybe_expand_isr(progress)
        self._maybe_advance_high_watermark()
        return ReadResult(
            records, self.high_watermark, self.last_stable_offset, local.log_start_offset
        )

    def follower(self, replica_id: int) -> ReplicaProgress | None:
        """What this leader knows of follower ``replica_id``."""
        return self._followers.get(replica_id)

    # -- the ISR -------------------------------------------------------------------------

    @property
    def pending_isr(self) -> list[int] | None:
        """The ISR proposed and not answered yet, if any."""
        return self._pending_isr

    def _maybe_expand_isr(self, progress: ReplicaProgress) -> None:
        # Kafka's maybeExpandIsr / isFollowerInSync: an assigned replica outside the ISR
        # joins once it has reached the high watermark and the start of this leader's
        # epoch (so it holds nothing from an older leader that this one truncated).
        replica = progress.broker_id
        if self._pending_isr is not None or replica in self.state.isr:
            return
        end = progress.log_end_offset
        epoch_start = self._leader_epoch_start_offset
        if end >= self.high_watermark and epoch_start is not None and end >= epoch_start:
            self._propose_isr([*self.state.isr, replica])

    def maybe_shrink_isr(self, now_ms: int, lag_time_max_ms: int) -> list[int] | None:
        """Propose removing the followers in the ISR that have not caught up for longer
        than ``lag_time_max_ms`` (replica.lag.time.max.ms; Kafka's ``maybeShrinkIsr``).
        ``now_ms`` is on this partition's clock (``now_ms()``). Returns the proposed ISR,
        or None when nothing changes (not leader, a change in flight, all in sync)."""
        if not self.is_leader or self._pending_isr is not None:
            return None
        leader_end = self.local.log_end_offset
        out_of_sync = set()
        for replica in self.state.isr:
            if replica == self.broker_id:
                continue
            progress = self._followers.get(replica)
            if progress is None or not progress.is_caught_up(leader_end, now_ms, lag_time_max_ms):
                out_of_sync.add(replica)
        if not out_of_sync:
            return None
        proposed = [r for r in self.state.isr if r not in out_of_sync]
        self._propose_isr(proposed)
        return proposed

    def _propose_isr(self, proposed: list[int]) -> None:
        # At most one change in flight (Kafka's pending ISR state); the answer, or its
        # failure, clears it.
        self._pending_isr = proposed
        self._isr_generation += 1
        self._isr_task = asyncio.get_running_loop().create_task(
            self._send_isr_change(proposed, self._isr_generation)
        )

    async def _send_isr_change(self, proposed: list[int], generation: int) -> None:
        try:
            result = await self.alter_isr(self, list(proposed))
        except Exception as exc:  # refused or unreachable: proposed again later
            log.warning("%s: ISR change to %s failed: %s", self, proposed, exc)
            result = None
        if generation != self._isr_generation:
            return  # leadership was applied meanwhile; this answer is superseded
        self._pending_isr = None
        self._isr_task = None
        # Kafka's handleAlterPartitionUpdate: only an answer for this leader's epoch, not
        # older than the state applied, is taken.
        if (
            result is not None
            and result.leader == self.broker_id
            and result.leader_epoch == self.state.leader_epoch
            and result.partition_epoch >= self.state.partition_epoch
        ):
            self.state = result
        self._maybe_advance_high_watermark()
        self._wake()  # acks=all waits re-check the ISR size

    def _drop_pending_isr(self) -> None:
        self._pending_isr = None
        self._isr_generation += 1
        self._isr_task = None

    async def settle_isr(self) -> None:
        """Wait for the ISR change in flight, if any, to be answered (tests, shutdown)."""
        task = self._isr_task
        if task is not None:
            await asyncio.shield(task)

    # -- acks=all ------------------------------------------------------------------------

    def _replication_outcome(self, required_offset: int, leader_epoch: int) -> int | None:
        # Kafka's checkEnoughReplicasReachOffset: done once the high watermark reaches the
        # offset, with an error if the ISR is then below min.insync.replicas.
        if not self.hosted or not self.is_leader or self.state.leader_epoch != leader_epoch:
            return NOT_LEADER_OR_FOLLOWER
        if self.high_watermark < required_offset:
            return None
        if len(self.state.isr) < self.local.config.min_insync_replicas:
            return NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return NONE

    async def wait_for_replication(self, required_offset: int, timeout_s: float) -> int:
        """acks=all (Kafka's DelayedProduce): wait until the high watermark reaches
        ``required_offset`` (the produced batch's last offset + 1). Returns a Kafka error
        code: 0, NOT_ENOUGH_REPLICAS_AFTER_APPEND (the ISR shrank below
        min.insync.replicas meanwhile), REQUEST_TIMED_OUT, or NOT_LEADER_OR_FOLLOWER
        (leadership moved). Woken by high-watermark moves and ISR or leadership changes."""
        epoch = self.state.leader_epoch
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            outcome = self._replication_outcome(required_offset, epoch)
            if outcome is not None:
                return outcome
            remaining = deadline - loop.time()
            if remaining <= 0:
                return REQUEST_TIMED_OUT
            future = self.waiter()
            done, _ = await asyncio.wait({future}, timeout=remaining)
            if not done:
                future.cancel()

    # -- follower operations -------------------------------------------------------------

    def append_as_follower(self, records: bytes | memoryview) -> AppendInfo:
        """Append batches fetched from the leader as they are (offsets, leader epochs,
        CRCs); Kafka's ``appendRecordsToFollowerOrFutureReplica``."""
        if self.is_leader:
            raise PartitionError(
                NOT_LEADER_OR_FOLLOWER, f"{self}: the leader does not append as follower"
            )
        local = self.local
        limit = local.config.segment_bytes
        if len(records) <= limit:
            info = local.append_as_follower(records)
            self._note_completed(info)
            return info
        # One append goes into one segment, so a fetch larger than segment.bytes (a topic
        # with small segments) is appended in runs of whole batches that each fit.
        info = AppendInfo()
        for run in _runs_of_batches(memoryview(records), limit):
            part = local.append_as_follower(run)
            self._note_completed(part)
            if info.first_offset < 0:
                info.first_offset = part.first_offset
            info.last_offset = part.last_offset
            info.record_count += part.record_count
            info.size += part.size
            info.batches += part.batches
            info.completed_txns += part.completed_txns
        return info

    def update_follower_high_watermark(self, leader_high_watermark: int) -> int:
        """A follower's high watermark is its leader's, bounded by its own log end
        (Kafka's ReplicaFetcherThread.processPartitionData); returns it."""
        if not self.is_leader:
            before = self._high_watermark
            self._set_high_watermark(min(leader_high_watermark, self.local.log_end_offset))
            if self._high_watermark != before:
                self._wake()
        return self.high_watermark

    def update_follower_log_start_offset(self, leader_log_start_offset: int) -> int:
        """A follower's log start follows its leader's, so that DeleteRecords (and, on a
        tiered topic, the leader's local retention, which removes only what the remote
        tier holds) reach every replica: a later leader never serves records a client
        deleted. Bounded by the high watermark, as Kafka's
        ``maybeIncrementLogStartOffset``. Returns the local log start."""
        local = self.local
        target = min(leader_log_start_offset, self.high_watermark)
        if not self.is_leader and target > local.log_start_offset:
            local.advance_log_start_offset(target)
        return local.log_start_offset

    # -- offsets -------------------------------------------------------------------------

    async def list_offset(
        self, timestamp: int, current_leader_epoch: int, *, read_committed: bool = False
    ) -> tuple[int, int, int]:
        """``(offset, timestamp, leader epoch)`` answering one ListOffsets query. What a
        consumer may read bounds the answer (Kafka's ``fetchOffsetForTimestamp``): the
        high watermark, or for ``read_committed`` the last stable offset, which is then
        also the latest offset; a timestamp found at or past it is no answer (-1)."""
        self.check_leader_epoch(current_leader_epoch)
        bound = self.last_stable_offset if read_committed else self.high_watermark
        offset, found_ts = await self.log.list_offset(timestamp, bound)
        if timestamp == LATEST_TIMESTAMP:
            # Kafka answers the latest offset with the current leader epoch
            # (Partition.fetchOffsetForTimestamp), not the epoch of the last batch, which
            # an empty log does not have.
            epoch = self.leader_epoch
        else:
            epoch = self.log.epoch_at(offset) if offset >= 0 else -1
        return offset, found_ts, epoch

    def end_offset_for_epoch(self, leader_epoch: int, current_leader_epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch, answered by the leader only (Kafka's
        ``lastOffsetForLeaderEpoch`` with fetchOnlyFromLeader): a follower's cache may
        still hold what its leader truncated."""
        self.check_leader_epoch(current_leader_epoch)
        self._require_leader()
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

    # -- waiting -------------------------------------------------------------------------

    def waiter(self, *, log_end: bool = False) -> asyncio.Future[None]:
        """A future resolved when the high watermark next moves (consumers' long polls,
        acks=all), or with ``log_end`` when the leader next appends (followers' long
        polls); both also on leadership changes."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiters = self._log_end_waiters if log_end else self._waiters
        waiters.add(future)
        future.add_done_callback(waiters.discard)
        return future

    def _wake(self) -> None:
        _resolve(self._waiters)

    def stop_hosting(self) -> None:
        """The broker no longer hosts this replica (reassigned away, topic deleted): what
        waits on it answers now (acks=all: NOT_LEADER_OR_FOLLOWER, so producers retry on
        the new leader) instead of at its timeout (Kafka's StopReplica does the same)."""
        self.hosted = False
        self._wake_all()

    def _wake_all(self) -> None:
        _resolve(self._waiters)
        _resolve(self._log_end_waiters)

    def __str__(self) -> str:
        return f"{self.topic}-{self.index}"


def _resolve(futures: set[asyncio.Future[None]]) -> None:
    for future in list(futures):
        if not future.done():
            future.set_result(None)


def _default_replicas(state: PartitionState) -> list[int]:
    members = [*state.isr, state.leader]
    return [r for r in dict.fromkeys(members) if r >= 0]


def _runs_of_batches(records: memoryview, limit: int) -> list[memoryview]:
    """``records`` (whole batches) cut between batches into runs of at most ``limit``
    bytes; a batch larger than ``limit`` is a run of its own (the log refuses it)."""
    runs: list[memoryview] = []
    start = position = 0
    while position + 12 <= len(records):
        size = 12 + int.from_bytes(records[position + 8 : position + 12], "big", signed=True)
        if position > start and position + size - start > limit:
            runs.append(records[start:position])
            start = position
        position += size
    if start < len(records):
        runs.append(records[start:])
    return runs
