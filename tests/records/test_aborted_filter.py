"""tierlog.records.aborted_filter: Kafka's txn-index search and consumer-side filter."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.txn_data import PIDS, append_transactions
from tierlog.local.config import LogConfig
from tierlog.local.log import Log
from tierlog.records.aborted_filter import AbortedFilter, filter_aborted, search_index
from tierlog.records.builder import ControlType, Record, build_batch, build_control_batch
from tierlog.records.reader import iter_batches_records
from tierlog.records.txn_index_codec import AbortedTxn
from tierlog.util.clock import ManualClock


def values(buf: bytes, ranges: list[tuple[int, int]]) -> list[tuple[int, bytes]]:
    out = []
    for start, end in ranges:
        for header, records in iter_batches_records(buf[start:end]):
            assert not header.is_control
            out += [(r.offset, r.value or b"") for r in records]
    return out


def txn(pid: int, first: int, last: int, lso: int) -> AbortedTxn:
    return AbortedTxn(pid, first, last, lso)


def test_search_index_keeps_overlapping_entries_and_stops_at_the_first_lso_past_the_bound() -> None:
    entries = [
        txn(1, 0, 9, 10),  # ends before the fetch: not listed
        txn(2, 5, 30, 12),  # overlaps
        txn(3, 60, 70, 61),  # starts at or past the bound: not listed, lso reaches it: stop
        txn(4, 0, 80, 90),  # overlaps but is after the stop (Kafka does not look further)
    ]
    assert search_index(entries, 10, 50) == ([entries[1]], True)
    assert search_index(entries[:2], 10, 50) == ([entries[1]], False)
    assert search_index([], 10, 50) == ([], False)


@pytest.fixture
def txn_log(tmp_path: Path) -> Iterator[Log]:
    log = Log(tmp_path / "t-0", LogConfig.from_props({"segment.bytes": 2048}), clock=ManualClock(0))
    yield log
    log.close()


def whole_log(log: Log) -> bytes:
    return b"".join(s.path.read_bytes() for s in log.segments)


def test_filter_drops_exactly_the_aborted_transactions(txn_log: Log) -> None:
    written = append_transactions(txn_log)
    buf = whole_log(txn_log)
    assert written.aborted and written.aborted_offsets
    assert values(buf, filter_aborted(buf, written.aborted)) == written.committed
    # Told nothing, it keeps every data record (read_uncommitted) but still no marker.
    assert values(buf, filter_aborted(buf, [])) == written.all_values


def test_filter_walks_a_log_across_calls_and_chunks(txn_log: Log) -> None:
    """One filter over several buffers (segment by segment, as remote reads are), told of
    the aborted transactions as a later fetch answer would tell them."""
    written = append_transactions(txn_log)
    filt = AbortedFilter(written.aborted[:4])
    filt.add(written.aborted[4:])
    seen = []
    for segment in txn_log.segments:
        buf = segment.path.read_bytes()
        seen += values(buf, filt.kept_ranges(buf))
    assert seen == written.committed


def marker(kind: ControlType, pid: int, offset: int) -> bytes:
    return build_control_batch(
        kind, producer_id=pid, producer_epoch=0, base_offset=offset, timestamp=0
    )


def data(pid: int, offset: int, value: bytes, *, transactional: bool = True) -> bytes:
    if not transactional:
        return build_batch([Record(None, value)], base_offset=offset)
    return build_batch(
        [Record(None, value)], base_offset=offset, producer_id=pid, producer_epoch=0,
        base_sequence=offset, transactional=True,
    )  # fmt: skip


def test_abort_marker_ends_the_producers_aborted_state() -> None:
    """A producer's aborted transaction is followed by a committed one: only the first's
    records go; without the ABORT marker between them both would."""
    pid = PIDS[0]
    head = data(pid, 0, b"aborted-0") + data(pid, 1, b"plain", transactional=False)
    tail = data(pid, 3, b"committed-3") + marker(ControlType.COMMIT, pid, 4)
    aborted = [txn(pid, 0, 2, 3)]
    buf = head + marker(ControlType.ABORT, pid, 2) + tail
    assert [v for _, v in values(buf, filter_aborted(buf, aborted))] == [b"plain", b"committed-3"]
    no_marker = head + tail
    assert [v for _, v in values(no_marker, filter_aborted(no_marker, aborted))] == [b"plain"]
