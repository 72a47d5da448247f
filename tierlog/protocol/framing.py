"""Kafka's framing: every request and response is an int32 size followed by that many bytes.

``FrameDecoder`` turns the byte stream of one connection into complete frames, without the
size prefix. It is sans-I/O: the connection layer feeds it whatever ``recv`` or
``data_received`` produced and gets back the frames those bytes completed.

Copying rules (why it stays linear for large frames arriving in many pieces): a frame that
is wholly inside one fed chunk comes back as a ``memoryview`` into that chunk, uncopied.
Bytes that cannot complete a frame yet are kept as a list of chunks and joined once, when
enough has arrived to complete the frame they start, so each byte is copied at most twice
however small the pieces are. Frames are read-only views (kio's native readers refuse
writable buffers); ``bytearray``/writable input is copied first so that a caller reusing its
receive buffer cannot change a frame under the decoder's feet.

Not thread-safe; one decoder per connection. After it raises, the stream is out of sync and
the decoder must be discarded with its connection.
"""

from __future__ import annotations

import struct
from typing import Final

from tierlog.protocol.errors import FrameTooLargeError, MalformedFrameError

__all__ = ["DEFAULT_MAX_FRAME_BYTES", "SIZE_PREFIX", "FrameDecoder", "frame"]

# Kafka's socket.request.max.bytes default (104857600, 100 MiB).
DEFAULT_MAX_FRAME_BYTES: Final = 100 * 1024 * 1024
SIZE_PREFIX: Final = 4

_SIZE = struct.Struct(">i")
_unpack_size = _SIZE.unpack_from


class FrameDecoder:
    """Splits a byte stream into size-prefixed frames.

    Args:
        max_frame_bytes: largest frame accepted (the size prefix excluded), Kafka's
            ``socket.request.max.bytes``.
    """

    __slots__ = ("_chunks", "_have", "_max", "_want")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        if max_frame_bytes < 0:
            raise ValueError("max_frame_bytes must be >= 0")
        self._max = max_frame_bytes
        # Bytes received but not yet part of a complete frame; ``_have`` is their total
        # and ``_want`` how many are needed before joining them is worth it (4 while the
        # size prefix is incomplete, else prefix + frame).
        self._chunks: list[bytes] = []
        self._have = 0
        self._want = SIZE_PREFIX

    @property
    def buffered(self) -> int:
        """Bytes held back as the start of an incomplete frame."""
        return self._have

    @property
    def incomplete_frame_bytes(self) -> int:
        """Prefix plus declared size of the frame being assembled, once its size prefix
        has arrived; 0 otherwise. What that frame will hold in memory when complete, known
        before its bytes are (the connection layer reserves it from
        ``queued.max.request.bytes`` before reading on); nothing is allocated for it here
        until the bytes arrive."""
        return self._want if self._have and self._want > SIZE_PREFIX else 0

    def feed(self, data: bytes | bytearray | memoryview) -> list[memoryview]:
        """Adds received bytes; returns the frames they complete, oldest first.

        Args:
            data: the next bytes of the stream; ``bytes`` avoids a copy.

        Returns:
            Read-only views of each completed frame, without its size prefix.

        Raises:
            FrameTooLargeError: a size prefix exceeds ``max_frame_bytes``.
            MalformedFrameError: a size prefix is negative.
        """
        chunk = data if type(data) is bytes else bytes(data)
        if not chunk:
            return []
        if self._chunks:
            self._chunks.append(chunk)
            self._have += len(chunk)
            if self._have < self._want:
                return []
            chunk = b"".join(self._chunks)
            self._chunks = []
            self._have = 0
        return self._split(chunk)

    def _split(self, chunk: bytes) -> list[memoryview]:
        view = memoryview(chunk)
        end = len(chunk)
        frames: list[memoryview] = []
        pos = 0
        while end - pos >= SIZE_PREFIX:
            (size,) = _unpack_size(chunk, pos)
            if size < 0:
                raise MalformedFrameError(size)
            if size > self._max:
                raise FrameTooLargeError(size, self._max)
            stop = pos + SIZE_PREFIX + size
            if stop > end:
                self._keep(chunk, pos, SIZE_PREFIX + size)
                return frames
            frames.append(view[pos + SIZE_PREFIX : stop])
            pos = stop
        if pos < end:
            self._keep(chunk, pos, SIZE_PREFIX)
        return frames

    def _keep(self, chunk: bytes, pos: int, want: int) -> None:
        # Copy the tail so that the (possibly large) chunk it came from can be freed.
        tail = chunk[pos:] if pos else chunk
        self._chunks = [tail]
        self._have = len(tail)
        self._want = want


def frame(payload: bytes | bytearray | memoryview) -> bytes:
    """``payload`` with its int32 size prefix (tests, tools and the internal client)."""
    body = bytes(payload)
    return _SIZE.pack(len(body)) + body
