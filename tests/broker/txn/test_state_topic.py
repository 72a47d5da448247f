"""Loading ``__transaction_state``: ``read_entries`` over a real log, read
``transaction.state.log.load.buffer.size`` bytes at a time."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.local.conftest import T0
from tierlog.broker.txn import state_topic
from tierlog.broker.txn.log_codec import TxnLogValue, TxnState, encode_key, encode_value
from tierlog.broker.txn.state_topic import read_entries
from tierlog.local.config import LogConfig
from tierlog.local.log import Log
from tierlog.records.builder import Record, build_batch
from tierlog.util.clock import ManualClock

BATCHES = 12


def value(n: int) -> TxnLogValue:
    return TxnLogValue(n, 0, 60_000, TxnState.EMPTY, (), T0, -1)


@pytest.fixture
def topic_log(tmp_path: Path):
    # Small segments: the twelve batches span several, and a read never crosses one.
    log = Log(
        tmp_path / "__transaction_state-0", LogConfig(segment_bytes=600), clock=ManualClock(T0)
    )
    for n in range(BATCHES):
        records = [Record(encode_key(f"id-{n}"), encode_value(value(n)), timestamp=T0)]
        if n == 5:
            records.append(Record(encode_key("id-0"), None, timestamp=T0))  # a tombstone
        log.append(build_batch(records), 0)
    yield log
    log.close()


def reads_for(topic_log: Log, buffer_size: int, monkeypatch: pytest.MonkeyPatch):
    reads: list[int] = []
    real = state_topic._pread

    def counting(fd: int, size: int, position: int) -> bytes:
        reads.append(size)
        return real(fd, size, position)

    monkeypatch.setattr(state_topic, "_pread", counting)
    entries = list(read_entries(topic_log, topic_log.log_end_offset, buffer_size))
    return entries, reads


def test_every_buffer_size_loads_the_same_entries(topic_log, monkeypatch) -> None:
    expected = [(f"id-{n}", value(n)) for n in range(6)] + [("id-0", None)]
    expected += [(f"id-{n}", value(n)) for n in range(6, BATCHES)]
    segments = len(topic_log.segments)
    assert segments > 2
    batch_size = topic_log.segments[0].size // sum(1 for _ in topic_log.segments[0].batches(0))

    one_batch, reads = reads_for(topic_log, 1, monkeypatch)
    assert one_batch == expected
    assert len(reads) == BATCHES  # smaller than a batch: one whole batch at a time

    whole, reads = reads_for(topic_log, 1 << 20, monkeypatch)
    assert whole == expected
    assert len(reads) == segments  # each segment in one read

    two, reads = reads_for(topic_log, 2 * batch_size + 10, monkeypatch)
    assert two == expected
    assert segments < len(reads) < BATCHES
    assert max(reads) <= 2 * batch_size + 10  # two batches at most


def test_entries_stop_at_the_end_offset(topic_log, monkeypatch) -> None:
    entries, _ = reads_for(topic_log, 1 << 20, monkeypatch)
    assert [e[0] for e in list(read_entries(topic_log, 3))] == [e[0] for e in entries[:3]]
