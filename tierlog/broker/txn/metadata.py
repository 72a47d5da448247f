"""One transactional id's state in the coordinator's memory, and its stored form.

Kafka's ``TransactionMetadata``: the producer id and epoch the id maps to, the transaction's
state, the partitions in it and its times. ``pending`` is the state being written to
``__transaction_state``; while it is set every other request for the id answers
CONCURRENT_TRANSACTIONS (Kafka's ``pendingState``), so one write per id is ever in flight.
Plain data and rules; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tierlog.broker.txn.log_codec import TxnLogValue, TxnState

# Kafka bumps to a new producer id before the epoch would reach Short.MaxValue (KIP-360).
MAX_EPOCH = 0x7FFF - 1
NO_PRODUCER_ID = -1
NO_EPOCH = -1

# Which state each transition may start from (Kafka's TransactionState.validPreviousStates).
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    TxnState.EMPTY: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.ONGOING: frozenset(
        {TxnState.ONGOING, TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}
    ),
    TxnState.PREPARE_COMMIT: frozenset({TxnState.ONGOING}),
    TxnState.PREPARE_ABORT: frozenset(
        {TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE, TxnState.EMPTY}
    ),
    TxnState.COMPLETE_COMMIT: frozenset({TxnState.PREPARE_COMMIT}),
    TxnState.COMPLETE_ABORT: frozenset({TxnState.PREPARE_ABORT}),
    TxnState.DEAD: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.PREPARE_EPOCH_FENCE: frozenset({TxnState.ONGOING}),
}

COMPLETE = frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT})


@dataclass(slots=True)
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: set[tuple[str, int]] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    # The epoch before the last bump: a producer retrying InitProducerId with it after a
    # lost answer gets the current epoch back instead of PRODUCER_FENCED (KIP-360).
    last_producer_epoch: int = NO_EPOCH
    pending: TxnState | None = None

    def stored(self) -> TxnLogValue:
        return TxnLogValue(
            self.producer_id,
            self.producer_epoch,
            self.timeout_ms,
            self.state,
            tuple(sorted(self.partitions)),
            self.last_update_ms,
            self.start_ms,
        )

    @classmethod
    def from_stored(cls, transactional_id: str, value: TxnLogValue) -> TxnMetadata:
        return cls(
            transactional_id,
            value.producer_id,
            value.producer_epoch,
            value.timeout_ms,
            value.state,
            set(value.partitions),
            value.start_ms,
            value.last_update_ms,
        )

    def with_changes(self, **changes: object) -> TxnMetadata:
        """A copy to write; the live entry changes only once the write is durable."""
        copy = TxnMetadata(
            self.transactional_id,
            self.producer_id,
            self.producer_epoch,
            self.timeout_ms,
            self.state,
            set(self.partitions),
            self.start_ms,
            self.last_update_ms,
            self.last_producer_epoch,
        )
        for name, value in changes.items():
            setattr(copy, name, value)
        if "state" in changes and self.state not in VALID_PREVIOUS[copy.state]:
            raise ValueError(f"{self.transactional_id}: {self.state.name} -> {copy.state.name}")
        return copy

    def adopt(self, written: TxnMetadata) -> None:
        """The write of ``written`` is durable: take its state."""
        self.producer_id = written.producer_id
        self.producer_epoch = written.producer_epoch
        self.timeout_ms = written.timeout_ms
        self.state = written.state
        self.partitions = set(written.partitions)
        self.start_ms = written.start_ms
        self.last_update_ms = written.last_update_ms
        self.last_producer_epoch = written.last_producer_epoch
        self.pending = None
