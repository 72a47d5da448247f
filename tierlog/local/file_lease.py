"""Leases on open segment files: what keeps a fetch's bytes readable until it is sent.

A fetch answer is sent after the read that produced it, and ``sendfile`` reads the
segment's fd while it sends, so the fd must stay open and its bytes unchanged until the
answer is out, whatever the log does meanwhile (retention or DeleteRecords with
file.delete.delay.ms=0, a follower truncating, shutdown, a compaction swap). Every
``FileSlice`` that ``LogSegment.read`` returns therefore holds a lease on the open file it
names: one ``SegmentFile`` per open ``.log`` descriptor, counting its leases. A segment
owns one ``SegmentFile`` at a time; when it lets go of it (close, delete, a copy-on-write
truncation that moves the segment to a new inode, or the open-file budget closing an idle
segment) the file is RETIRED and its fd is closed when the last lease is released, not
before. Lifecycle of a file (``FileState``)::

    OPEN --segment closed / deleted / replaced--> RETIRED --last lease released--> CLOSED
      |                                                                              ^
      +------------- (retired with no lease outstanding) ----------------------------+

The rules truncation follows around leases (``leased_end``, ``readers``) are the
segment's, described in ``tierlog.local.segment``.

Not thread-safe: leases are taken and released on the thread that owns the log (the
broker's event loop); a reader on another thread (the scrubber) reads through an fd its
lease keeps open, and its lease is released on the owner's thread.
"""

from __future__ import annotations

import os
from enum import Enum


class FileState(Enum):
    OPEN = "open"  # its segment reads and appends through it
    RETIRED = "retired"  # its segment let go; leases still send from it
    CLOSED = "closed"  # fd closed


class SegmentFile:
    """One open ``.log`` file descriptor, shared by its segment and the leases on it.

    ``leases`` counts the slices read from it and not yet released; ``leased_end`` is the
    highest byte position any slice for sending ever named (``tierlog.local.segment``
    says why it never goes down); ``readers`` counts the whole-file slices of readers that
    ``pread`` it (``LogSegment.lease_all``), also counted in ``leases``. The fd is closed
    once the file is RETIRED and ``leases`` is 0.
    """

    __slots__ = ("fd", "leased_end", "leases", "readers", "state")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.leases = 0
        self.leased_end = 0
        self.readers = 0
        self.state = FileState.OPEN

    def retire(self) -> None:
        """The segment no longer uses this file: close it now, or at the last release."""
        if self.state is FileState.OPEN:
            self.state = FileState.RETIRED
            if self.leases == 0:
                self._close()

    def unlease(self) -> None:
        self.leases -= 1
        if self.leases == 0 and self.state is FileState.RETIRED:
            self._close()

    def _close(self) -> None:
        self.state = FileState.CLOSED
        os.close(self.fd)

    def __repr__(self) -> str:
        return f"SegmentFile(fd={self.fd}, leases={self.leases}, {self.state.value})"


# What a released slice points at: never OPEN, so a use after release is caught.
_RELEASED = SegmentFile(-1)
_RELEASED.state = FileState.CLOSED


class FileSlice:
    """A byte range of an open file: what a fetch sends with ``os.sendfile``.

    Lease contract: a slice from ``LogSegment.read`` (so from ``Log.read``) holds a lease
    that keeps ``fd`` open and the bytes it names unchanged, whatever happens to the
    segment, until ``release()``. Whoever holds the slice releases it exactly when it is
    done with it: the server after the answer is sent, or sending failed, or the
    connection closed (``EncodedFetchResponse.release``); the fetch handler for a slice it
    read but drops (a long poll reading again). ``release`` is idempotent and cheap; after
    it, ``fd`` may be closed or reused by another file, so the slice must not be read or
    sent any more (``read``/``sendfile_to`` raise ``ValueError``). A slice dropped without
    a release is released when it is garbage collected, as a backstop only: relying on
    it keeps a deleted segment's disk space until the collector runs.

    A slice built directly (``FileSlice(fd, position, size)``, tools and tests) holds no
    lease: its ``release`` does nothing and it stays readable. Equality and hashing look
    at ``(fd, position, size)`` only.
    """

    __slots__ = ("_file", "fd", "position", "size")

    def __init__(self, fd: int, position: int, size: int, file: SegmentFile | None = None) -> None:
        self.fd = fd
        self.position = position
        self.size = size
        self._file = file

    def release(self) -> None:
        """Give the lease back (no-op without one, or when already released)."""
        file = self._file
        if file is not None and file is not _RELEASED:
            self._file = _RELEASED
            file.unlease()

    def __del__(self) -> None:
        if self._file is not None and self._file is not _RELEASED:
            self.release()

    @property
    def released(self) -> bool:
        return self._file is _RELEASED

    def _check(self) -> None:
        if self._file is _RELEASED:
            raise ValueError(f"{self!r} was released: its fd may belong to another file now")

    def read(self) -> bytes:
        """The bytes themselves (tools and tests; the broker uses ``sendfile_to``)."""
        self._check()
        return os.pread(self.fd, self.size, self.position)

    def sendfile_to(self, out_fd: int) -> int:
        """Copy the slice to ``out_fd`` in the kernel; returns bytes sent (all, or raises).

        A blocking ``out_fd`` is assumed; the broker's event loop uses ``loop.sendfile``.
        """
        self._check()
        sent = 0
        while sent < self.size:
            n = os.sendfile(out_fd, self.fd, self.position + sent, self.size - sent)
            if n == 0:
                break
            sent += n
        return sent

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FileSlice):
            return NotImplemented
        return (self.fd, self.position, self.size) == (other.fd, other.position, other.size)

    def __hash__(self) -> int:
        return hash((self.fd, self.position, self.size))

    def __repr__(self) -> str:
        lease = "" if self._file is None else ", released" if self.released else ", leased"
        return f"FileSlice(fd={self.fd}, position={self.position}, size={self.size}{lease})"


def records_size(records: FileSlice | bytes | None) -> int:
    """Bytes in a read's answer (a slice to send, bytes, or nothing)."""
    if records is None:
        return 0
    return records.size if isinstance(records, FileSlice) else len(records)


def owning_slice(fd: int, position: int, size: int) -> FileSlice:
    """A slice of ``fd`` that owns it: its release closes ``fd`` (a remote chunk file
    opened for one fetch answer, ``tierlog.remote.segment_reader``)."""
    file = SegmentFile(fd)
    file.leases = 1
    file.retire()  # no segment keeps it open: the slice's release is the last one
    return FileSlice(fd, position, size, file)


class ReaderSlice(FileSlice):
    """A whole-file slice for a reader that ``pread``s it (``LogSegment.lease_all``): its
    release also ends the reader's hold on truncation (``SegmentFile.readers``)."""

    __slots__ = ()

    def release(self) -> None:
        file = self._file
        if file is not None and file is not _RELEASED:
            file.readers -= 1
        super().release()
