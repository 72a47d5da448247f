"""Issue 10: damaged segments are found and reported, never served or skipped silently.

Item 1: a torn active segment after a clean stop. Item 3: a damaged length field.
"""

from __future__ import annotations

import logging
import os
import struct
from pathlib import Path

import pytest

from tierlog.local.errors import CorruptSegmentError
from tierlog.local.log import Log

from .conftest import T0, LogFactory, all_records, assert_dense, make_batch

SEGMENT_BYTES = 4000


def fill(lg: Log, batches: int) -> list[int]:
    """Append batches of 3 records (~250 bytes); returns each batch's base offset."""
    return [
        lg.append(make_batch(3, value_size=50, base_timestamp=T0 + i)).first_offset
        for i in range(batches)
    ]


# -- item 1: torn active segment tail ---------------------------------------------------


def test_clean_restart_truncates_a_batch_torn_after_its_header(
    make_log: LogFactory, log_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    lg = make_log(segment_bytes=SEGMENT_BYTES)
    bases = fill(lg, 30)
    active = lg.active_segment
    last_base = bases[-1]
    path = active.path
    lg.close()  # a clean stop
    size = os.path.getsize(path)
    os.truncate(path, size - 40)  # cut inside the last batch; its header stays whole
    with caplog.at_level(logging.WARNING, logger="tierlog.local"):
        again = make_log(segment_bytes=SEGMENT_BYTES, had_clean_shutdown=True)
    assert again.log_end_offset == last_base
    assert any(
        "truncated 198 corrupt bytes" in r.getMessage() and str(path) in r.getMessage()
        for r in caplog.records
    )
    assert_dense(again)
    # New appends land where readers can reach them.
    info = again.append(make_batch(2, value_size=5))
    assert info.first_offset == last_base
    fetched = again.read(last_base, 1 << 20)
    assert fetched is not None
    assert struct.unpack_from(">q", fetched.read())[0] == last_base
    fetched.release()
    assert len(all_records(again)) == last_base + 2


def test_clean_restart_truncates_a_last_batch_whose_bytes_never_reached_disk(
    make_log: LogFactory, log_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The file has its full length but the last batch's end is zeros (the size reached
    disk, the data did not): only the CRC can tell."""
    lg = make_log(segment_bytes=SEGMENT_BYTES)
    bases = fill(lg, 12)
    path = lg.active_segment.path
    lg.close()
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.seek(size - 40)
        f.write(bytes(40))
    with caplog.at_level(logging.WARNING, logger="tierlog.local"):
        again = make_log(segment_bytes=SEGMENT_BYTES, had_clean_shutdown=True)
    assert again.log_end_offset == bases[-1]
    assert any("torn tail" in r.getMessage() for r in caplog.records)
    assert_dense(again)


def test_clean_restart_truncates_a_torn_header(make_log: LogFactory, log_dir: Path) -> None:
    lg = make_log(segment_bytes=SEGMENT_BYTES)
    fill(lg, 5)
    end = lg.log_end_offset
    path = lg.active_segment.path
    lg.close()
    with open(path, "ab") as f:
        f.write(make_batch(3)[:30])  # fewer bytes than a header
    again = make_log(segment_bytes=SEGMENT_BYTES, had_clean_shutdown=True)
    assert again.log_end_offset == end
    assert again.active_segment.size == os.path.getsize(path)
    assert_dense(again)


def test_clean_restart_checks_only_the_tail(make_log: LogFactory, log_dir: Path) -> None:
    """The check reads from the last index entry on, not the whole segment: a bad CRC in
    an early batch of a clean active segment is left to the scrubber."""
    lg = make_log(segment_bytes=1 << 20, index_interval_bytes=500)
    fill(lg, 40)
    end = lg.log_end_offset
    path = lg.active_segment.path
    lg.close()
    with open(path, "r+b") as f:
        f.seek(100)
        f.write(b"\xff\xff")  # inside the first batch's records
    again = make_log(segment_bytes=1 << 20, index_interval_bytes=500, had_clean_shutdown=True)
    assert again.log_end_offset == end


# -- item 3: a damaged length field -----------------------------------------------------


def _damage_length(path: Path, position: int, length: int = 0x7FFF0000) -> None:
    with open(path, "r+b") as f:
        f.seek(position + 8)
        f.write(struct.pack(">i", length))


def test_read_at_a_damaged_length_field_raises_instead_of_skipping(
    make_log: LogFactory,
) -> None:
    lg = make_log(segment_bytes=SEGMENT_BYTES)
    fill(lg, 60)
    assert len(lg.segments) >= 3
    first = lg.segments[0]
    found = first.find_batch(first.base_offset + 9)
    assert found is not None
    position, header = found
    _damage_length(first.path, position)
    with pytest.raises(CorruptSegmentError) as raised:
        lg.read(header.base_offset, 1 << 20)
    assert raised.value.code == 56
    assert str(first.path) in str(raised.value)
    # Offsets inside the damaged batch's segment after it: never answered from the next
    # segment (the bug served the next segment's data for them).
    with pytest.raises(CorruptSegmentError):
        lg.read(header.next_offset, 1 << 20)


def test_unclean_recovery_finds_a_damaged_length_field(
    make_log: LogFactory, log_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    lg = make_log(segment_bytes=SEGMENT_BYTES)
    fill(lg, 10)
    active = lg.active_segment
    found = active.find_batch(active.base_offset + 12)
    assert found is not None
    position, header = found
    path = active.path
    lg.close()
    _damage_length(path, position)
    with caplog.at_level(logging.WARNING, logger="tierlog.local"):
        again = make_log(segment_bytes=SEGMENT_BYTES, had_clean_shutdown=False)
    assert again.log_end_offset == header.base_offset
    assert any(str(path) in r.getMessage() for r in caplog.records)
    assert_dense(again)


def test_clean_restart_keeps_a_closed_segment_with_a_damaged_length_and_all_after_it(
    make_log: LogFactory, log_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Truncating the damaged segment would delete every later segment (offsets must stay
    contiguous): the damage is marked instead, and only it is refused."""
    lg = make_log(segment_bytes=SEGMENT_BYTES)
    fill(lg, 40)
    end = lg.log_end_offset
    first = lg.segments[0]
    position, header = list(first.batches())[5]
    next_base = lg.segments[1].base_offset
    lg.close()
    _damage_length(first.path, position)
    (log_dir / "leader-epoch-checkpoint").unlink()  # rebuilt from headers: must not fail
    with caplog.at_level(logging.ERROR, logger="tierlog.local"):
        again = make_log(segment_bytes=SEGMENT_BYTES, had_clean_shutdown=True)
    assert again.log_end_offset == end
    assert any("later segments are kept" in r.getMessage() for r in caplog.records)
    for offset in (header.base_offset, next_base - 1):
        with pytest.raises(CorruptSegmentError):
            again.read(offset, 1 << 20)
    before = again.read(0, 1 << 20)
    assert before is not None and before.position + before.size <= position
    before.release()
    after = again.read(next_base, 1 << 20)
    assert after is not None
    assert struct.unpack_from(">q", after.read())[0] == next_base
    after.release()
    assert again.append(make_batch(1)).first_offset == end
