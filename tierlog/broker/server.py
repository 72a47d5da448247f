"""The broker's TCP front: one asyncio task per connection, frames in, responses out.

Requests on one connection are handled one at a time and answered in order, as Kafka does
(a connection is muted while its request is in flight); clients pipeline across connections
and partitions instead. A frame that cannot be read (oversized, malformed, unknown API or
version) closes that connection only; the broker keeps serving everyone else. Fetch answers
are written as bytes plus file slices sent with ``loop.sendfile`` (zero copy); each slice
holds a lease on its segment file (``tierlog.local.segment``), released here exactly once,
after the answer is sent or when sending it fails, the connection closes or the task is
cancelled, so a segment deleted or truncated meanwhile never changes the bytes sent.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any

from tierlog.local.segment import FileSlice
from tierlog.protocol import (
    EncodedFetchResponse,
    FrameDecoder,
    ProtocolError,
    Request,
    decode_request,
    encode_response,
)

log = logging.getLogger(__name__)

Handler = Callable[[Request], Awaitable[Any]]
# The address of the client whose request is being handled ("/127.0.0.1", Kafka's form),
# set per connection task; consumer groups report it as the member's client host.
CLIENT_ADDRESS: ContextVar[str] = ContextVar("client_address", default="")
READ_CHUNK = 256 * 1024
# Drain the socket's buffer when more than this is queued, so a slow reader cannot make
# the broker hold unbounded response bytes in memory.
WRITE_HIGH_WATER = 4 * 1024 * 1024


class KafkaServer:
    def __init__(self, dispatch: Handler, host: str, port: int, max_frame_bytes: int) -> None:
        self.dispatch = dispatch
        self.host = host
        self.port = port
        self.max_frame_bytes = max_frame_bytes
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self.connections_closed_for_errors = 0

    async def start(self) -> int:
        """Bind, without accepting connections yet (``serve`` starts that, once the broker
        is ready); returns the bound port (useful when asked for port 0). Binding first
        fails fast on a taken port and tells the broker what to register."""
        self._server = await asyncio.start_server(
            self._serve,
            self.host,
            self.port,
            reuse_address=True,
            limit=READ_CHUNK,
            start_serving=False,
        )
        sock = self._server.sockets[0]
        self.port = sock.getsockname()[1]
        return self.port

    async def serve(self) -> None:
        """Start accepting connections."""
        assert self._server is not None, "start() first"
        await self._server.start_serving()

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        peer = writer.get_extra_info("peername")
        CLIENT_ADDRESS.set(f"/{peer[0]}" if peer else "")
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        decoder = FrameDecoder(self.max_frame_bytes)
        try:
            while True:
                data = await reader.read(READ_CHUNK)
                if not data:
                    return
                for frame in decoder.feed(data):
                    request = decode_request(frame)
                    response = await self.dispatch(request)
                    if response is None:
                        continue  # acks=0 produce: no answer at all
                    await self._send(writer, request, response)
                if writer.transport.get_write_buffer_size() > 0:
                    await writer.drain()
        except ProtocolError as exc:
            self.connections_closed_for_errors += 1
            log.warning("closing connection from %s: %s", peer, exc)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass
        except Exception:
            self.connections_closed_for_errors += 1
            log.exception("closing connection from %s after an unexpected error", peer)
        finally:
            self._connections.discard(task)
            writer.close()

    async def _send(self, writer: asyncio.StreamWriter, request: Request, response: Any) -> None:
        if isinstance(response, EncodedFetchResponse):
            try:
                await self._send_parts(writer, response)
            finally:
                # After loop.sendfile returns or is cancelled it issues no further
                # os.sendfile on the slice's fd, so the fd may be closed from here on.
                response.release()
        elif isinstance(response, bytes):
            writer.write(response)  # already framed (hand-laid encoders)
        else:
            writer.write(encode_response(request, response))
        if writer.transport.get_write_buffer_size() > WRITE_HIGH_WATER:
            await writer.drain()

    async def _send_parts(
        self, writer: asyncio.StreamWriter, response: EncodedFetchResponse
    ) -> None:
        loop = asyncio.get_running_loop()
        for part in response.parts:
            if isinstance(part, FileSlice):
                if part.size == 0:
                    continue
                # A file object over the segment's fd, not owning it; loop.sendfile waits
                # for the bytes queued before it, then sends this range in the kernel.
                with os.fdopen(part.fd, "rb", buffering=0, closefd=False) as file:
                    sent = await loop.sendfile(writer.transport, file, part.position, part.size)
                if sent != part.size:
                    raise ConnectionError(f"sendfile sent {sent} of {part.size} bytes")
            elif isinstance(part, bytes | memoryview):
                writer.write(part)
            else:
                raise TypeError(f"cannot send a {type(part).__name__} in a fetch answer")
