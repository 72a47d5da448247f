"""The transaction coordinator: transactional ids, their producer epochs and two-phase commit.

Kafka's ``TransactionCoordinator`` (KIP-98) for transactions v1 (KIP-890 part 1). This
module owns the state machine of every transactional id whose ``__transaction_state``
partition this broker leads, and the rules of the client APIs:

* InitProducerId: a producer id and a bumped epoch, which fences older instances; an open
  transaction of a previous instance is aborted first (epoch fence, answered
  CONCURRENT_TRANSACTIONS so the new instance retries once the abort is complete);
* AddPartitionsToTxn / AddOffsetsToTxn: partitions join the ongoing transaction (written
  before the answer, so a coordinator failover still knows where markers must go);
  ``verify`` answers partition leaders' KIP-890 check that a partition was added before
  they accept a transactional produce;
* EndTxn: PrepareCommit/PrepareAbort is written, the markers of the transaction's
  ``__consumer_offsets`` partitions are written, the answer goes out, then markers are
  written to every other partition (``send_markers``) and CompleteCommit/CompleteAbort
  closes it. Kafka answers before any marker: a KIP-447 client's OffsetFetch asks for
  stable offsets and retries until the group's transactional offsets are settled, but
  clients without ``require_stable`` (aiokafka, kafka-python) read the old offsets for as
  long as the markers take. Settling the group's offsets first makes ``committed()`` right
  after ``commitTransaction()`` right for every client, for one marker write's latency;
  the answer waits at most ``OFFSETS_SETTLE_TIMEOUT_S`` (the markers go on after it);
* timeouts: an ongoing transaction older than its timeout is aborted with a bumped epoch;
  ids idle for ``transactional.id.expiration.ms`` are deleted (tombstone).

State changes are durable before they count: the changed copy is written through
``write`` (``__transaction_state``, acks=all) and adopted only if that succeeds; while a
write is in flight the id is ``pending`` and other requests for it answer
CONCURRENT_TRANSACTIONS. Everything runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

from tierlog.broker.group.placement import partition_for
from tierlog.broker.txn.id_pattern import IdPattern
from tierlog.broker.txn.log_codec import TxnLogValue, TxnState
from tierlog.broker.txn.metadata import MAX_EPOCH, NO_EPOCH, TxnMetadata
from tierlog.protocol.errors import ErrorCode
from tierlog.util.clock import Clock

log = logging.getLogger(__name__)
E = ErrorCode
S = TxnState
OFFSETS_TOPIC = "__consumer_offsets"
# How long EndTxn waits for the group offsets' markers before answering anyway.
OFFSETS_SETTLE_TIMEOUT_S = 5.0

TopicPartition = tuple[str, int]
# (txn partition, coordinator epoch, transactional id, value or None for a tombstone)
# -> Kafka error code, 0 once durable.
WriteState = Callable[[int, int, str, TxnLogValue | None], Awaitable[int]]
# (producer id, epoch, coordinator epoch, commit, partitions, still coordinator?) -> None
# once every partition has its marker (or the coordinator lost the partition).
SendMarkers = Callable[
    [int, int, int, bool, frozenset[TopicPartition], Callable[[], bool]], Awaitable[None]
]


@dataclass(frozen=True, slots=True)
class TxnConfig:
    """The coordinator's settings (Kafka's ``transaction.*`` broker keys)."""

    num_partitions: int = 50
    max_timeout_ms: int = 900_000
    id_expiration_ms: int = 604_800_000


@dataclass(frozen=True, slots=True)
class InitResult:
    error: int
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(slots=True)
class _TxnPartition:
    """The transactional ids of one loaded ``__transaction_state`` partition."""

    coordinator_epoch: int
    txns: dict[str, TxnMetadata] = field(default_factory=dict)


class TransactionCoordinator:
    """Args:
    write: durably stores an id's new state (see ``WriteState``).
    send_markers: writes COMMIT/ABORT markers to the partitions (see ``SendMarkers``).
    next_producer_id: a fresh producer id.
    config: partitions and limits.
    clock: wall time for the transaction times.
    """

    def __init__(
        self,
        write: WriteState,
        send_markers: SendMarkers,
        next_producer_id: Callable[[], Awaitable[int]],
        config: TxnConfig,
        *,
        clock: Clock,
    ) -> None:
        self.write = write
        self.send_markers = send_markers
        self.next_producer_id = next_producer_id
        self.config = config
        self.clock = clock
        self._loaded: dict[int, _TxnPartition] = {}
        self._loading: set[int] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    # -- placement and loading -----------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        """Kafka's ``abs(transactionalId.hashCode) % transaction.state.log.num.partitions``."""
        return partition_for(transactional_id, self.config.num_partitions)

    def begin_loading(self, partition: int) -> None:
        self._loading.add(partition)

    def load_partition(
        self,
        partition: int,
        coordinator_epoch: int,
        entries: Iterable[tuple[str, TxnLogValue | None]],
    ) -> int:
        """Become coordinator of ``partition``: replay its records (last value per id wins,
        tombstones delete), then finish the transactions caught between prepare and
        complete (their markers are sent again; markers are idempotent for readers).
        Returns the number of ids loaded."""
        self.unload_partition(partition)
        part = _TxnPartition(coordinator_epoch)
        for transactional_id, value in entries:
            if value is None:
                part.txns.pop(transactional_id, None)
            else:
                part.txns[transactional_id] = TxnMetadata.from_stored(transactional_id, value)
        self._loading.discard(partition)
        self._loaded[partition] = part
        for md in part.txns.values():
            if md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                log.info(
                    "finishing the %s of %r (producer %d epoch %d) left by the previous "
                    "coordinator",
                    md.state.display_name,
                    md.transactional_id,
                    md.producer_id,
                    md.producer_epoch,
                )
                self._spawn_completion(partition, part, md)
        return len(part.txns)

    def unload_partition(self, partition: int) -> None:
        """No longer coordinator: forget the ids (in-flight completions stop by themselves)."""
        self._loading.discard(partition)
        self._loaded.pop(partition, None)

    def owns(self, transactional_id: str) -> bool:
        """Whether this broker coordinates the id (loaded, or loading its partition)."""
        partition = self.partition_for(transactional_id)
        return partition in self._loaded or partition in self._loading

    def _owner(self, transactional_id: str) -> tuple[int, int, _TxnPartition | None]:
        partition = self.partition_for(transactional_id)
        if partition in self._loading:
            return E.coordinator_load_in_progress, partition, None
        part = self._loaded.get(partition)
        if part is None:
            return E.not_coordinator, partition, None
        return 0, partition, part

    def _existing(
        self, transactional_id: str, producer_id: int, epoch: int, fenced: int
    ) -> tuple[int, int, _TxnPartition | None, TxnMetadata | None]:
        code, partition, part = self._owner(transactional_id)
        if part is None:
            return code, partition, None, None
        md = part.txns.get(transactional_id)
        if md is None or md.producer_id != producer_id:
            return E.invalid_producer_id_mapping, partition, part, None
        if md.producer_epoch != epoch:
            return fenced, partition, part, None
        return 0, partition, part, md

    async def _write(
        self, partition: int, part: _TxnPartition, md: TxnMetadata, written: TxnMetadata
    ) -> int:
        md.pending = written.state
        try:
            code = await self.write(
                partition, part.coordinator_epoch, md.transactional_id, written.stored()
            )
        except Exception:
            log.exception("writing the state of %r failed", md.transactional_id)
            code = E.unknown_server_error
        if self._loaded.get(partition) is not part:
            md.pending = None
            return E.not_coordinator
        if code:
            md.pending = None
            return code
        md.adopt(written)
        return 0

    # -- InitProducerId ------------------------------------------------------------------

    async def init_producer_id(
        self,
        transactional_id: str,
        timeout_ms: int,
        expected_producer_id: int = -1,
        expected_epoch: int = -1,
        *,
        fenced: int = E.producer_fenced,
    ) -> InitResult:
        if not transactional_id:
            return InitResult(E.invalid_request)
        if timeout_ms <= 0 or timeout_ms > self.config.max_timeout_ms:
            return InitResult(E.invalid_transaction_timeout)
        code, partition, part = self._owner(transactional_id)
        if part is None:
            return InitResult(code)
        md = part.txns.get(transactional_id)
        if md is None:
            producer_id = await self.next_producer_id()
            if self._loaded.get(partition) is not part:
                return InitResult(E.not_coordinator)
            md = part.txns.get(transactional_id)
            if md is None:
                now = self.clock.milliseconds()
                md = TxnMetadata(
                    transactional_id, producer_id, NO_EPOCH, timeout_ms, last_update_ms=now
                )
                part.txns[transactional_id] = md
        if md.pending is not None:
            return InitResult(E.concurrent_transactions)
        if expected_producer_id >= 0:
            if md.producer_id == expected_producer_id and md.last_producer_epoch == expected_epoch:
                if md.state == S.EMPTY:
                    # A retry whose first answer was lost: the bump already happened.
                    return InitResult(0, md.producer_id, md.producer_epoch)
            elif md.producer_id != expected_producer_id or md.producer_epoch != expected_epoch:
                return InitResult(fenced)
        if md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT, S.DEAD, S.PREPARE_EPOCH_FENCE):
            return InitResult(E.concurrent_transactions)
        now = self.clock.milliseconds()
        if md.state == S.ONGOING:
            # A previous instance left a transaction open: fence it and abort it; the new
            # instance retries and gets its epoch once the abort is complete.
            written = md.with_changes(
                state=S.PREPARE_ABORT,
                producer_epoch=min(md.producer_epoch + 1, MAX_EPOCH),
                last_producer_epoch=md.producer_epoch,
                last_update_ms=now,
            )
            code = await self._write(partition, part, md, written)
            if code == 0:
                self._spawn_completion(partition, part, md)
            return InitResult(code or E.concurrent_transactions)
        producer_id, epoch = md.producer_id, md.producer_epoch + 1
        if epoch > MAX_EPOCH:
            producer_id, epoch = await self.next_producer_id(), 0
            if self._loaded.get(partition) is not part:
                return InitResult(E.not_coordinator)
            if md.pending is not None:
                return InitResult(E.concurrent_transactions)
        written = md.with_changes(
            state=S.EMPTY,
            producer_id=producer_id,
            producer_epoch=epoch,
            last_producer_epoch=md.producer_epoch,
            timeout_ms=timeout_ms,
            partitions=set(),
            start_ms=-1,
            last_update_ms=now,
        )
        code = await self._write(partition, part, md, written)
        if code:
            if md.producer_epoch == NO_EPOCH and part.txns.get(transactional_id) is md:
                del part.txns[transactional_id]  # never stored: forget it
            return InitResult(code)
        return InitResult(0, md.producer_id, md.producer_epoch)

    # -- AddPartitionsToTxn / AddOffsetsToTxn ----------------------------------------------

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        partitions: Iterable[TopicPartition],
        *,
        fenced: int = E.producer_fenced,
    ) -> int:
        """Add ``partitions`` to the ongoing transaction (starting it). One code for all."""
        wanted = set(partitions)
        code, partition, part, md = self._existing(transactional_id, producer_id, epoch, fenced)
        if md is None or part is None:
            return code
        if md.pending is not None or md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return E.concurrent_transactions
        if md.state not in (S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            return E.invalid_txn_state
        if md.state == S.ONGOING and wanted <= md.partitions:
            return 0
        now = self.clock.milliseconds()
        written = md.with_changes(
            state=S.ONGOING,
            partitions=md.partitions | wanted,
            start_ms=md.start_ms if md.state == S.ONGOING else now,
            last_update_ms=now,
        )
        return await self._write(partition, part, md, written)

    def verify(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> dict[TopicPartition, int]:
        """KIP-890 part 1: is each partition in ``transactional_id``'s ongoing transaction
        for this producer id and epoch? 0 when it is; INVALID_TXN_STATE when not (the
        produce that asked would otherwise open a transaction no marker will close)."""
        wanted = list(partitions)
        code, _, _, md = self._existing(
            transactional_id, producer_id, epoch, E.invalid_producer_epoch
        )
        if md is None:
            return dict.fromkeys(wanted, code)
        ongoing = md.state == S.ONGOING
        return {tp: 0 if ongoing and tp in md.partitions else E.invalid_txn_state for tp in wanted}

    # -- EndTxn ----------------------------------------------------------------------------

    async def end_txn(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        commit: bool,
        *,
        fenced: int = E.producer_fenced,
    ) -> int:
        code, partition, part, md = self._existing(transactional_id, producer_id, epoch, fenced)
        if md is None or part is None:
            return code
        if md.pending is not None:
            return E.concurrent_transactions
        state = md.state
        if state == S.ONGOING:
            written = md.with_changes(
                state=S.PREPARE_COMMIT if commit else S.PREPARE_ABORT,
                last_update_ms=self.clock.milliseconds(),
            )
            code = await self._write(partition, part, md, written)
            if code == 0:
                offsets_settled = self._spawn_completion(partition, part, md)
                try:
                    await asyncio.wait_for(
                        asyncio.shield(offsets_settled), OFFSETS_SETTLE_TIMEOUT_S
                    )
                except TimeoutError:
                    log.info(
                        "%r: answering EndTxn before its group offsets' markers were written",
                        transactional_id,
                    )
            return code
        # Retries of a finished or finishing end are answered; the other end is refused.
        if state == S.COMPLETE_COMMIT:
            return 0 if commit else E.invalid_txn_state
        if state == S.COMPLETE_ABORT:
            return 0 if not commit else E.invalid_txn_state
        if state == S.PREPARE_COMMIT:
            return E.concurrent_transactions if commit else E.invalid_txn_state
        if state == S.PREPARE_ABORT:
            return E.concurrent_transactions if not commit else E.invalid_txn_state
        return E.invalid_txn_state

    # -- markers and completion ------------------------------------------------------------

    def _spawn_completion(
        self, partition: int, part: _TxnPartition, md: TxnMetadata
    ) -> asyncio.Future[None]:
        """Start completing the transaction; the future resolves once the markers of its
        ``__consumer_offsets`` partitions are written (or that was given up)."""
        loop = asyncio.get_running_loop()
        offsets_settled: asyncio.Future[None] = loop.create_future()
        task = loop.create_task(self._complete(partition, part, md, offsets_settled))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return offsets_settled

    async def _complete(
        self,
        partition: int,
        part: _TxnPartition,
        md: TxnMetadata,
        offsets_settled: asyncio.Future[None],
    ) -> None:
        commit = md.state == S.PREPARE_COMMIT
        target = S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT

        def still_coordinator() -> bool:
            return self._loaded.get(partition) is part

        everything = frozenset(md.partitions)
        offsets = frozenset(tp for tp in everything if tp[0] == OFFSETS_TOPIC)
        try:
            for group in (offsets, everything - offsets):
                if group:
                    await self.send_markers(
                        md.producer_id,
                        md.producer_epoch,
                        part.coordinator_epoch,
                        commit,
                        group,
                        still_coordinator,
                    )
                if not offsets_settled.done():
                    offsets_settled.set_result(None)
            delay = 0.05
            while still_coordinator() and md.state != target:
                if md.pending is None:
                    written = md.with_changes(
                        state=target, partitions=set(), last_update_ms=self.clock.milliseconds()
                    )
                    if await self._write(partition, part, md, written) == 0:
                        return
                await asyncio.sleep(delay)
                delay = min(1.0, delay * 2)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("completing the transaction of %r failed", md.transactional_id)
        finally:
            if not offsets_settled.done():
                offsets_settled.set_result(None)

    async def close(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._loaded.clear()

    # -- background tasks ------------------------------------------------------------------

    async def abort_timed_out(self) -> int:
        """Abort, with a bumped epoch (fencing the producer), every ongoing transaction
        older than its timeout. Returns how many aborts began."""
        now = self.clock.milliseconds()
        started = 0
        for partition, part in list(self._loaded.items()):
            for md in list(part.txns.values()):
                if (
                    md.state != S.ONGOING
                    or md.pending is not None
                    or md.start_ms + md.timeout_ms >= now
                ):
                    continue
                log.info(
                    "aborting the transaction of %r (producer %d epoch %d): older than its "
                    "timeout of %d ms",
                    md.transactional_id,
                    md.producer_id,
                    md.producer_epoch,
                    md.timeout_ms,
                )
                written = md.with_changes(
                    state=S.PREPARE_ABORT,
                    producer_epoch=min(md.producer_epoch + 1, MAX_EPOCH),
                    last_producer_epoch=md.producer_epoch,
                    last_update_ms=now,
                )
                if await self._write(partition, part, md, written) == 0:
                    self._spawn_completion(partition, part, md)
                    started += 1
        return started

    async def expire_ids(self) -> int:
        """Delete ids with no transaction that were idle ``id_expiration_ms``."""
        now = self.clock.milliseconds()
        removed = 0
        for partition, part in list(self._loaded.items()):
            for md in list(part.txns.values()):
                if (
                    md.state not in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
                    or md.pending is not None
                    or md.last_update_ms + self.config.id_expiration_ms > now
                ):
                    continue
                md.pending = S.DEAD
                try:
                    code = await self.write(
                        partition, part.coordinator_epoch, md.transactional_id, None
                    )
                except Exception:
                    # Like ``_write``: a failed tombstone leaves the id as it was, not
                    # pending (which would answer CONCURRENT_TRANSACTIONS until a reload).
                    log.exception("expiring %r failed", md.transactional_id)
                    code = E.unknown_server_error
                finally:
                    md.pending = None
                if code == 0 and part.txns.get(md.transactional_id) is md:
                    del part.txns[md.transactional_id]
                    removed += 1
        return removed

    # -- DescribeTransactions / ListTransactions -------------------------------------------

    def describe(self, transactional_id: str) -> tuple[int, TxnMetadata | None]:
        code, _, part = self._owner(transactional_id)
        if part is None:
            return code, None
        md = part.txns.get(transactional_id)
        if md is None:
            return E.transactional_id_not_found, None
        return 0, md

    def list(
        self,
        states: frozenset[TxnState] | None = None,
        producer_ids: frozenset[int] | None = None,
        min_duration_ms: int = -1,
        id_pattern: IdPattern | None = None,
    ) -> list[TxnMetadata]:
        """The ids matching every filter given (ListTransactions; ``id_pattern`` must
        match the whole id, KIP-1152)."""
        now = self.clock.milliseconds()
        found = []
        for part in self._loaded.values():
            for md in part.txns.values():
                if states and md.state not in states:
                    continue
                if id_pattern is not None and not id_pattern.matches(md.transactional_id):
                    continue
                if producer_ids and md.producer_id not in producer_ids:
                    continue
                if min_duration_ms >= 0 and (
                    md.state != S.ONGOING or now - md.start_ms < min_duration_ms
                ):
                    continue
                found.append(md)
        return sorted(found, key=lambda md: md.transactional_id)
