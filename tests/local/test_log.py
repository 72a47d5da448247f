from __future__ import annotations

import struct
from pathlib import Path

import pytest

from tierlog.local.errors import (
    LogClosedError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
)
from tierlog.local.leader_epoch import EpochEntry
from tierlog.local.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, Log
from tierlog.local.producer_state import snapshot_path
from tierlog.local.segment import LogSegment
from tierlog.records.errors import CorruptBatchError, InvalidRecordError, UnsupportedMagicError
from tierlog.records.header import (
    Compression,
    TimestampType,
    iter_batches,
    validate_batch,
)
from tierlog.records.reader import iter_records
from tierlog.util.clock import ManualClock
from tierlog.util.scheduler import ManualScheduler

from .conftest import (
    T0,
    LogFactory,
    all_batches,
    all_records,
    assert_dense,
    dir_snapshot,
    make_batch,
    with_offsets,
)

# -- appending ---------------------------------------------------------------------------


def test_new_log_is_empty(make_log: LogFactory, log_dir: Path) -> None:
    lg = make_log()
    assert (lg.log_start_offset, lg.log_end_offset, lg.size) == (0, 0, 0)
    assert [s.base_offset for s in lg.segments] == [0]
    assert (log_dir / "00000000000000000000.log").exists()
    assert lg.read(0, 1000) is None
    assert lg.name == "topic-0"


def test_offsets_are_dense_and_assigned_from_the_log_end(make_log: LogFactory) -> None:
    lg = make_log()
    produced = [make_batch(n, base_offset=1234) for n in (3, 1, 5)]  # producers' offsets
    infos = [lg.append(b, leader_epoch=7) for b in produced]
    assert [(i.first_offset, i.last_offset) for i in infos] == [(0, 2), (3, 3), (4, 8)]
    assert [i.record_count for i in infos] == [3, 1, 5]
    assert lg.log_end_offset == 9
    headers = assert_dense(lg)
    assert [h.base_offset for h in headers] == [0, 3, 4]
    assert all(h.partition_leader_epoch == 7 for h in headers)
    # everything but baseOffset and partitionLeaderEpoch is the producer's bytes
    data = lg.segments[0].path.read_bytes()
    pos = 0
    for original, header in zip(produced, headers, strict=True):
        stored = data[pos : pos + header.size]
        assert stored[17:] == original[17:]
        assert stored[8:12] == original[8:12]
        assert struct.unpack(">q", stored[:8])[0] == header.base_offset
        validate_batch(stored)  # CRC still valid
        pos += header.size
    assert [r.offset for r in all_records(lg)] == list(range(9))


def test_multiple_batches_in_one_append(make_log: LogFactory) -> None:
    lg = make_log()
    lg.append(make_batch(2))
    records = (
        make_batch(3, base_timestamp=T0 + 50)
        + make_batch(2, base_timestamp=T0 + 10)
        + make_batch(1, base_timestamp=T0 + 20)
    )
    info = lg.append(records)
    assert (info.first_offset, info.last_offset, info.record_count) == (2, 7, 6)
    assert info.size == len(records)
    assert len(info.batches) == 3
    assert (info.max_timestamp, info.offset_of_max_timestamp) == (T0 + 52, 4)
    assert [h.base_offset for h in assert_dense(lg)] == [0, 2, 5, 7]
    assert [(r.offset, r.timestamp) for r in all_records(lg)][2:] == [
        (2, T0 + 50),
        (3, T0 + 51),
        (4, T0 + 52),
        (5, T0 + 10),
        (6, T0 + 11),
        (7, T0 + 20),
    ]


def test_empty_append_is_a_no_op(make_log: LogFactory) -> None:
    lg = make_log()
    info = lg.append(b"")
    assert info.batches == [] and lg.log_end_offset == 0


def test_compressed_batches_are_stored_as_sent(make_log: LogFactory) -> None:
    lg = make_log()
    batch = make_batch(20, value_size=200, compression=Compression.GZIP)
    lg.append(batch)
    stored = lg.segments[0].path.read_bytes()
    assert stored[12:16] == struct.pack(">i", 0)
    assert stored[16:] == batch[16:]
    assert [r.offset for r in iter_records(stored)] == list(range(20))


def _corrupt_crc(batch: bytes) -> bytes:
    out = bytearray(batch)
    out[-1] ^= 0xFF
    return bytes(out)


