"""Index blocks on a full disk (issue 10, "Full disk"): entries are written into the map
only where ``posix_fallocate`` gave blocks, so a full disk is an ENOSPC, never a SIGBUS.

The ENOSPC cases replace ``os.posix_fallocate`` with one that fails: a real full disk is
tested with a real broker in tests/broker/test_full_disk.py."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.local.conftest import LogFactory, assert_dense, crash, make_batch
from tierlog.local import index as index_module
from tierlog.local.index import RESERVE_CHUNK, MappedIndex
from tierlog.local.offset_index import OffsetIndex
from tierlog.local.segment import BatchEntry, LogSegment
from tierlog.local.time_index import TimeIndex

MiB = 1 << 20


def allocated(path: Path) -> int:
    """Bytes of blocks behind the file (SEEK_HOLE would not do: ext4 reports fallocated,
    never written extents as holes, as they read as zeros)."""
    return os.stat(path).st_blocks * 512


@pytest.fixture
def enospc(monkeypatch: pytest.MonkeyPatch) -> Callable[[bool], None]:
    """``enospc(True)``: posix_fallocate fails as on a full disk until ``enospc(False)``."""
    real = os.posix_fallocate

    def full(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def switch(on: bool) -> None:
        monkeypatch.setattr(os, "posix_fallocate", full if on else real)

    return switch


def new_segment(directory: Path, base: int = 0, max_index_size: int = 10 * MiB) -> LogSegment:
    directory.mkdir(exist_ok=True)
    return LogSegment(
        directory, base, index_interval_bytes=0, max_index_size=max_index_size, created_ms=0
    )


@pytest.mark.parametrize("kind", [OffsetIndex, TimeIndex])
def test_reserve_gives_blocks_ahead_of_the_entries(kind: type[MappedIndex], tmp_path: Path) -> None:
    path = tmp_path / "0.index"
    index = kind(path, 0, 10 * MiB)
    index.make_appendable()
    assert index.writable == 0  # sparse: nothing may be written yet
    index.reserve(1)
    assert index.writable == RESERVE_CHUNK // index.entry_size
    assert allocated(path) >= RESERVE_CHUNK
    # Past the first chunk, the next one is reserved when the entries reach it.
    for n in range(index.writable + 1):
        index._append_raw(n, n)
    assert index.writable == 2 * RESERVE_CHUNK // index.entry_size
    assert allocated(path) >= 2 * RESERVE_CHUNK
    # Only a chunk ahead: the rest of the 10 MiB stays sparse.
    assert allocated(path) < 4 * RESERVE_CHUNK
    index.close()
    assert os.stat(path).st_size == index.size_bytes


def test_a_small_index_is_reserved_whole(tmp_path: Path) -> None:
    """An index smaller than a chunk gets blocks for all of it, never past its end."""
    path = tmp_path / "0.index"
    index = OffsetIndex(path, 0, 4096)
    index.reserve(1)
    size = os.stat(path).st_size
    assert size == 4096
    assert allocated(path) >= size
    assert index.writable == index.capacity
    index.close()


def test_a_new_segment_comes_with_index_blocks(tmp_path: Path) -> None:
    segment = new_segment(tmp_path / "t-0")
    for index in segment._indexes:
        assert index.writable > 0
        assert allocated(index.path) >= RESERVE_CHUNK
    segment.close()


def test_enospc_at_segment_creation_leaves_nothing(
    tmp_path: Path, enospc: Callable[[bool], None]
) -> None:
    directory = tmp_path / "t-0"
    enospc(True)
    with pytest.raises(OSError) as raised:
        new_segment(directory, 42)
    assert raised.value.errno == errno.ENOSPC
    assert raised.value.filename is not None and "00000000000000000042" in raised.value.filename
    assert list(directory.iterdir()) == []
    enospc(False)
    segment = new_segment(directory, 42)
    assert segment.offset_index.writable > 0
    segment.close()


def test_enospc_at_roll_fails_the_append_and_a_later_roll_works(
    make_log: LogFactory, enospc: Callable[[bool], None]
) -> None:
    batch = make_batch(5, value_size=100)
    log = make_log(segment_bytes=3 * len(batch))
    for _ in range(3):
        log.append(batch)
    assert len(log.segments) == 1
    before = sorted(p.name for p in log.directory.iterdir())
    enospc(True)
    for _ in range(2):  # the produce retries: each roll fails the same way
        with pytest.raises(OSError) as raised:
            log.append(batch)
        assert raised.value.errno == errno.ENOSPC
    assert len(log.segments) == 1
    assert sorted(p.name for p in log.directory.iterdir()) == before
    enospc(False)
    log.append(batch)
    assert len(log.segments) == 2
    assert log.active_segment.offset_index.writable > 0
    assert [h.record_count for h in assert_dense(log)] == [5] * 4


def test_enospc_for_a_due_index_entry_writes_nothing(
    tmp_path: Path, enospc: Callable[[bool], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The entry's blocks are reserved before the batch is written: a failure leaves the
    segment as it was, so the produce can be answered KAFKA_STORAGE_ERROR and retried."""
    monkeypatch.setattr(index_module, "RESERVE_CHUNK", 4096)
    segment = new_segment(tmp_path / "t-0")
    batch = make_batch(1)
    offset = 0
    # index.interval.bytes is 0: every batch after the first adds an entry.
    while segment.offset_index.entries < segment.offset_index.writable:
        segment.append([batch], [_entry(batch, offset)])
        offset += 1
    size, entries = segment.size, segment.offset_index.entries
    enospc(True)
    with pytest.raises(OSError) as raised:
        segment.append_batch(batch[:17], memoryview(batch)[17:], len(batch), offset, 0)
    assert raised.value.errno == errno.ENOSPC
    with pytest.raises(OSError):
        segment.append([batch], [_entry(batch, offset)])
    assert (segment.size, os.fstat(segment.fd).st_size) == (size, size)
    assert segment.offset_index.entries == entries
    # Rolling or closing on a full disk still works: the last time-index entry is optional.
    segment.close_for_append()
    enospc(False)
    segment.close()


def _entry(batch: bytes, offset: int) -> BatchEntry:
    return BatchEntry(position=0, size=len(batch), last_offset=offset, max_timestamp=offset)


def test_recovery_on_a_full_disk_raises_enospc(
    make_log: LogFactory, enospc: Callable[[bool], None]
) -> None:
    """Start-up after an unclean stop rebuilds indexes: their blocks are asked for before
    the scan writes any, so a full disk stops the start (one line, in LogManager)."""
    log = make_log()
    for _ in range(20):
        log.append(make_batch(3))
    crash(log)
    enospc(True)
    with pytest.raises(OSError) as raised:
        make_log(had_clean_shutdown=False)
    assert raised.value.errno == errno.ENOSPC
    enospc(False)
    again = make_log(had_clean_shutdown=False)
    assert again.log_end_offset == 60


@pytest.mark.parametrize("code", [errno.EOPNOTSUPP, errno.EINVAL])
def test_no_fallocate_on_the_file_system_keeps_the_sparse_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    def unsupported(fd: int, offset: int, length: int) -> None:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "posix_fallocate", unsupported)
    segment = new_segment(tmp_path / "t-0")
    assert segment.offset_index.writable == segment.offset_index.capacity
    batch = make_batch(1)
    for offset in range(3):
        segment.append([batch], [_entry(batch, offset)])
    assert segment.offset_index.entries == 2
    segment.close()
