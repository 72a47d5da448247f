"""Leases on segment files: a slice read for a response keeps naming the same bytes until it
is released, whatever happens to its segment (delete, close, truncation) meanwhile."""

from __future__ import annotations

import errno
import gc
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tierlog.local.file_lease import FileSlice, FileState
from tierlog.local.log import Log
from tierlog.local.segment import LogSegment
from tierlog.protocol import FetchPartitionData, FetchTopicData, encode_fetch_response
from tierlog.records.header import iter_batches

from .conftest import LogFactory, make_batch
from .test_segment import BASE, append, open_segment


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def fd_target(fd: int) -> str | None:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except FileNotFoundError:
        return None


@pytest.fixture
def seg(tmp_path: Path) -> Iterator[LogSegment]:
    segment = open_segment(tmp_path)
    append(segment, *(make_batch(3, value_size=200) for _ in range(5)))
    yield segment
    segment.close()


def reuse_fd_numbers(directory: Path, count: int = 8) -> list[int]:
    """Open files full of other bytes: a freed fd number would be handed to one of them."""
    fds = []
    for i in range(count):
        path = directory / f"other-{i}"
        path.write_bytes(b"\xee" * 8192)
        fds.append(os.open(path, os.O_RDONLY))
    return fds


def close_all(fds: list[int]) -> None:
    for fd in fds:
        os.close(fd)


def test_leased_slice_survives_delete_and_fd_reuse(seg: LogSegment, tmp_path: Path) -> None:
    chunk = seg.read(BASE, 1 << 20)
    assert chunk is not None and seg.leases == 1
    data = chunk.read()
    path = seg.path
    seg.delete()
    assert not path.exists() and seg.fd == -1
    after_delete = open_fds()  # indexes closed, the .log fd still open for the lease
    others = reuse_fd_numbers(tmp_path)
    try:
        assert chunk.fd not in others  # the number still belongs to the deleted inode
        assert fd_target(chunk.fd) == f"{path} (deleted)"
        assert chunk.read() == data
        assert [h.base_offset for _, h in iter_batches(chunk.read())] == [100, 103, 106, 109, 112]
    finally:
        close_all(others)
    chunk.release()
    assert fd_target(chunk.fd) is None or fd_target(chunk.fd) != f"{path} (deleted)"
    assert open_fds() == after_delete - 1


def test_leased_slice_survives_close(seg: LogSegment, tmp_path: Path) -> None:
    first = seg.read(BASE, 100, min_one_batch=False)
    second = seg.read(BASE + 3, 1 << 20)
    assert first is not None and second is not None and seg.leases == 2
    expected = (first.read(), second.read())
    file = seg._file
    seg.close()
    assert seg.fd == -1 and file.state is FileState.RETIRED
    others = reuse_fd_numbers(tmp_path)
    try:
        assert (first.read(), second.read()) == expected
    finally:
        close_all(others)
    first.release()
    assert file.state is FileState.RETIRED and second.read() == expected[1]
    second.release()
    assert file.state is FileState.CLOSED


def test_sendfile_from_a_deleted_segment_sends_the_leased_bytes(seg: LogSegment) -> None:
    chunk = seg.read(BASE, 1 << 20)
    assert chunk is not None
    data = chunk.read()
    seg.delete()
    left, right = socket.socketpair()
    with left, right:
        right.setblocking(False)
        assert chunk.sendfile_to(left.fileno()) == len(data)
        received = b""
        while len(received) < len(data):
            received += right.recv(1 << 20)
    assert received == data
    chunk.release()


def test_truncate_under_a_lease_copies_the_prefix(seg: LogSegment, tmp_path: Path) -> None:
    chunk = seg.read(BASE, 1 << 20)
    assert chunk is not None
    data = chunk.read()
    old_fd, old_inode = seg.fd, os.fstat(seg.fd).st_ino
    cut = seg.position_of(BASE + 6)
    assert seg.truncate_to(BASE + 6) == len(data) - cut
    # The segment moved to a new inode holding the prefix; the lease keeps the old one.
    assert seg.fd != old_fd and os.fstat(seg.fd).st_ino != old_inode
    assert os.stat(seg.path).st_ino == os.fstat(seg.fd).st_ino
    assert seg.path.read_bytes() == data[:cut] and seg.size == cut
    assert seg.next_offset == BASE + 6 and not list(tmp_path.glob("*.tmp"))
    # Appends go to the new file only.
    append(seg, make_batch(2, value_size=999))
    others = reuse_fd_numbers(tmp_path)
    try:
        assert chunk.read() == data
    finally:
        close_all(others)
    assert seg.read(BASE + 6, 1 << 20).read() != data[cut:]  # type: ignore[union-attr]
    chunk.release()
    assert fd_target(old_fd) != fd_target(seg.fd)


def test_truncate_keeps_bytes_ever_leased_even_after_release(seg: LogSegment) -> None:
    # sendfile queues page-cache pages by reference, so bytes already handed to it may
    # still be read from the file after the lease is back: they are never cut in place.
    chunk = seg.read(BASE + 6, 1 << 20)
    assert chunk is not None
    chunk.release()
    old_inode = os.fstat(seg.fd).st_ino
    seg.truncate_to(BASE + 9)
    assert os.fstat(seg.fd).st_ino != old_inode