def _set(batch: bytes, fmt: str, offset: int, value: int) -> bytes:
    out = bytearray(batch)
    struct.pack_into(fmt, out, offset, value)
    return bytes(out)


def _fix_crc(batch: bytes) -> bytes:
    from tierlog.records.header import compute_crc

    return _set(batch, ">I", 17, compute_crc(batch))


BAD_APPENDS = {
    "bad crc": (_corrupt_crc(make_batch(3)), CorruptBatchError),
    "magic 1": (_set(make_batch(1), ">b", 16, 1), UnsupportedMagicError),
    "truncated": (make_batch(3)[:-5], CorruptBatchError),
    "short header": (make_batch(1)[:40], CorruptBatchError),
    "too large": (make_batch(1, value_size=3000), RecordTooLargeError),
    "count mismatch": (_fix_crc(_set(make_batch(3), ">i", 57, 2)), InvalidRecordError),
    "zero records": (_fix_crc(_set(make_batch(1), ">i", 57, 0)), InvalidRecordError),
    "control batch": (
        make_batch(1, producer_id=5, producer_epoch=0, control=True),
        InvalidRecordError,
    ),
    "idempotent without sequence": (
        make_batch(1, producer_id=5, producer_epoch=0, base_sequence=-1),
        InvalidRecordError,
    ),
    "good then bad": (make_batch(2) + _corrupt_crc(make_batch(2)), CorruptBatchError),
    "good then garbage": (make_batch(2) + b"\x00" * 20, CorruptBatchError),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BAD_APPENDS))
def test_rejected_append_leaves_the_log_unchanged(
    make_log: LogFactory, log_dir: Path, case: str
) -> None:
    lg = make_log(max_message_bytes=2000, segment_bytes=10_000)
    lg.append(make_batch(2))
    before = dir_snapshot(log_dir)
    end = lg.log_end_offset
    records, error = BAD_APPENDS[case]
    with pytest.raises(error):
        lg.append(records)
    assert dir_snapshot(log_dir) == before
    assert lg.log_end_offset == end
    assert lg.segments[0].size == len(before["00000000000000000000.log"])
    # and the log still works
    assert lg.append(make_batch(1)).first_offset == end


def test_batch_over_segment_bytes(make_log: LogFactory, log_dir: Path) -> None:
    lg = make_log(segment_bytes=500)
    with pytest.raises(RecordBatchTooLargeError):
        lg.append(make_batch(1, value_size=600))
    assert lg.log_end_offset == 0


def test_batches_together_over_segment_bytes(make_log: LogFactory, log_dir: Path) -> None:
    # Kafka checks the whole append against segment.bytes: it must fit one segment.
    lg = make_log(segment_bytes=500)
    batch = make_batch(1, value_size=150)
    lg.append(batch)
    before = dir_snapshot(log_dir)
    with pytest.raises(RecordBatchTooLargeError):
        lg.append(batch * 3)
    assert dir_snapshot(log_dir) == before
    lg.append(batch * 2)
    assert all(seg.size <= 500 for seg in lg.segments)


def test_idempotent_batch_with_sequence_is_accepted(make_log: LogFactory) -> None:
    lg = make_log()
    info = lg.append(make_batch(3, producer_id=9, producer_epoch=1, base_sequence=0))
    header = info.batches[0]
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (9, 1, 0)


def test_log_append_time_stamps_max_timestamp_and_keeps_crc_valid(
    make_log: LogFactory, clock: ManualClock
) -> None:
    lg = make_log(message_timestamp_type="LogAppendTime")
    clock.advance(5000)
    now = clock.milliseconds()
    info = lg.append(make_batch(3, base_timestamp=1000) + make_batch(2, base_timestamp=2000))
    assert info.log_append_time == now
    assert info.max_timestamp == now
    headers = list(all_batches(lg))  # validates CRCs
    assert [h.max_timestamp for h in headers] == [now, now]
    assert all(h.timestamp_type is TimestampType.LOG_APPEND_TIME for h in headers)
    assert [h.base_timestamp for h in headers] == [1000, 2000]
    assert [r.timestamp for r in all_records(lg)] == [now] * 5
    assert lg.active_segment.max_timestamp == now
    assert lg.offset_for_timestamp(now) == (0, now)
    assert lg.offset_for_timestamp(now + 1) is None


# -- follower appends -------------------------------------------------------------------


