"""Issue 10: damaged segments are found and reported, never served or skipped silently.

Item 1: a torn active segment after a clean stop. Item 3: a damaged length field.
"""

from __future__ import annotations

import logging
import os
import struct
from pathlib import Path

import pytest

from tierlog.local import segment as segment_module
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


# -- issue 20, item 3: a garbled index ---------------------------------------------------


def index_entries(path: Path, entry_size: int, fmt: str) -> list[tuple[int, ...]]:
    data = path.read_bytes()
    return [
        struct.unpack_from(fmt, data, n)
        for n in range(0, len(data) - entry_size + 1, entry_size)
        if data[n : n + entry_size] != bytes(entry_size)
    ]


def point_entry_at(path: Path, n: int, position: int) -> None:
    """Overwrite entry ``n``'s position in an offset index file (under the running log:
    the index is mapped shared, so the log sees the new bytes at once)."""
    with open(path, "r+b") as f:
        f.seek(n * 8 + 4)
        f.write(struct.pack(">I", position))


def first_base(lg: Log, offset: int) -> int:
    found = lg.read(offset, 1 << 20)
    assert found is not None
    try:
        return struct.unpack_from(">q", found.read())[0]
    finally:
        found.release()


@pytest.mark.parametrize("closed", [False, True])
def test_a_garbled_offset_index_entry_never_lands_past_the_offset_asked_for(
    closed: bool, make_log: LogFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """The issue's case: a consumer assigned at 1601 received 1700 first."""
    lg = make_log(segment_bytes=1 << 20, index_interval_bytes=400)
    for i in range(200):
        lg.append(make_batch(10, value_size=30, base_timestamp=T0 + i))
    if closed:
        lg.roll()
    segment = lg.segments[0]
    entries = index_entries(segment.offset_index.path, 8, ">iI")
    n = max(k for k, (relative, _) in enumerate(entries) if relative <= 1601)
    later = next(k for k, (relative, _) in enumerate(entries) if relative >= 1700)
    assert entries[n][0] < 1600
    point_entry_at(segment.offset_index.path, n, entries[later][1])
    with caplog.at_level(logging.WARNING, logger="tierlog.local"):
        assert first_base(lg, 1601) == 1600  # the batch of 10 holding 1601
    assert "does not match the log" in caplog.text
    assert str(segment.offset_index.path.with_suffix(".log")) in caplog.text
    # The index was rebuilt from the headers: right, and not reported again.
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tierlog.local"):
        assert [first_base(lg, o) for o in (0, 999, 1601, 1999)] == [0, 990, 1600, 1990]
    assert "does not match" not in caplog.text
    assert index_entries(segment.offset_index.path, 8, ">iI")[: len(entries)] == entries


def test_an_index_entry_pointing_inside_a_batch_is_not_trusted(make_log: LogFactory) -> None:
    lg = make_log(segment_bytes=1 << 20, index_interval_bytes=400)
    for i in range(100):
        lg.append(make_batch(10, value_size=30, base_timestamp=T0 + i))
    segment = lg.segments[0]
    entries = index_entries(segment.offset_index.path, 8, ">iI")
    point_entry_at(segment.offset_index.path, 3, entries[3][1] + 30)
    assert first_base(lg, entries[3][0]) == entries[3][0] - 9


def test_a_garbled_time_index_entry_never_moves_a_timestamp_lookup_later(
    make_log: LogFactory, caplog: pytest.LogCaptureFixture
) -> None:
    lg = make_log(segment_bytes=1 << 20, index_interval_bytes=400)
    for i in range(100):
        lg.append(make_batch(10, value_size=30, base_timestamp=T0 + 100 * i))
    lg.roll()
    segment = lg.segments[0]
    entries = index_entries(segment.time_index.path, 12, ">qi")
    assert lg.offset_for_timestamp(T0 + 4000) == (400, T0 + 4000)
    # The entry a search for T0 + 4000 starts from now names a far later offset.
    n = max(k for k, (ts, _) in enumerate(entries) if ts <= T0 + 4000)
    with open(segment.time_index.path, "r+b") as f:
        f.seek(n * 12 + 8)
        f.write(struct.pack(">i", 905))
    with caplog.at_level(logging.WARNING, logger="tierlog.local"):
        assert lg.offset_for_timestamp(T0 + 4000) == (400, T0 + 4000)
    assert "time index entry" in caplog.text


# -- issue 20, item 6: verified before served --------------------------------------------


def flip_byte(path: Path, position: int) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        byte = f.read(1)[0]
        f.seek(position)
        f.write(bytes([byte ^ 0x10]))


@pytest.mark.parametrize("closed", [False, True])
def test_a_flipped_byte_is_caught_before_its_first_read(
    closed: bool, make_log: LogFactory, log_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A bit flip in the active segment was never caught, and in a closed one only if the
    scrubber got there first: a consumer with check.crcs=false received a changed value."""
    lg = make_log(segment_bytes=SEGMENT_BYTES)
    fill(lg, 10)
    if closed:
        lg.roll()
    segment = lg.segments[0]
    batches = list(segment.batches())
    (position, damaged), (after, _) = batches[3], batches[4]
    flip_byte(segment.path, after - 5)  # inside the last record of batch 3
    with caplog.at_level(logging.ERROR, logger="tierlog.local"):
        found = lg.read(0, 1 << 20)
        assert found is not None and found.position + found.size == position
        found.release()
        with pytest.raises(CorruptSegmentError):
            lg.read(damaged.base_offset, 1 << 20)
    assert "found before serving them" in caplog.text and "CRC-32C" in caplog.text
    assert (log_dir / "damage-marks").exists()
    later = lg.read(damaged.next_offset, 1 << 20)  # the damage stops only itself
    assert later is not None and later.position == after
    later.release()


def test_verified_bytes_are_served_without_being_read_again(
    make_log: LogFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    lg = make_log(segment_bytes=SEGMENT_BYTES)
    fill(lg, 10)
    checked: list[tuple[int, int]] = []
    real = segment_module.check_batches

    def counting(fd: int, start: int, end: int, size: int) -> object:
        checked.append((start, end))
        return real(fd, start, end, size)

    monkeypatch.setattr(segment_module, "check_batches", counting)
    for _ in range(3):
        found = lg.read(0, 1 << 20)
        assert found is not None
        found.release()
    assert len(checked) == 1  # once, then sendfile straight from the file
    fill(lg, 2)
    found = lg.read(0, 1 << 20)
    assert found is not None
    found.release()
    assert len(checked) == 2 and checked[1][0] > 0  # only the new bytes


def test_damage_at_the_end_of_the_active_segment_starts_a_new_one(
    make_log: LogFactory, log_dir: Path
) -> None:
    lg = make_log(segment_bytes=1 << 20)
    fill(lg, 10)
    active = lg.active_segment
    position, header = list(active.batches())[6]
    with open(active.path, "r+b") as f:  # a length field: nothing after it can be found
        f.seek(position + 8)
        f.write(struct.pack(">i", 0x7FFF0000))
    end = lg.log_end_offset
    with pytest.raises(CorruptSegmentError):
        lg.read(header.base_offset, 1 << 20)
    assert lg.active_segment is not active and lg.active_segment.base_offset == end
    info = lg.append(make_batch(2))
    assert info.first_offset == end
    found = lg.read(end, 1 << 20)
    assert found is not None and struct.unpack_from(">q", found.read())[0] == end
    found.release()


def test_reads_are_not_checked_when_verification_is_off(make_log: LogFactory) -> None:
    lg = make_log(segment_bytes=SEGMENT_BYTES, verify_reads=False)
    fill(lg, 10)
    segment = lg.segments[0]
    after = list(segment.batches())[4][0]
    flip_byte(segment.path, after - 5)
    found = lg.read(0, 1 << 20)
    assert found is not None and found.position + found.size > after  # served, unchecked
    found.release()
