"""``read_leader`` over a compacted log's gaps, against a scripted leader (no Spark): a
Fetch that answers from the next batch kept, an empty batch, and a log whose last offsets
were all cleaned away are read without a data-loss error; truncation still is one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tierlog.client import FetchResult
from tierlog.client.log_client import READ_COMMITTED, AbortedTransaction
from tierlog.compaction.batch_filter import empty_batch
from tierlog.records.builder import ControlType, Record, build_batch, build_control_batch
from tierlog.records.header import parse_header
from tierlog.spark import split_readers
from tierlog.spark.discovery import SourceError
from tierlog.spark.planning import LeaderSplit, RemoteSplit


def _batch(base: int, values: list[bytes], **producer: int) -> bytes:
    data = bytearray(build_batch([Record(b"k", v, timestamp=1) for v in values], **producer))
    data[0:8] = base.to_bytes(8, "big")  # base offset, outside the CRC'd bytes
    return bytes(data)


class ScriptedLeader:
    """Answers each Fetch from ``log`` (base offset -> batch bytes) as a broker does: the
    batches from the one holding the offset, up to the high watermark."""

    def __init__(
        self,
        log: dict[int, bytes],
        high_watermark: int,
        *,
        last_stable_offset: int | None = None,
        aborted: tuple[AbortedTransaction, ...] = (),
    ) -> None:
        self.log, self.high_watermark = log, high_watermark
        # read_committed answers: up to the LSO, with every aborted transaction listed.
        self.lso = high_watermark if last_stable_offset is None else last_stable_offset
        self.aborted = aborted
        self.fetched: list[int] = []
        self.isolation: list[int] = []

    def __call__(self, *_args: Any, **_kwargs: Any) -> ScriptedLeader:
        return self

    def __enter__(self) -> ScriptedLeader:
        return self

    def __exit__(self, *_exc: object) -> None:
        return None

    def fetch(
        self, topic: str, partition: int, offset: int, max_bytes: int, isolation_level: int = 0
    ) -> FetchResult:
        self.fetched.append(offset)
        self.isolation.append(isolation_level)
        end = self.lso if isolation_level == READ_COMMITTED else self.high_watermark
        batches = [
            data for base, data in sorted(self.log.items())
            if parse_header(data).last_offset >= offset and base < end
        ]  # fmt: skip
        if isolation_level != READ_COMMITTED:
            return FetchResult(b"".join(batches), self.high_watermark, 0)
        return FetchResult(b"".join(batches), self.high_watermark, 0, self.lso, self.aborted)


def _read(
    monkeypatch: pytest.MonkeyPatch,
    leader: ScriptedLeader,
    start: int,
    end: int,
    *,
    read_committed: bool = False,
) -> list:
    monkeypatch.setattr(split_readers, "LogClient", leader)
    split = LeaderSplit("t", 0, start, end)
    rows = []
    for batch in split_readers.read_leader(split, "unused:9092", read_committed=read_committed):
        offsets, values = batch.column("offset").to_pylist(), batch.column("value").to_pylist()
        rows += list(zip(offsets, values, strict=True))
    return rows


def test_gaps_and_empty_batches_are_not_data_loss(monkeypatch: pytest.MonkeyPatch) -> None:
    kept = _batch(10, [b"a", b"b"])  # offsets 10, 11
    emptied = empty_batch(parse_header(_batch(12, [b"x"] * 3, producer_id=7, producer_epoch=0,
                                              base_sequence=0)))  # fmt: skip
    tail = _batch(40, [b"z"])  # offset 40; 15..39 were cleaned away
    leader = ScriptedLeader({10: kept, 12: emptied, 40: tail}, high_watermark=41)
    assert _read(monkeypatch, leader, 0, 41) == [(10, b"a"), (11, b"b"), (40, b"z")]
    assert _read(monkeypatch, leader, 15, 30) == []  # a split wholly inside a gap


def test_a_log_whose_last_offsets_were_cleaned_away(monkeypatch: pytest.MonkeyPatch) -> None:
    # Offsets 12..19 were tombstones past their delete horizon: nothing is left below the
    # high watermark, and the split ends there.
    leader = ScriptedLeader({10: _batch(10, [b"a", b"b"])}, high_watermark=20)
    assert _read(monkeypatch, leader, 0, 20) == [(10, b"a"), (11, b"b")]
    assert _read(monkeypatch, leader, 13, 20) == []


def test_a_truncated_log_is_still_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    leader = ScriptedLeader({10: _batch(10, [b"a", b"b"])}, high_watermark=12)
    with pytest.raises(SourceError, match="truncated"):
        _read(monkeypatch, leader, 0, 20)


def _txn(base: int, value: bytes, pid: int) -> bytes:
    record = Record(b"k", value, timestamp=1)
    data = bytearray(
        build_batch(
            [record], producer_id=pid, producer_epoch=0, base_sequence=base, transactional=True
        )
    )
    data[0:8] = base.to_bytes(8, "big")
    return bytes(data)


def _marker(kind: ControlType, base: int, pid: int) -> bytes:
    return build_control_batch(kind, producer_id=pid, producer_epoch=0, base_offset=base,
                               timestamp=1)  # fmt: skip


def test_read_committed_drops_aborted_records_and_ends_at_the_lso(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log = {
        0: _txn(0, b"aborted", 7),
        1: _batch(1, [b"plain"]),
        2: _txn(2, b"committed", 8),
        3: _marker(ControlType.ABORT, 3, 7),
        4: _marker(ControlType.COMMIT, 4, 8),
        5: _txn(5, b"open", 9),  # still open: the LSO is 5
    }
    leader = ScriptedLeader(
        log, high_watermark=6, last_stable_offset=5, aborted=(AbortedTransaction(7, 0),)
    )
    assert _read(monkeypatch, leader, 0, 6, read_committed=True) == [
        (1, b"plain"),
        (2, b"committed"),
    ]
    assert set(leader.isolation) == {READ_COMMITTED}
    # read_uncommitted: every data record, markers never, up to the high watermark.
    assert [v for _, v in _read(monkeypatch, leader, 0, 6)] == [
        b"aborted", b"plain", b"committed", b"open"
    ]  # fmt: skip


def test_a_remote_read_committed_split_asks_the_leader_for_aborts_past_the_remote_end(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A transaction with records in the last remote segment whose ABORT marker is still
    local: no remote index has it, the leader's answer at the remote end does."""
    import uuid

    from tierlog.remote.api import RemoteSegment, SegmentState
    from tierlog.remote.fsspec_storage import FsspecRemoteStore

    data = _txn(0, b"aborted", 7) + _batch(1, [b"plain"])
    log_path = tmp_path / "seg.log"
    log_path.write_bytes(data)
    index = tmp_path / "seg.index"
    index.write_bytes(b"")
    store = FsspecRemoteStore(f"file://{tmp_path}/remote")
    segment = RemoteSegment("t", 0, uuid.UUID(int=1), 0, 1, "s0", len(data), 1, 1, ((0, 0),),
                            SegmentState.COPY_FINISHED, 0)  # fmt: skip
    segment = store.copy_segment(segment, log_path, index, index)
    leader = ScriptedLeader({2: _marker(ControlType.ABORT, 2, 7)}, 3,
                            aborted=(AbortedTransaction(7, 0),))  # fmt: skip
    monkeypatch.setattr(split_readers, "LogClient", leader)
    split = RemoteSplit("t", 0, 0, 2, segment, (), 2)

    def values(**kwargs: Any) -> list[bytes]:
        batches = split_readers.read_remote(split, store, **kwargs)
        return [v for b in batches for v in b.column("value").to_pylist()]

    assert values() == [b"aborted", b"plain"]
    assert values(read_committed=True, bootstrap="unused:9092") == [b"plain"]
    assert leader.fetched == [2] and leader.isolation == [READ_COMMITTED]
    # Remote-only (no leader to ask): the abort is not known yet.
    assert values(read_committed=True) == [b"aborted", b"plain"]