def test_append_as_follower_keeps_the_leaders_offsets(make_log: LogFactory) -> None:
    lg = make_log()
    data = with_offsets(make_batch(3), 0, leader_epoch=2) + with_offsets(
        make_batch(2), 3, leader_epoch=4
    )
    info = lg.append_as_follower(data)
    assert (info.first_offset, info.last_offset) == (0, 4)
    assert lg.segments[0].path.read_bytes() == data
    assert lg.leader_epoch_cache.entries == [EpochEntry(2, 0), EpochEntry(4, 3)]
    # gaps (a compacted leader) are fine
    lg.append_as_follower(with_offsets(make_batch(1), 10, leader_epoch=4))
    assert lg.log_end_offset == 11
    assert [h.base_offset for h in all_batches(lg)] == [0, 3, 10]


def test_append_as_follower_rejects_offsets_below_the_end_or_backwards(
    make_log: LogFactory, log_dir: Path
) -> None:
    lg = make_log()
    lg.append_as_follower(with_offsets(make_batch(3), 0))
    before = dir_snapshot(log_dir)
    with pytest.raises(InvalidRecordError):
        lg.append_as_follower(with_offsets(make_batch(1), 2))
    with pytest.raises(InvalidRecordError):
        lg.append_as_follower(with_offsets(make_batch(2), 5) + with_offsets(make_batch(1), 6))
    with pytest.raises(CorruptBatchError):
        lg.append_as_follower(_corrupt_crc(with_offsets(make_batch(1), 3)))
    assert dir_snapshot(log_dir) == before


def test_follower_gap_past_the_relative_offset_range_rolls(make_log: LogFactory) -> None:
    lg = make_log()
    lg.append_as_follower(with_offsets(make_batch(1), 0))
    far = 2**31 + 10
    lg.append_as_follower(with_offsets(make_batch(2), far))
    assert [s.base_offset for s in lg.segments] == [0, far]
    assert lg.log_end_offset == far + 2
    found = lg.read(far + 1, 10_000)
    assert found is not None and validate_batch(found.read()).base_offset == far


def test_follower_gap_from_an_empty_log_replaces_the_empty_segment(
    make_log: LogFactory, log_dir: Path
) -> None:
    lg = make_log()
    far = 2**32
    lg.append_as_follower(with_offsets(make_batch(1), far))
    assert [s.base_offset for s in lg.segments] == [far]
    assert not (log_dir / "00000000000000000000.log").exists()
    assert lg.active_segment.offset_index.lookup(far) == (far, 0)


# -- reading -----------------------------------------------------------------------------


def _fill(lg: Log, batches: int, records: int = 2, value_size: int = 100) -> None:
    for i in range(batches):
        lg.append(make_batch(records, value_size=value_size, base_timestamp=T0 + 10 * i))


def test_read_across_segment_boundaries(make_log: LogFactory) -> None:
    lg = make_log(segment_bytes=700)
    _fill(lg, 10)
    assert len(lg.segments) > 2
    offset = 0
    while offset < lg.log_end_offset:
        found = lg.read(offset, 10**6)
        assert found is not None
        data = found.read()
        headers = [h for _, h in iter_batches(data)]
        assert headers[0].base_offset <= offset <= headers[0].last_offset
        offset = headers[-1].next_offset
    assert offset == 20
    # a read never spans two segments: it stops at the end of the one holding the offset
    first = lg.read(0, 10**6)
    assert first is not None and first.size == lg.segments[0].size


def test_read_from_mid_batch_offset_returns_the_batch(make_log: LogFactory) -> None:
    lg = make_log()
    _fill(lg, 3, records=4)
    found = lg.read(5, 10**6)
    assert found is not None
    assert validate_batch(found.read()[: lg.segments[0].find_batch(5)[1].size]).base_offset == 4  # type: ignore[index]


def test_read_bounded_by_max_offset(make_log: LogFactory) -> None:
    lg = make_log(segment_bytes=1200)  # 4 batches per segment
    _fill(lg, 8)
    assert lg.segments[0].next_offset == 8
    found = lg.read(0, 10**6, max_offset=6)  # e.g. the partition's high watermark
    assert found is not None
    assert [h.last_offset for _, h in iter_batches(found.read())] == [1, 3, 5]
    assert lg.read(6, 10**6, max_offset=6) is None
    # a bound inside a batch excludes that batch (Kafka: translateOffset(maxOffset))
    assert lg.read(6, 10**6, max_offset=7) is None
    assert lg.read(6, 10**6, max_offset=8) is not None
    assert lg.read(6, 10**6, max_offset=10**9) is not None  # capped at the log end
    # a bound in the next segment still gives the rest of this one
    seg0_end = lg.segments[0].next_offset
    found = lg.read(0, 10**6, max_offset=seg0_end + 1)
    assert found is not None and found.size == lg.segments[0].size


