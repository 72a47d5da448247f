"""An asyncio connection that reads Kafka frames with one copy: a ``BufferedProtocol`` over
``FrameReceiver``, awaited one frame at a time like a stream reader.

asyncio's ``StreamReader`` copies every byte about three times before a frame decoder sees
it (``recv`` into fresh bytes, extended into its buffer, copied out by ``read``) and the
decoder joined a large frame's pieces once more. Here the transport receives straight into
the buffer ``FrameReceiver`` lends (``get_buffer`` / ``buffer_updated``): for a large frame,
a buffer of exactly its size, handed on as a read-only view (issue 9).

Flow control, reading: the protocol keeps reading while fewer than ``queue_limit`` bytes of
complete frames wait for the reader, like a stream reader's limit; a large frame always
reaches it, so a connection holds at most one large frame besides the one being handled.
A frame waiting for admission (``FrameReceiver``'s gate, for ``queued.max.request.bytes``)
also stops reading, until the reader calls ``admit``.
Writing: ``pause_writing`` / ``resume_writing`` from the transport, awaited by ``drain``.
The transport stays a plain selector socket transport, so ``loop.sendfile`` on it takes
the ``os.sendfile`` path.

Event loop only; one reader at a time. Both ends of a connection use it: the asyncio
client (``async_connection``) and the broker's server, as Kafka's broker reads through
its clients' network layer; it lives here, above the sans-I/O ``protocol`` it drives.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any

from tierlog.protocol.errors import ProtocolError
from tierlog.protocol.framing import SMALL_BUFFER, FrameReceiver

__all__ = ["FrameStream"]


class FrameStream(asyncio.BufferedProtocol):
    """One connection's frames in, bytes out.

    Args:
        receiver: the framing state of this connection.
        on_open: started as a task once connected (a server's per-connection handler);
            the task is ``task``.
        queue_limit: bytes of complete frames held for the reader before reading stops.
    """

    def __init__(
        self,
        receiver: FrameReceiver,
        on_open: Callable[[FrameStream], Coroutine[Any, Any, None]] | None = None,
        *,
        queue_limit: int = SMALL_BUFFER,
    ) -> None:
        self.receiver = receiver
        self.transport: asyncio.Transport | None = None
        self.task: asyncio.Task[None] | None = None
        # When the first byte of the frame being received arrived (loop time); None
        # between frames. The server's socket.request.receive.timeout.ms counts from it.
        self.partial_since: float | None = None
        self._on_open = on_open
        self._queue_limit = queue_limit
        self._frames: deque[memoryview] = deque()
        self._queued = 0
        self._error: BaseException | None = None
        self._eof = False
        self._lost = False
        self._reading = True
        self._waiter: asyncio.Future[None] | None = None
        self._write_paused = False
        self._drain_waiters: list[asyncio.Future[None]] = []
        self._loop = asyncio.get_running_loop()
        self._closed = self._loop.create_future()

    # -- asyncio callbacks -------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        if self._on_open is not None:
            self.task = self._loop.create_task(self._on_open(self))

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.receiver.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        try:
            frames = self.receiver.buffer_updated(nbytes)
        except ProtocolError as exc:
            # Raising here would make the transport log a fatal error; the reader gets
            # it after the frames before it and closes the connection itself.
            self._error = exc
            self._pause()
            self._wake()
            return
        for frame in frames:
            self._frames.append(frame)
            self._queued += len(frame)
        receiver = self.receiver
        if receiver.failed is not None:  # a bad prefix behind these frames
            self._error = receiver.failed
            self._pause()
            self._wake()
            return
        begun = False
        if not receiver.buffered:
            self.partial_since = None
        elif self.partial_since is None:
            self.partial_since = self._loop.time()
            begun = True  # the reader's deadline changes to the frame's
        if self._queued >= self._queue_limit or receiver.awaiting_admission:
            self._pause()
        if frames or begun or receiver.awaiting_admission:
            self._wake()

    def eof_received(self) -> bool:
        self._eof = True
        self._wake()
        # Keep the transport open: answers to frames read may still go out. TLS has no
        # half-close (asyncio warns and closes anyway), so there the answer is False.
        transport = self.transport
        return transport is None or transport.get_extra_info("sslcontext") is None

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self._eof = True
        if exc is not None and self._error is None:
            self._error = exc
        self._wake()
        for waiter in self._drain_waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._drain_waiters.clear()
        if not self._closed.done():
            self._closed.set_result(None)

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        for waiter in self._drain_waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._drain_waiters.clear()

    # -- the reader's side -------------------------------------------------------------

    async def receive(
        self, idle_timeout: float | None = None, frame_timeout: float | None = None
    ) -> memoryview | int | None:
        """The next complete frame (a read-only view, without its size prefix); or, when
        the receiver gates frames, the bytes the next one will hold, to reserve
        before calling ``admit`` (nothing more is read until then); or None once the peer
        has closed its side and every frame before that was returned.

        Args:
            idle_timeout: seconds to wait while no frame has begun to arrive.
            frame_timeout: seconds a frame may take to arrive, from its first byte
                (``partial_since``).

        Raises:
            TimeoutError: one of the timeouts passed (``partial_since`` says which).
            ProtocolError: a size prefix is bad (the frames before it were returned).
            ConnectionError: the connection was lost with an error.
        """
        loop = self._loop
        idle_deadline = None if idle_timeout is None else loop.time() + idle_timeout
        while True:
            if self._frames:
                frame = self._frames.popleft()
                self._queued -= len(frame)
                self._maybe_resume()
                return frame
            if self._error is not None:
                if isinstance(self._error, ProtocolError | ConnectionError):
                    raise self._error
                raise ConnectionResetError(str(self._error)) from self._error
            pending = self.receiver.awaiting_admission
            if pending:
                return pending
            if self._eof:
                return None
            self._maybe_resume()
            if self.partial_since is not None and frame_timeout is not None:
                deadline: float | None = self.partial_since + frame_timeout
            else:
                deadline = idle_deadline
            self._waiter = waiter = loop.create_future()
            # A timer that fails the waiter, rather than asyncio.timeout_at: a broker waits
            # here before every request, and the context manager (its task lookup, its
            # cancel-and-uncancel) cost more than the wait itself (profiled, bench/tls.py).
            timer = None if deadline is None else loop.call_at(deadline, _expire, waiter)
            try:
                await waiter
            finally:
                self._waiter = None
                if timer is not None:
                    timer.cancel()

    def admit(self) -> None:
        """Lets the frame ``receive`` announced be read; its receive clock restarts
        (the wait for admission was the broker's, not the client's)."""
        self.receiver.admit()
        self.partial_since = self._loop.time()
        self._maybe_resume()

    def restart_clock(self) -> None:
        """Restarts the receive clock of a frame begun while the previous one was handled
        (the time spent handling it, e.g. a long poll, is not the client's delay)."""
        self.partial_since = self._loop.time() if self.receiver.buffered else None

    def write(self, data: Any) -> None:
        assert self.transport is not None
        self.transport.write(data)

    def get_write_buffer_size(self) -> int:
        assert self.transport is not None
        return self.transport.get_write_buffer_size()

    async def drain(self) -> None:
        """Waits until the transport's write buffer is below its high-water mark.

        Raises:
            ConnectionResetError: the connection is lost.
        """
        if self._lost:
            raise ConnectionResetError("connection lost")
        if self._write_paused:
            waiter = self._loop.create_future()
            self._drain_waiters.append(waiter)
            await waiter
            if self._lost:
                raise ConnectionResetError("connection lost")

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    async def wait_closed(self) -> None:
        """Returns once the connection is lost (after ``close``, or the peer's doing)."""
        await asyncio.shield(self._closed)

    # -- flow control ------------------------------------------------------------------

    def _pause(self) -> None:
        if self._reading and self.transport is not None and not self._lost:
            self._reading = False
            self.transport.pause_reading()

    def _maybe_resume(self) -> None:
        if (
            not self._reading
            and not self._lost
            and self._error is None
            and self._queued < self._queue_limit
            and not self.receiver.awaiting_admission
            and self.transport is not None
        ):
            self._reading = True
            self.transport.resume_reading()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError())
