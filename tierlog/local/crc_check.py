"""Checking record batches' CRC-32C in a segment file, read with ``pread``: the core the
scrubber (``scrubber.py``) and the check before a read is first served (``LogSegment.verify``,
issue 20 item 6) share.

Bytes are read into one reusable buffer, never mapped: a file cut under the check (a
follower's truncation in place, or damage) ends it with ``SegmentTruncatedError``, where a
mapping would kill the process with SIGBUS. ``crc32c`` and ``preadv`` release the GIL.

No state beyond the buffer of the call; any thread.
"""

from __future__ import annotations

import os
import threading

from crc32c import crc32c

from tierlog.records.errors import RecordsError
from tierlog.records.header import ATTRIBUTES_OFFSET, HEADER_SIZE, parse_header


class SegmentTruncatedError(OSError):
    """The file got shorter while it was being checked (a follower's ``Log.truncate_to``
    cut it in place): the bytes past the cut were removed, not damaged, so nothing is
    reported about them."""


class FileWindow:
    """A segment file read through one reusable buffer with ``os.preadv``, never mapped.

    Why not ``mmap``: a follower's ``Log.truncate_to`` may cut a closed segment in place
    (``os.ftruncate``) while it is being checked, and touching a mapped page past the new
    end raises SIGBUS, which kills the broker. A read past the end just comes back short.
    The copy costs little next to the CRC: the buffer stays in the CPU's cache, and a
    mapping costs a page fault per few pages anyway (``bench/storage.py``, "scrub").
    """

    __slots__ = ("buffer", "fd", "filled", "size", "start")

    def __init__(
        self, fd: int, size: int, buffer_bytes: int, buffer: memoryview | None = None
    ) -> None:
        self.fd = fd
        self.size = size  # the file's size when the walk began: the walk's end
        # ``buffer``: one the caller reuses (its first ``buffer_bytes`` are used).
        self.buffer = (
            memoryview(bytearray(buffer_bytes)) if buffer is None else buffer[:buffer_bytes]
        )
        self.start = 0  # file position of buffer[0]
        self.filled = 0

    def view(self, position: int, n: int) -> memoryview:
        """Bytes ``[position, position + n)``, ``n`` at most the buffer's size."""
        if position < self.start or position + n > self.start + self.filled:
            self._fill(position, n)
        offset = position - self.start
        return self.buffer[offset : offset + n]

    def crc(self, position: int, end: int) -> int:
        """CRC-32C of bytes ``[position, end)``, in buffer-sized pieces when larger."""
        if end - position <= len(self.buffer):
            return int(crc32c(self.view(position, end - position)))
        value = 0
        while position < end:
            n = min(len(self.buffer), end - position)
            value = int(crc32c(self.view(position, n), value))
            position += n
        return value

    def _fill(self, position: int, need: int) -> None:
        want = min(len(self.buffer), self.size - position)
        got = 0
        while got < want:
            n = os.preadv(self.fd, [self.buffer[got:want]], position + got)
            if n == 0:
                break
            got += n
        self.start, self.filled = position, got
        if got < need:
            raise SegmentTruncatedError(
                f"file ended at byte {position + got}, below the {self.size} bytes it had "
                "when the check began (truncated meanwhile)"
            )


# Read size: large enough that a 1 MiB batch needs one read, small enough to stay in the
# CPU's cache between the copy and the CRC (1 MiB was the fastest of 256 KiB-8 MiB).
READ_BYTES = 1 << 20

_reusable = threading.local()


def _buffer() -> memoryview:
    """A READ_BYTES buffer per thread, reused across checks (allocating and zeroing 1 MiB
    per fetch would cost more than the CRC of a small read)."""
    found: memoryview | None = getattr(_reusable, "buffer", None)
    if found is None:
        found = _reusable.buffer = memoryview(bytearray(READ_BYTES))
    return found


def check_batches(
    fd: int, start: int, end: int, size: int
) -> tuple[list[tuple[int, int, str]], list[tuple[int, int]]]:
    """CRC-32C of every whole batch that begins in ``[start, end)`` (``start`` a batch
    boundary; a batch running past ``end`` is checked whole) of a segment file ``size``
    bytes long, read through ``fd``.

    Returns:
        ``(problems, good)``: each problem a byte range and what is wrong (a batch failing
        its CRC-32C covers itself; a length or header that cannot be trusted, or a file
        shorter than ``size``, covers everything from it to ``size``, and ends the
        check), and the byte ranges of the batches that passed.
    """
    problems: list[tuple[int, int, str]] = []
    good: list[tuple[int, int]] = []
    window = FileWindow(fd, size, min(READ_BYTES, max(end - start, HEADER_SIZE)), _buffer())
    position = start
    try:
        while position < end and position < size:
            if size - position < HEADER_SIZE:
                problems.append((position, size, "truncated batch header"))
                break
            try:
                header = parse_header(window.view(position, HEADER_SIZE))
            except RecordsError as exc:
                problems.append((position, size, str(exc)))
                break
            batch_end = position + header.size
            if batch_end > size:
                problems.append(
                    (position, size, f"batch of {header.size} bytes runs past the end of the file")
                )
                break
            actual = window.crc(position + ATTRIBUTES_OFFSET, batch_end)
            if actual != header.crc:
                problems.append(
                    (
                        position,
                        batch_end,
                        f"batch at offset {header.base_offset}: CRC-32C {actual:#010x} does "
                        f"not match stored {header.crc:#010x}",
                    )
                )
            elif good and good[-1][1] == position:
                good[-1] = (good[-1][0], batch_end)
            else:
                good.append((position, batch_end))
            position = batch_end
    except SegmentTruncatedError as exc:
        problems.append((position, size, f"file cut short: {exc}"))
    return problems, good