def test_read_max_bytes_and_min_one_batch(make_log: LogFactory) -> None:
    lg = make_log()
    _fill(lg, 3, value_size=300)
    first_size = lg.segments[0].find_batch(0)[1].size  # type: ignore[index]
    found = lg.read(0, 50)
    assert found is not None and found.size == first_size
    found = lg.read(0, 50, min_one_batch=False)
    assert found is not None and found.size == 50
    found = lg.read(0, first_size + 7)
    assert found is not None and found.size == first_size + 7


def test_offset_out_of_range(make_log: LogFactory) -> None:
    lg = make_log()
    _fill(lg, 2)
    with pytest.raises(OffsetOutOfRangeError) as info:
        lg.read(5, 100)
    assert (info.value.offset, info.value.log_start, info.value.log_end) == (5, 0, 4)
    assert lg.read(4, 100) is None  # at the end: nothing yet
    lg.advance_log_start_offset(2)
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(1, 100)
    assert lg.read(2, 100) is not None
    with pytest.raises(OffsetOutOfRangeError):
        lg.advance_log_start_offset(5)


def test_batches_iterates_from_an_offset(make_log: LogFactory) -> None:
    lg = make_log(segment_bytes=700)
    _fill(lg, 6)
    assert [h.base_offset for _, _, h in lg.batches(5)] == [4, 6, 8, 10]
    assert [h.base_offset for _, _, h in lg.batches()] == [0, 2, 4, 6, 8, 10]


# -- timestamps --------------------------------------------------------------------------


def test_offset_for_timestamp_special_values(make_log: LogFactory) -> None:
    lg = make_log()
    assert lg.offset_for_timestamp(MAX_TIMESTAMP) is None
    lg.append(make_batch(3, timestamps=[T0 + 5, T0 + 90, T0 + 7]))
    lg.append(make_batch(3, timestamps=[T0 + 1, T0 + 90, T0 + 2]))
    assert lg.offset_for_timestamp(EARLIEST_TIMESTAMP) == (0, -1)
    assert lg.offset_for_timestamp(LATEST_TIMESTAMP) == (6, -1)
    # the record holding the max timestamp (the first one to reach it), as Kafka (KIP-734)
    assert lg.offset_for_timestamp(MAX_TIMESTAMP) == (1, T0 + 90)
    lg.advance_log_start_offset(2)
    assert lg.offset_for_timestamp(EARLIEST_TIMESTAMP) == (2, -1)


def test_offset_for_timestamp_finds_the_exact_record(make_log: LogFactory) -> None:
    lg = make_log(index_interval_bytes=1, segment_bytes=400)
    # within each batch the max timestamp comes first, so the time index points at the
    # batch's last offset while the answer lies before it
    for i in range(8):
        stamps = [T0 + 100 * i + 50, T0 + 100 * i + 10, T0 + 100 * i + 20]
        lg.append(make_batch(3, timestamps=stamps))
    assert len(lg.segments) > 1
    records = all_records(lg)
    for target in range(T0 - 5, T0 + 800, 7):
        expected = next(((r.offset, r.timestamp) for r in records if r.timestamp >= target), None)
        assert lg.offset_for_timestamp(target) == expected, target - T0


def test_offset_for_timestamp_respects_the_log_start(make_log: LogFactory) -> None:
    lg = make_log()
    lg.append(make_batch(4, base_timestamp=T0))
    assert lg.offset_for_timestamp(T0) == (0, T0)
    lg.advance_log_start_offset(2)
    assert lg.offset_for_timestamp(T0) == (2, T0 + 2)
    assert lg.offset_for_timestamp(T0 + 4) is None


def test_offset_for_timestamp_after_reopen(make_log: LogFactory, log_dir: Path) -> None:
    lg = make_log(index_interval_bytes=200, segment_bytes=2000)
    for i in range(30):
        lg.append(make_batch(2, value_size=50, timestamps=[T0 + 3 * i + 2, T0 + 3 * i]))
    answers = {t: lg.offset_for_timestamp(t) for t in range(T0 - 1, T0 + 95)}
    answers[MAX_TIMESTAMP] = lg.offset_for_timestamp(MAX_TIMESTAMP)
    lg.close()
    again = make_log(index_interval_bytes=200, segment_bytes=2000, had_clean_shutdown=True)
    assert {t: again.offset_for_timestamp(t) for t in answers} == answers


