"""ProducerStateManager: Kafka's transaction rules (KIP-98, KIP-890 part 1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tierlog.local.producer_state import (
    CompletedTxn,
    EndTxnMarker,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    ProducerStateManager,
    TransactionCoordinatorFencedError,
    end_txn_marker,
    snapshot_path,
)
from tierlog.records.builder import ControlType, Record, build_batch, build_control_batch
from tierlog.records.header import BatchHeader, parse_header
from tierlog.records.producer_snapshot import decode_snapshot
from tierlog.util.clock import ManualClock

T0 = 1_700_000_000_000


def data(
    pid: int, *, epoch: int = 0, seq: int = 0, n: int = 1, txn: bool = True, base: int = 0
) -> BatchHeader:
    records = [Record(b"k%d" % i, b"v", timestamp=T0) for i in range(n)]
    return parse_header(
        build_batch(
            records,
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
            transactional=txn,
            base_offset=base,
        )
    )


def marker_batch(
    pid: int, *, commit: bool, epoch: int = 0, coordinator_epoch: int = 0, base: int = 0
) -> bytes:
    return build_control_batch(
        ControlType.COMMIT if commit else ControlType.ABORT,
        producer_id=pid,
        producer_epoch=epoch,
        base_offset=base,
        timestamp=T0,
        coordinator_epoch=coordinator_epoch,
    )


class Appender:
    """Assigns offsets like a log and feeds the manager; returns what it completed."""

    def __init__(self, state: ProducerStateManager) -> None:
        self.state = state
        self.end = 0

    def data(self, pid: int, n: int = 1, **kwargs: object) -> int:
        header = data(pid, n=n, **kwargs)  # type: ignore[arg-type]
        assert self.state.check(header) is None
        first = self.end
        self.state.update(header, first, first + n - 1, T0)
        self.end += n
        return first

    def marker(
        self, pid: int, *, commit: bool, epoch: int = 0, cepoch: int = 0
    ) -> CompletedTxn | None:
        self.state.check_marker(pid, epoch, cepoch)
        raw = marker_batch(pid, commit=commit, epoch=epoch, coordinator_epoch=cepoch)
        marker = end_txn_marker(raw)
        assert marker == EndTxnMarker(commit, cepoch)
        offset = self.end
        self.end += 1
        return self.state.update(parse_header(raw), offset, offset, T0, marker)


@pytest.fixture
def state(tmp_path: Path) -> ProducerStateManager:
    return ProducerStateManager(tmp_path, clock=ManualClock(T0))


def test_end_txn_marker_reads_type_and_coordinator_epoch() -> None:
    assert end_txn_marker(marker_batch(1, commit=True, coordinator_epoch=7)) == EndTxnMarker(
        True, 7
    )
    assert end_txn_marker(marker_batch(1, commit=False, coordinator_epoch=0)) == EndTxnMarker(
        False, 0
    )
    not_a_marker = build_batch([Record(b"\x00", b"x")], control=True)
    assert end_txn_marker(not_a_marker) is None


def test_transactional_batch_opens_a_transaction_and_marker_completes_it(
    state: ProducerStateManager,
) -> None:
    log = Appender(state)
    log.data(5, txn=False, n=2)  # someone else's idempotent batch: no transaction
    assert state.first_unstable_offset is None
    first = log.data(1, n=3)
    assert first == 2
    assert state.first_unstable_offset == 2
    assert state.producers[1].current_txn_first_offset == 2
    log.data(1, seq=3)  # a later batch of the same transaction does not move its start
    assert dict(state.ongoing_transactions) == {1: 2}
    completed = log.marker(1, commit=False)
    assert completed == CompletedTxn(1, 2, 6, True)
    assert state.first_unstable_offset is None
    assert state.producers[1].current_txn_first_offset == -1
    assert state.last_stable_offset(completed) == 7


def test_marker_of_an_empty_transaction_completes_nothing(state: ProducerStateManager) -> None:
    log = Appender(state)
    log.data(1, txn=False)
    assert log.marker(1, commit=True, cepoch=3) is None
    assert state.producers[1].coordinator_epoch == 3


def test_ongoing_transactions_are_ordered_and_lso_skips_the_completed_one(
    state: ProducerStateManager,
) -> None:
    log = Appender(state)
    log.data(1)  # offset 0
    log.data(2)  # offset 1
    log.data(3)  # offset 2
    assert list(state.ongoing_transactions.items()) == [(1, 0), (2, 1), (3, 2)]
    done = log.marker(2, commit=False)  # offset 3
    assert done == CompletedTxn(2, 1, 3, True)
    # The LSO after it is the first *other* ongoing transaction's start.
    assert state.last_stable_offset(done) == 0
    assert state.first_unstable_offset == 0
    done = log.marker(1, commit=True)  # offset 4
    assert done == CompletedTxn(1, 0, 4, False)
    assert state.last_stable_offset(done) == 2
    assert state.first_unstable_offset == 2


def test_non_transactional_batch_inside_a_transaction_is_invalid_txn_state(
    state: ProducerStateManager,
) -> None:
    log = Appender(state)
    log.data(1)
    with pytest.raises(InvalidTxnStateError) as raised:
        state.check(data(1, seq=1, txn=False))
    assert raised.value.code == 48
    # Also from the coordinator (no sequence checks, but transaction state still holds).
    with pytest.raises(InvalidTxnStateError):
        state.check(data(1, seq=-1, txn=False), coordinator=True)
    log.marker(1, commit=True)
    assert state.check(data(1, seq=1, txn=False)) is None


def test_coordinator_batches_skip_sequence_checks_but_open_transactions(
    state: ProducerStateManager,
) -> None:
    log = Appender(state)
    log.data(1, txn=True, seq=0)
    # base sequence -1 and out of order: fine for the coordinator, an old epoch is not.
    assert state.check(data(1, seq=-1), coordinator=True) is None
    with pytest.raises(InvalidProducerEpochError):
        state.check(data(1, seq=-1, epoch=-1), coordinator=True)
    fresh = data(7, seq=-1)
    assert state.check(fresh, coordinator=True) is None
    state.update(fresh, 10, 10, T0)
    assert state.ongoing_transactions[7] == 10


def test_marker_epoch_and_coordinator_fencing(state: ProducerStateManager) -> None:
    log = Appender(state)
    log.data(1, epoch=3)
    with pytest.raises(InvalidProducerEpochError) as raised:
        state.check_marker(1, 2, 0)
    assert raised.value.code == 47
    state.check_marker(1, 3, 0)  # the same epoch is fine
    state.check_marker(1, 4, 0)  # and a newer one (KIP-890: the epoch bump at the end)
    log.marker(1, commit=True, epoch=3, cepoch=5)
    with pytest.raises(TransactionCoordinatorFencedError) as fenced:
        state.check_marker(1, 3, 4)
    assert fenced.value.code == 52
    state.check_marker(1, 3, 5)
    state.check_marker(99, 0, 0)  # unknown producer: nothing to check against


def test_snapshot_round_trip_keeps_the_ongoing_transactions(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path, clock=ManualClock(T0))
    log = Appender(state)
    log.data(2, txn=False)  # 0
    log.data(1, n=2)  # 1-2
    log.data(3)  # 3
    log.marker(3, commit=False, cepoch=4)  # 4
    state.take_snapshot(5)
    rows = {
        row.producer_id: row for row in decode_snapshot(snapshot_path(tmp_path, 5).read_bytes())
    }
    assert rows[1].current_txn_first_offset == 1
    assert (rows[3].current_txn_first_offset, rows[3].coordinator_epoch) == (-1, 4)
    reloaded = ProducerStateManager(tmp_path, clock=ManualClock(T0))
    assert reloaded.load(0, 5) == 5
    assert dict(reloaded.ongoing_transactions) == {1: 1}
    assert reloaded.first_unstable_offset == 1
    with pytest.raises(InvalidTxnStateError):
        reloaded.check(data(1, seq=2, txn=False))
    with pytest.raises(TransactionCoordinatorFencedError):
        reloaded.check_marker(3, 0, 3)
    done = reloaded.update(
        parse_header(marker_batch(1, commit=False)), 5, 5, T0, EndTxnMarker(False, 0)
    )
    assert done == CompletedTxn(1, 1, 5, True)
    assert reloaded.first_unstable_offset is None


def test_rebuild_from_headers_reopens_and_closes_transactions(state: ProducerStateManager) -> None:
    headers = [
        data(1, base=0, n=2),
        data(2, base=2),
        parse_header(marker_batch(1, commit=False, base=3)),
    ]
    markers = {3: EndTxnMarker(False, 0)}
    assert state.rebuild_from(headers, lambda h: markers[h.base_offset]) == 3
    assert dict(state.ongoing_transactions) == {2: 2}
    assert state.map_end_offset == 4
    state.truncate_fully_and_start_at(10)
    assert state.first_unstable_offset is None
