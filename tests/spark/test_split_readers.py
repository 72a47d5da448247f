"""``read_leader`` over a compacted log's gaps, against a scripted leader (no Spark): a
Fetch that answers from the next batch kept, an empty batch, and a log whose last offsets
were all cleaned away are read without a data-loss error; truncation still is one."""

from __future__ import annotations

from typing import Any

import pytest

from tierlog.client import FetchResult
from tierlog.compaction.batch_filter import empty_batch
from tierlog.records.builder import Record, build_batch
from tierlog.records.header import parse_header
from tierlog.spark import split_readers
from tierlog.spark.discovery import SourceError
from tierlog.spark.planning import LeaderSplit


def _batch(base: int, values: list[bytes], **producer: int) -> bytes:
    data = bytearray(build_batch([Record(b"k", v, timestamp=1) for v in values], **producer))
    data[0:8] = base.to_bytes(8, "big")  # base offset, outside the CRC'd bytes
    return bytes(data)


class ScriptedLeader:
    """Answers each Fetch from ``log`` (base offset -> batch bytes) as a broker does: the
    batches from the one holding the offset, up to the high watermark."""

    def __init__(self, log: dict[int, bytes], high_watermark: int) -> None:
        self.log, self.high_watermark = log, high_watermark
        self.fetched: list[int] = []

    def __call__(self, *_args: Any, **_kwargs: Any) -> ScriptedLeader:
        return self

    def __enter__(self) -> ScriptedLeader:
        return self

    def __exit__(self, *_exc: object) -> None:
        return None

    def fetch(self, topic: str, partition: int, offset: int, max_bytes: int) -> FetchResult:
        self.fetched.append(offset)
        batches = [
            data for base, data in sorted(self.log.items())
            if parse_header(data).last_offset >= offset and base < self.high_watermark
        ]  # fmt: skip
        return FetchResult(b"".join(batches), self.high_watermark, 0)


def _read(monkeypatch: pytest.MonkeyPatch, leader: ScriptedLeader, start: int, end: int) -> list:
    monkeypatch.setattr(split_readers, "LogClient", leader)
    split = LeaderSplit("t", 0, start, end)
    rows = []
    for batch in split_readers.read_leader(split, "unused:9092"):
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