# -- rolling -----------------------------------------------------------------------------


def test_roll_on_segment_bytes(make_log: LogFactory, log_dir: Path) -> None:
    lg = make_log(segment_bytes=1000)
    batch = make_batch(2, value_size=150)  # ~ 400 bytes
    for _ in range(5):
        lg.append(batch)
    assert [s.base_offset for s in lg.segments] == [0, 4, 8]
    assert [s.size for s in lg.segments] == [2 * len(batch), 2 * len(batch), len(batch)]
    names = sorted(p.name for p in log_dir.iterdir() if p.suffix == ".log")
    assert names == [f"{b:020d}.log" for b in (0, 4, 8)]
    # rolled segments are flushed: the recovery point is at the new active segment
    assert lg.recovery_point == 8
    assert_dense(lg)


def test_roll_on_segment_ms(make_log: LogFactory, clock: ManualClock) -> None:
    lg = make_log(segment_ms=1000)
    lg.append(make_batch(1, base_timestamp=T0))
    lg.append(make_batch(1, base_timestamp=T0 + 1000))
    assert len(lg.segments) == 1
    lg.append(make_batch(1, base_timestamp=T0 + 1001))
    assert [s.base_offset for s in lg.segments] == [0, 2]
    # without timestamps the segment's wall-clock age counts
    lg.append(make_batch(1, base_timestamp=None))
    lg.roll()
    lg.append(make_batch(1, base_timestamp=None))
    clock.advance(1001)
    lg.append(make_batch(1, base_timestamp=None))
    assert [s.base_offset for s in lg.segments] == [0, 2, 4, 5]


def test_roll_on_full_index_through_the_log(make_log: LogFactory) -> None:
    lg = make_log(segment_index_bytes=36, index_interval_bytes=0)
    for i in range(20):
        lg.append(make_batch(1, base_timestamp=T0 + i))
    # the time index (3 entries of 12 bytes) fills first; every segment rolls when it does
    assert len(lg.segments) == 5
    assert all(s.time_index.entries <= 3 for s in lg.segments)
    assert_dense(lg)


def test_explicit_roll(make_log: LogFactory, log_dir: Path) -> None:
    lg = make_log()
    assert lg.roll() is lg.active_segment  # an empty active segment is reused
    assert len(lg.segments) == 1
    lg.append(make_batch(2))
    new = lg.roll()
    assert new is lg.active_segment and new.base_offset == 2
    # the closed segment's indexes are trimmed; the active one's are preallocated
    assert (log_dir / "00000000000000000000.index").stat().st_size == 0
    assert (log_dir / "00000000000000000000.timeindex").stat().st_size == 12
    assert (log_dir / "00000000000000000002.index").stat().st_size == 10 << 20


def test_roll_with_a_scheduler_flushes_later(
    make_log: LogFactory, scheduler: ManualScheduler
) -> None:
    lg = make_log(scheduler=scheduler)
    lg.append(make_batch(2))
    lg.roll()
    lg.append(make_batch(1))
    assert lg.recovery_point == 0
    scheduler.advance(0)
    assert lg.recovery_point == 2


# -- flushing ----------------------------------------------------------------------------


