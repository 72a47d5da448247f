"""Large batches have their CRC checked beside the write: a bad one still leaves nothing."""

from __future__ import annotations

import pytest

from tests.local.conftest import LogFactory, make_batch
from tierlog.local.crc_worker import OVERLAP_MIN_BYTES
from tierlog.records.errors import CorruptBatchError

BIG = OVERLAP_MIN_BYTES // 1000 + 50  # records of 1000 bytes: a batch over the threshold


def big_batch() -> bytes:
    batch = make_batch(BIG, value_size=1000)
    assert len(batch) >= OVERLAP_MIN_BYTES
    return batch


def test_corrupt_large_batch_is_rejected_and_cut_off(make_log: LogFactory) -> None:
    lg = make_log(max_message_bytes=1 << 21)
    lg.append(big_batch())
    size, end = lg.size, lg.log_end_offset
    bad = bytearray(big_batch())
    bad[-5] ^= 0xFF  # inside the CRC'd range
    with pytest.raises(CorruptBatchError):
        lg.append(bytes(bad))
    assert (lg.size, lg.log_end_offset) == (size, end)
    assert lg.active_segment.path.stat().st_size == size  # the written bytes were cut off
    # The worker is in step: the next batch is checked against its own CRC.
    assert lg.append(big_batch()).first_offset == end


def test_failure_between_submit_and_verify_does_not_desync(
    make_log: LogFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    lg = make_log(max_message_bytes=1 << 21, segment_bytes=OVERLAP_MIN_BYTES * 3)
    lg.append(big_batch())
    lg.append(big_batch())

    def broken_roll(*_: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(type(lg), "roll", broken_roll)
    with pytest.raises(OSError):
        lg.append(big_batch())  # needs a roll, which fails after the CRC was submitted
    monkeypatch.undo()
    bad = bytearray(big_batch())
    bad[-5] ^= 0xFF
    with pytest.raises(CorruptBatchError):  # a stale result would have let this through
        lg.append(bytes(bad))
    assert lg.append(big_batch()).first_offset == 2 * BIG