def test_truncate_past_every_lease_is_in_place(seg: LogSegment) -> None:
    chunk = seg.read(BASE, seg.position_of(BASE + 6), min_one_batch=False)
    assert chunk is not None
    data = chunk.read()
    fd, inode = seg.fd, os.fstat(seg.fd).st_ino
    seg.truncate_to(BASE + 6)  # the cut is at the lease's end: nothing leased moves
    assert seg.fd == fd and os.fstat(fd).st_ino == inode
    assert chunk.read() == data
    chunk.release()


def test_a_whole_file_reader_forces_a_copy_only_until_it_releases(seg: LogSegment) -> None:
    # The scrubber's lease: its bytes are read with pread, so once it is released nothing
    # reads the file any more and a truncation may cut in place (unlike a fetch's slice).
    done = seg.lease_all()
    assert done.size == seg.size and seg.leases == 1
    done.release()
    done.release()  # idempotent: the reader count is not given back twice
    inode = os.fstat(seg.fd).st_ino
    seg.truncate_to(BASE + 12)
    assert os.fstat(seg.fd).st_ino == inode  # after the release: cut in place
    reading = seg.lease_all()
    before = reading.read()
    seg.truncate_to(BASE + 9)
    assert os.fstat(seg.fd).st_ino != inode  # cut while it reads: the segment moved
    assert reading.read() == before  # the old inode keeps every byte it leased
    reading.release()
    assert seg.next_offset == BASE + 9 and seg.leases == 0


def test_release_is_idempotent_and_a_released_slice_refuses_use(seg: LogSegment) -> None:
    chunk = seg.read(BASE, 1 << 20)
    other = seg.read(BASE, 1 << 20)
    assert chunk is not None and other is not None and seg.leases == 2
    chunk.release()
    chunk.release()
    assert seg.leases == 1 and chunk.released
    with pytest.raises(ValueError, match="released"):
        chunk.read()
    with pytest.raises(ValueError, match="released"):
        chunk.sendfile_to(1)
    other.release()
    assert seg.leases == 0


def test_a_slice_without_lease_releases_nothing(seg: LogSegment) -> None:
    plain = FileSlice(seg.fd, 0, 10)
    plain.release()
    plain.release()
    assert not plain.released and len(plain.read()) == 10
    leased = seg.read(BASE, 10, min_one_batch=False)
    assert leased == plain and hash(leased) == hash(plain)  # equality ignores the lease
    assert leased is not None
    leased.release()


def test_response_release_gives_back_every_lease_once(seg: LogSegment) -> None:
    slices = [seg.read(BASE + 3 * i, 1 << 20) for i in range(3)]
    assert seg.leases == 3
    topics = [FetchTopicData([FetchPartitionData(i, records=s) for i, s in enumerate(slices)], "t")]
    response = encode_fetch_response(12, 1, topics)
    file = seg._file
    seg.delete()
    assert file.state is FileState.RETIRED
    response.release()
    assert file.state is FileState.CLOSED and file.leases == 0
    response.release()  # again: nothing more
    assert file.leases == 0


def test_a_dropped_slice_is_released_by_the_collector(seg: LogSegment) -> None:
    chunk = seg.read(BASE, 1 << 20)
    file = seg._file
    seg.delete()
    assert file.state is FileState.RETIRED
    del chunk
    gc.collect()
    assert file.state is FileState.CLOSED


def test_log_delete_truncate_and_close_leak_no_fd(make_log: LogFactory) -> None:
    baseline = open_fds()
    lg: Log = make_log(segment_bytes=1200, file_delete_delay_ms=0)
    for _ in range(12):
        lg.append(make_batch(3, value_size=150))
    assert len(lg.segments) > 4
    slices = [lg.read(offset, 1 << 20) for offset in range(0, lg.log_end_offset, 3)]
    expected = [s.read() for s in slices if s is not None]
    # Retention after DeleteRecords, a follower truncation, a full truncation, a close.
    lg.advance_log_start_offset(lg.segments[2].base_offset)
    assert lg.delete_old_segments() == 2
    lg.truncate_to(lg.log_end_offset - 4)
    more = lg.read(lg.log_start_offset, 1 << 20)
    assert more is not None
    more_data = more.read()
    lg.truncate_fully_and_start_at(1000)
    lg.append(make_batch(3, value_size=150))
    lg.close()
    assert [s.read() for s in slices if s is not None] == expected
    assert more.read() == more_data
    assert open_fds() > baseline  # the leases keep retired files open
    for s in slices:
        if s is not None:
            s.release()
    more.release()
    assert open_fds() == baseline


def test_copy_on_truncate_without_copy_file_range(
    seg: LogSegment, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: object) -> int:
        raise OSError(errno.EXDEV, "no copy_file_range here")

    monkeypatch.setattr(os, "copy_file_range", refuse)
    chunk = seg.read(BASE, 1 << 20)
    assert chunk is not None
    data = chunk.read()
    cut = seg.position_of(BASE + 9)
    seg.truncate_to(BASE + 9)
    assert seg.path.read_bytes() == data[:cut] and chunk.read() == data
    chunk.release()