def test_flush_messages(make_log: LogFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    flushed: list[int] = []
    real_flush = LogSegment.flush

    def counting_flush(self: LogSegment) -> None:
        flushed.append(self.base_offset)
        real_flush(self)

    monkeypatch.setattr(LogSegment, "flush", counting_flush)
    lg = make_log(flush_messages=5)
    flushed.clear()  # opening flushes what it recovered
    lg.append(make_batch(2))
    lg.append(make_batch(2))
    assert (lg.recovery_point, lg.unflushed_messages, flushed) == (0, 4, [])
    lg.append(make_batch(1))
    assert (lg.recovery_point, lg.unflushed_messages, flushed) == (5, 0, [0])
    lg.append(make_batch(7))
    assert lg.recovery_point == 12


def test_flush_ms_via_flush_if_due(make_log: LogFactory, clock: ManualClock) -> None:
    lg = make_log(flush_ms=1000)
    assert not lg.flush_if_due()  # nothing to flush
    lg.append(make_batch(3))
    clock.advance(999)
    assert not lg.flush_if_due()
    assert lg.recovery_point == 0
    clock.advance(1)
    assert lg.flush_if_due()
    assert lg.recovery_point == 3
    assert not lg.flush_if_due()
    lg.append(make_batch(1))
    clock.advance(500)
    assert not lg.flush_if_due()


def test_flush_up_to(make_log: LogFactory) -> None:
    lg = make_log()
    _fill(lg, 3)
    lg.flush(up_to=2)
    assert lg.recovery_point == 2 and lg.unflushed_messages == 6
    lg.flush(up_to=1)
    assert lg.recovery_point == 2
    lg.flush(up_to=100)
    assert lg.recovery_point == 6 and lg.unflushed_messages == 0


# -- truncation --------------------------------------------------------------------------


def test_truncate_to_mid_batch_truncates_to_the_batch_start(make_log: LogFactory) -> None:
    lg = make_log(segment_bytes=800)
    for epoch in range(6):
        lg.append(make_batch(3, value_size=100), leader_epoch=epoch)
    assert len(lg.segments) == 3
    lg.truncate_to(8)  # inside batch 6-8
    assert lg.log_end_offset == 6
    assert lg.recovery_point <= 6
    assert [h.base_offset for h in assert_dense(lg)] == [0, 3]
    # the segment holding the cut survives, empty (as in Kafka); later ones are gone
    assert [(s.base_offset, s.size) for s in lg.segments][1:] == [(6, 0)]
    assert lg.leader_epoch_cache.entries == [EpochEntry(0, 0), EpochEntry(1, 3)]
    # appends continue from the new end, into the old segment
    assert lg.append(make_batch(1), leader_epoch=9).first_offset == 6
    assert lg.leader_epoch_cache.entries[-1] == EpochEntry(9, 6)
    assert_dense(lg)
    lg.truncate_to(100)  # past the end: nothing happens
    assert lg.log_end_offset == 7


def test_truncate_to_a_segment_base(make_log: LogFactory, log_dir: Path) -> None:
    lg = make_log(segment_bytes=800)
    _fill(lg, 6, records=3)
    base = lg.segments[1].base_offset
    lg.truncate_to(base)
    assert lg.log_end_offset == base
    assert [s.base_offset for s in lg.segments] == [0, base]
    assert lg.active_segment.size == 0
    assert sorted(p.name for p in log_dir.glob("*.log")) == [
        "00000000000000000000.log",
        f"{base:020d}.log",
    ]
    lg.append(make_batch(1))
    assert_dense(lg)


def test_truncate_fully_and_start_at(make_log: LogFactory, log_dir: Path) -> None:
    lg = make_log(segment_bytes=800)
    _fill(lg, 6, records=3)
    lg.truncate_fully_and_start_at(500)
    assert (lg.log_start_offset, lg.log_end_offset, lg.recovery_point) == (500, 500, 500)
    assert lg.leader_epoch_cache.entries == []
    assert sorted(p.name for p in log_dir.glob("*.log")) == ["00000000000000000500.log"]
    assert lg.append(make_batch(2)).first_offset == 500
    assert_dense(lg)


def test_truncate_below_the_log_start(make_log: LogFactory) -> None:
    lg = make_log()
    lg.append_as_follower(with_offsets(make_batch(2), 0))
    lg.advance_log_start_offset(2)
    lg.append(make_batch(1))
    lg.truncate_to(1)
    assert (lg.log_start_offset, lg.log_end_offset) == (1, 1)


# -- leader epochs -----------------------------------------------------------------------


def test_leader_epoch_cache_follows_appends(make_log: LogFactory, log_dir: Path) -> None:
    lg = make_log()
    lg.append(make_batch(2), leader_epoch=0)
    lg.append(make_batch(2), leader_epoch=0)
    lg.append(make_batch(2), leader_epoch=3)
    lg.append(make_batch(1), leader_epoch=5)
    assert lg.leader_epoch_cache.entries == [(0, 0), (3, 4), (5, 6)]
    text = (log_dir / "leader-epoch-checkpoint").read_text()
    assert text == "0\n3\n0 0\n3 4\n5 6\n"
    assert lg.leader_epoch_cache.end_offset_for(3, lg.log_end_offset) == (3, 6)
    assert lg.leader_epoch_cache.end_offset_for(5, lg.log_end_offset) == (5, 7)


def test_missing_epoch_checkpoint_is_rebuilt_from_batches(
    make_log: LogFactory, log_dir: Path
) -> None:
    lg = make_log()
    lg.append(make_batch(2), leader_epoch=1)
    lg.append(make_batch(2), leader_epoch=4)
    lg.close()
    (log_dir / "leader-epoch-checkpoint").unlink()
    again = make_log(had_clean_shutdown=True)
    assert again.leader_epoch_cache.entries == [(1, 0), (4, 2)]


# -- close and reopen --------------------------------------------------------------------


def test_clean_close_and_reopen_restores_everything(
    make_log: LogFactory, log_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lg = make_log(segment_bytes=1500, index_interval_bytes=150)
    for i in range(25):
        lg.append(
            make_batch(3, value_size=40, base_timestamp=T0 + (i * 31) % 97), leader_epoch=i // 10
        )
    lg.advance_log_start_offset(4)
    state = (
        lg.log_end_offset,
        [(s.base_offset, s.next_offset, s.size, s.max_timestamp, s.offset_of_max_timestamp)
         for s in lg.segments],
        lg.leader_epoch_cache.entries,
        lg.offset_for_timestamp(MAX_TIMESTAMP),
        lg.offset_for_timestamp(T0 + 50),
    )  # fmt: skip
    lg.close()
    with pytest.raises(LogClosedError):
        lg.append(make_batch(1))
    files = dir_snapshot(log_dir)

    # no segment is rescanned on a clean open
    def no_recover(self: LogSegment) -> int:
        raise AssertionError("recover called on a clean open")

    monkeypatch.setattr(LogSegment, "recover", no_recover)
    again = make_log(
        segment_bytes=1500, index_interval_bytes=150, had_clean_shutdown=True, log_start_offset=4
    )
    assert (
        again.log_end_offset,
        [(s.base_offset, s.next_offset, s.size, s.max_timestamp, s.offset_of_max_timestamp)
         for s in again.segments],
        again.leader_epoch_cache.entries,
        again.offset_for_timestamp(MAX_TIMESTAMP),
        again.offset_for_timestamp(T0 + 50),
    ) == state  # fmt: skip
    assert again.log_start_offset == 4
    assert again.recovery_point == again.log_end_offset
    again.close()
    # Segments and indexes are untouched; producer snapshots (one per roll) below the log
    # start (4) are dropped on load.
    after = dir_snapshot(log_dir)
    assert {n: b for n, b in after.items() if not n.endswith(".snapshot")} == {
        n: b for n, b in files.items() if not n.endswith(".snapshot")
    }
    assert all(int(n.split(".")[0]) >= 4 for n in after if n.endswith(".snapshot"))
    # and after reopening appends go on from the end
    third = make_log(segment_bytes=1500, index_interval_bytes=150, had_clean_shutdown=True)
    assert third.append(make_batch(1)).first_offset == state[0]
    assert_dense(third)


def test_close_is_idempotent_and_closed_log_refuses_work(make_log: LogFactory) -> None:
    lg = make_log()
    lg.append(make_batch(1))
    lg.close()
    lg.close()
    for call in (
        lambda: lg.read(0, 10),
        lambda: lg.append_as_follower(with_offsets(make_batch(1), 1)),
        lambda: lg.flush(),
        lambda: lg.offset_for_timestamp(0),
        lambda: lg.truncate_to(0),
        lambda: lg.delete_old_segments(),
    ):
        with pytest.raises(LogClosedError):
            call()


def test_delete_removes_the_directory(make_log: LogFactory, log_dir: Path) -> None:
    lg = make_log(segment_bytes=700)
    _fill(lg, 5)
    lg.delete()
    assert not log_dir.exists()
    assert lg.closed


def test_leftovers_are_cleaned_on_open(make_log: LogFactory, log_dir: Path) -> None:
    lg = make_log()
    lg.append(make_batch(1))
    lg.close()
    (log_dir / "00000000000000000007.log.deleted").write_bytes(b"x")
    (log_dir / "00000000000000000009.index").write_bytes(b"")  # index without a log
    (log_dir / "leader-epoch-checkpoint.tmp").write_bytes(b"x")
    make_log(had_clean_shutdown=True)
    assert sorted(p.name for p in log_dir.iterdir()) == [
        "00000000000000000000.index",
        "00000000000000000000.log",
        "00000000000000000000.timeindex",
        "leader-epoch-checkpoint",
    ]


def test_log_start_offset_is_at_least_the_first_segment(
    make_log: LogFactory, log_dir: Path
) -> None:
    lg = make_log()
    lg.truncate_fully_and_start_at(40)
    lg.append(make_batch(2))
    lg.close()
    again = make_log(had_clean_shutdown=True, log_start_offset=3)
    assert again.log_start_offset == 40
    again.close()
    third = make_log(had_clean_shutdown=True, log_start_offset=100)
    assert third.log_start_offset == third.log_end_offset == 42


def test_compacted_topic_refuses_records_without_a_key(make_log: LogFactory) -> None:
    from tierlog.records.builder import Record, build_batch

    lg = make_log(cleanup_policy="compact")
    lg.append(build_batch([Record(b"k", b"v")]))
    with pytest.raises(InvalidRecordError, match="without a key"):
        lg.append(build_batch([Record(b"k", b"v"), Record(None, b"orphan")]))
    assert lg.log_end_offset == 1


# -- the rolled segment's flush, off the log's thread (issue 26, item 7) ----------------


def test_the_rolled_segments_flush_names_its_files_and_the_directory(
    make_log: LogFactory, scheduler: ManualScheduler, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[list[Path]] = []
    monkeypatch.setattr("tierlog.local.log.fsync_paths", lambda paths: synced.append(paths))
    lg = make_log(scheduler=scheduler)
    lg.append(make_batch(2))
    rolled = lg.active_segment
    lg.roll()
    assert synced == [] and lg.recovery_point == 0  # queued: the loop goes on
    scheduler.advance(0)
    snapshot = snapshot_path(lg.directory, 2)  # written at the roll, fsynced by the job
    assert snapshot.exists()
    assert synced == [[*rolled.file_paths(), snapshot, lg.directory]]
    assert {p.suffix for p in synced[0][:4]} == {".log", ".index", ".timeindex", ".txnindex"}
    assert lg.recovery_point == 2


def test_a_truncation_while_the_rolled_segment_flushes_keeps_the_recovery_point(
    make_log: LogFactory, scheduler: ManualScheduler
) -> None:
    """A follower truncating between the roll and the flush's end may have rewritten what
    the flush covered: the recovery point must not claim it."""
    lg = make_log(scheduler=scheduler)
    lg.append(make_batch(2))
    lg.roll()
    lg.append(make_batch(1))
    lg.truncate_to(1)
    scheduler.advance(0)
    assert lg.recovery_point == 0


def test_a_failed_background_flush_is_retried_on_the_logs_thread(
    make_log: LogFactory,
    scheduler: ManualScheduler,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls: list[int] = []

    def failing(paths: list[Path]) -> None:
        calls.append(len(paths))
        raise OSError(5, "Input/output error")

    monkeypatch.setattr("tierlog.local.log.fsync_paths", failing)
    lg = make_log(scheduler=scheduler)
    lg.append(make_batch(2))
    lg.roll()
    # The job fails; the flush it schedules instead runs in the same advance (delay 0).
    scheduler.advance(0)
    assert calls == [6]  # the segment's four files, the snapshot, the directory
    assert "flushing the rolled segment failed: [Errno 5] Input/output error" in caplog.text
    assert lg.recovery_point == 2


def test_a_roll_on_an_event_loop_leaves_the_fsyncs_to_another_thread(
    make_log: LogFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loop is free while the rolled segment is fsynced: a callback runs meanwhile, and
    the recovery point moves only once the job is done."""
    import asyncio
    import threading

    from tierlog.util.atomic_files import fsync_paths
    from tierlog.util.scheduler import AsyncioScheduler

    release = threading.Event()
    threads: list[str] = []

    def held(paths: list[Path]) -> None:
        threads.append(threading.current_thread().name)
        assert release.wait(10)
        fsync_paths(paths)

    monkeypatch.setattr("tierlog.local.log.fsync_paths", held)

    async def run() -> None:
        scheduler = AsyncioScheduler(asyncio.get_running_loop())
        lg = make_log(scheduler=scheduler)
        lg.append(make_batch(2))
        lg.roll()
        await asyncio.sleep(0.05)  # the loop runs while the job is held
        assert lg.recovery_point == 0
        release.set()
        for _ in range(200):
            if lg.recovery_point == 2:
                break
            await asyncio.sleep(0.01)
        assert lg.recovery_point == 2
        scheduler.cancel_all()

    asyncio.run(run())
    assert threads and threads[0] != threading.main_thread().name
