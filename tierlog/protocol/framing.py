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

``FrameReceiver`` is the receive path of the broker and the internal client (issue 9): instead
of being fed bytes it lends the buffers they are received into (``get_buffer`` /
``buffer_updated``, asyncio's ``BufferedProtocol`` shape), so a large frame goes from the
kernel straight into a buffer of its own size, one copy where a stream reader and
``FrameDecoder`` made about four. ``FrameDecoder`` stays for callers that are handed bytes
(the fuzz entry point, tools).

Not thread-safe; one decoder or receiver per connection. After either raises, the stream is
out of sync and must be discarded with its connection.
"""

from __future__ import annotations

import struct
from typing import Final

from tierlog.protocol.errors import FrameError, FrameTooLargeError, MalformedFrameError

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES",
    "SIZE_PREFIX",
    "FrameDecoder",
    "FrameReceiver",
    "frame",
]

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


# FrameReceiver's defaults. A frame of up to SMALL_BUFFER bytes (prefix included) is
# received in the connection's shared buffer and copied out (cheap at that size); one
# recv of up to this much also takes several small pipelined requests at once.
SMALL_BUFFER: Final = 64 * 1024
# A larger frame gets a buffer of its own, of exactly its size, once its first bytes past
# the shared buffer are ready: one copy from the kernel. Past EAGER_FRAME_BYTES the declared
# size is not trusted with memory before the bytes arrive (a client may declare 100 MiB and
# send nothing), so the frame is received in CHUNK_BYTES pieces allocated as bytes arrive and
# joined once complete: Kafka's producers send at most max.request.size (1 MiB) per request,
# so such frames are rare. 2 MiB keeps a 1 MiB produce (plus its headers) on the one-copy path.
EAGER_FRAME_BYTES: Final = 2 * 1024 * 1024
CHUNK_BYTES: Final = 1024 * 1024


class FrameReceiver:
    """Lends receive buffers for a connection's byte stream and returns its frames, each
    received with one copy (kernel to the buffer the frame is read from).

    The I/O layer asks ``get_buffer`` for where to put the next bytes, receives into it
    (``recv_into``; asyncio's ``BufferedProtocol`` does exactly this) and reports how many
    arrived with ``buffer_updated``, which returns the frames completed. Buffer rules:

    - Small frames share one buffer of ``small_buffer`` bytes; each complete frame is copied
      out of it, so that buffer can be reused at once.
    - A frame that does not fit is received into a fresh ``bytearray`` of its own (never
      reused: the frame handed out is a view of it and may live on, e.g. as record bytes in
      the log's write queue). Only its size prefix and first bytes pass through the shared
      buffer; the buffer lent for the rest ends exactly at the frame's end, so the next
      frame starts in the shared buffer again.
    - Its buffer is allocated when ``get_buffer`` is next called, i.e. when more of its
      bytes are ready, never when only the prefix has arrived. Past ``eager_frame_bytes``
      it is allocated in ``CHUNK_BYTES`` pieces as bytes arrive and joined at the end.
    - With ``gate_partial_frames`` a frame that is not complete in the receive that
      completed its size prefix waits for ``admit()`` (``awaiting_admission`` says how many
      bytes it will hold), so the connection can reserve them from
      ``queued.max.request.bytes`` before reading on; meanwhile ``get_buffer`` must not be
      called. Frames that arrive whole never wait.

    Frames are read-only ``memoryview``s without the size prefix (kio's native readers
    refuse writable buffers). Not thread-safe; one receiver per connection. After
    ``buffer_updated`` raises, the stream is out of step: discard the connection.

    Args:
        max_frame_bytes: largest frame accepted (prefix excluded), ``socket.request.max.bytes``.
        small_buffer: size of the shared buffer (frames up to this, prefix included, use it).
        eager_frame_bytes: largest frame given its whole buffer at once.
        gate_partial_frames: whether frames not received whole wait for ``admit()``.
    """

    __slots__ = (
        "_admitted",
        "_big",
        "_chunks",
        "_eager",
        "_end",
        "_failed",
        "_gate",
        "_got",
        "_max",
        "_partial_size",
        "_size",
        "_small",
        "_small_view",
        "_start",
    )

    def __init__(
        self,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        *,
        small_buffer: int = SMALL_BUFFER,
        eager_frame_bytes: int = EAGER_FRAME_BYTES,
        gate_partial_frames: bool = False,
    ) -> None:
        if max_frame_bytes < 0:
            raise ValueError("max_frame_bytes must be >= 0")
        if not 2 * SIZE_PREFIX <= small_buffer <= CHUNK_BYTES:
            raise ValueError(f"small_buffer must be within [{2 * SIZE_PREFIX}, {CHUNK_BYTES}]")
        self._max = max_frame_bytes
        self._eager = eager_frame_bytes
        self._gate = gate_partial_frames
        self._small = bytearray(small_buffer)
        self._small_view = memoryview(self._small)
        # Unparsed bytes of the shared buffer: [_start, _end).
        self._start = 0
        self._end = 0
        # The large frame being received: its declared size (-1: none), the bytes of it
        # received so far, and where they are (one exact buffer, or chunks).
        self._size = -1
        self._got = 0
        self._big: bytearray | None = None
        # The declared size of an incomplete small frame whose prefix is in the shared
        # buffer (-1: none), and whether the incomplete frame, small or large, was admitted.
        self._partial_size = -1
        self._admitted = False
        self._chunks: list[bytearray] = []
        # A bad prefix found after complete frames of the same receive: those are returned
        # first, the error is raised by the next call.
        self._failed: FrameError | None = None

    def limit(self, max_frame_bytes: int) -> None:
        """Change the largest frame accepted from the next size prefix on (a SASL
        listener's peer is held to ``sasl.server.max.receive.size`` until it has
        authenticated)."""
        if max_frame_bytes < 0:
            raise ValueError("max_frame_bytes must be >= 0")
        self._max = max_frame_bytes

    @property
    def buffered(self) -> int:
        """Bytes received of the incomplete frame (prefix included); 0 between frames."""
        if self._size >= 0:
            return SIZE_PREFIX + self._got
        return self._end - self._start

    @property
    def awaiting_admission(self) -> int:
        """Prefix plus declared size of the frame waiting for ``admit()``; 0 otherwise."""
        if not self._gate or self._admitted:
            return 0
        if self._size >= 0:
            return SIZE_PREFIX + self._size
        if self._partial_size >= 0:
            return SIZE_PREFIX + self._partial_size
        return 0

    @property
    def failed(self) -> FrameError | None:
        """The error the next call will raise (a bad prefix behind frames just returned)."""
        return self._failed

    def admit(self) -> None:
        """Lets the frame waiting for admission be received."""
        self._admitted = True

    def get_buffer(self) -> memoryview:
        """A writable, non-empty view to receive the next bytes of the stream into; valid
        until the matching ``buffer_updated``."""
        if self._failed is not None:
            raise self._failed
        if self.awaiting_admission:
            raise RuntimeError("a frame is waiting for admit()")
        if self._size < 0:
            if self._end == len(self._small):
                # Only an incomplete small frame is left here (complete ones were copied
                # out), so moving it to the front always makes room.
                kept = self._end - self._start
                self._small[:kept] = self._small_view[self._start : self._end]
                self._start, self._end = 0, kept
            return self._small_view[self._end :]
        if self._size <= self._eager:
            if self._big is None:
                self._big = self._allocate(self._size)
            return memoryview(self._big)[self._got :]
        if not self._chunks or self._got == CHUNK_BYTES * len(self._chunks):
            self._chunks.append(bytearray(min(CHUNK_BYTES, self._size - self._got)))
        # Chunk i holds bytes [i * CHUNK_BYTES, i * CHUNK_BYTES + its length) of the frame.
        return memoryview(self._chunks[-1])[self._got - CHUNK_BYTES * (len(self._chunks) - 1) :]

    def buffer_updated(self, nbytes: int) -> list[memoryview]:
        """Reports ``nbytes`` received into the last ``get_buffer``; returns the frames
        completed, oldest first.

        Raises:
            FrameTooLargeError: a size prefix exceeds ``max_frame_bytes``.
            MalformedFrameError: a size prefix is negative. A bad prefix behind frames
                completed by the same bytes is raised by the next call (``failed``), so
                that those frames are returned first.
        """
        if self._failed is not None:
            raise self._failed
        if self._size >= 0:
            self._got += nbytes
            if self._got < self._size:
                return []
            return [self._finish_large()]
        self._end += nbytes
        return self._split()

    def _allocate(self, size: int) -> bytearray:
        # The first bytes of the frame came through the shared buffer: move them over.
        big = bytearray(size)
        head = self._small_view[self._start : self._end]
        big[: len(head)] = head
        self._start = self._end = 0
        return big

    def _split(self) -> list[memoryview]:
        frames: list[memoryview] = []
        small = self._small
        pos, end = self._start, self._end
        while end - pos >= SIZE_PREFIX:
            (size,) = _unpack_size(small, pos)
            if size < 0 or size > self._max:
                error = (
                    MalformedFrameError(size) if size < 0 else FrameTooLargeError(size, self._max)
                )
                if not frames:
                    raise error
                self._failed = error
                return frames
            stop = pos + SIZE_PREFIX + size
            if stop <= end:
                frames.append(memoryview(bytes(self._small_view[pos + SIZE_PREFIX : stop])))
                pos = stop
                self._partial_size = -1
                self._admitted = False  # an admission is for one frame
                continue
            if SIZE_PREFIX + size > len(small):
                # Only this frame's bytes are here: the buffer lent for a frame ends with it.
                self._begin_large(size, pos + SIZE_PREFIX, end)
                return frames
            self._partial_size = size
            break
        if pos == end:
            pos = end = 0
        self._start, self._end = pos, end
        return frames

    def _begin_large(self, size: int, body_start: int, end: int) -> None:
        self._size = size
        self._got = end - body_start
        self._partial_size = -1
        if size > self._eager and self._got:
            # Chunked: the first chunk takes the head now (it is small, it arrived).
            first = bytearray(min(CHUNK_BYTES, size))
            first[: self._got] = self._small_view[body_start:end]
            self._chunks = [first]
            body_start = end = 0
        # Otherwise kept in the shared buffer until the frame's buffer is allocated.
        self._start, self._end = body_start, end

    def _finish_large(self) -> memoryview:
        if self._big is not None:
            frame_view = memoryview(self._big).toreadonly()
        else:
            frame_view = memoryview(b"".join(self._chunks))
        self._big = None
        self._chunks = []
        self._size = -1
        self._got = 0
        self._admitted = False
        self._start = self._end = 0
        return frame_view
