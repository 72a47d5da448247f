"""One asyncio connection to one broker: kio requests out, decoded responses back.

The event-loop twin of ``connection.BrokerConnection``, for brokers talking to brokers
(replica fetchers, AlterPartition to the controller). Built on ``tierlog.protocol``'s
codecs: ``encode_request`` frames a request, ``FrameStream`` (a ``BufferedProtocol`` over
``FrameReceiver``) reads each answer into a buffer of its own, one copy from the kernel (issue
9: a follower's fetch answers are ~1 MB), and ``decode_response`` reads it as the response of
the request's API and version.

Requests on one connection are sent one at a time (a lock), each answered before the next
goes out, so every answer's correlation id must be the one just sent; anything else means
the stream is out of step and the connection is closed. Connecting and each request are
bounded in time. Not thread-safe: one event loop.

With a ``ClientSecurity`` (brokers use their inter-broker listener's), ``open`` connects
over TLS and logs in over SASL (``tierlog.security.sasl_client``'s exchange, the same the
blocking connection drives) within ``connect_timeout``; a refused login is a
``SaslAuthenticationFailedError``, a ``ConnectionError`` like any failed connection.
When the broker says the session expires (``connections.max.reauth.ms``, KIP-368), the
connection logs in again on the same socket before the request that falls due, as Kafka's
clients do; otherwise the broker would close it, and a replica fetcher would stall for a
reconnection each session.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from typing import Any

from tierlog.client.frame_stream import FrameStream
from tierlog.protocol.codec import decode_response, encode_request
from tierlog.protocol.framing import FrameReceiver
from tierlog.security.client_config import ClientSecurity
from tierlog.security.sasl_client import reauthentication_delay_s, sasl_exchange

# A response larger than this is not a Kafka response (fetch.max.bytes tops out far lower).
MAX_RESPONSE_BYTES = 1 << 30
# Answers up to this get their whole buffer as soon as their first bytes are in (a broker is
# trusted that far: replica.fetch.response.max.bytes is 10 MiB by default); a larger size
# prefix, more likely a stream out of step, takes memory only as its bytes arrive.
EAGER_RESPONSE_BYTES = 64 << 20


class ConnectionClosedError(ConnectionError):
    """The connection is closed, the broker closed it, or it answered out of step."""


class AsyncConnection:
    """A connection to ``host:port`` speaking Kafka's framing; make one with ``open``.

    Args:
        stream: the connected protocol.
        host, port: where it goes (for messages).
        client_id: the request header's client id (shows in broker logs).
        request_timeout: seconds a request may take unless ``request`` says otherwise
            (Kafka's request.timeout.ms is 30 s).
    """

    def __init__(
        self,
        stream: FrameStream,
        host: str,
        port: int,
        *,
        client_id: str = "tierlog",
        request_timeout: float = 30.0,
    ) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.request_timeout = request_timeout
        self._stream = stream
        self._correlation_id = 0
        self._lock = asyncio.Lock()
        self._closed = False
        self._security: ClientSecurity | None = None
        self._reauthenticate_at: float | None = None  # loop time; None: never

    @classmethod
    async def open(
        cls,
        host: str,
        port: int,
        *,
        client_id: str = "tierlog",
        connect_timeout: float = 10.0,
        request_timeout: float = 30.0,
        security: ClientSecurity | None = None,
    ) -> AsyncConnection:
        """Connect (and, per ``security``, do TLS and log in), within ``connect_timeout``
        seconds.

        Raises:
            OSError, TimeoutError: no connection.
            SaslAuthenticationFailedError (an OSError): the broker refused the login.
            SecurityConfigError: the TLS settings cannot be used.
        """
        loop = asyncio.get_running_loop()

        def new_stream() -> FrameStream:
            receiver = FrameReceiver(MAX_RESPONSE_BYTES, eager_frame_bytes=EAGER_RESPONSE_BYTES)
            return FrameStream(receiver)

        context = security.ssl_context() if security else None
        async with asyncio.timeout(connect_timeout):
            if context is None:
                transport, stream = await loop.create_connection(new_stream, host, port)
            else:
                transport, stream = await loop.create_connection(
                    new_stream, host, port, ssl=context, server_hostname=host
                )
            sock = transport.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            connection = cls(
                stream, host, port, client_id=client_id, request_timeout=request_timeout
            )
            connection._security = security
            try:
                await connection._login()
            except BaseException:
                connection._abort()
                raise
        return connection

    async def _login(self) -> None:
        """The SASL exchange, if the security settings have a mechanism; it sets when to
        log in again."""
        client = self._security.sasl_client() if self._security else None
        if client is None:
            return
        steps = sasl_exchange(client, f"{self.host}:{self.port}")
        request = next(steps)
        while True:
            answer = await self._exchange(request)
            try:
                request = steps.send(answer)
            except StopIteration as done:
                delay = reauthentication_delay_s(done.value)
                loop = asyncio.get_running_loop()
                self._reauthenticate_at = None if delay is None else loop.time() + delay
                return

    @property
    def closed(self) -> bool:
        return self._closed

    def __repr__(self) -> str:
        return f"AsyncConnection({self.host}:{self.port})"

    async def request(self, body: Any, timeout: float | None = None) -> Any:
        """Send the kio request ``body``; return the kio response of the same API and
        version.

        Args:
            timeout: seconds for the whole exchange (default ``request_timeout``); a long
                poll's timeout must cover its max wait.

        Raises:
            ConnectionClosedError, OSError, TimeoutError: the exchange failed; the
                connection is closed (a half-read answer cannot be resumed).
        """
        if self._closed:
            raise ConnectionClosedError(f"{self} is closed")
        async with self._lock:
            try:
                async with asyncio.timeout(
                    timeout if timeout is not None else self.request_timeout
                ):
                    due = self._reauthenticate_at
                    if due is not None and asyncio.get_running_loop().time() >= due:
                        await self._login()
                    return await self._exchange(body)
            except BaseException:
                self._abort()
                raise

    async def _exchange(self, body: Any) -> Any:
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        sent = self._correlation_id
        self._stream.write(encode_request(body, sent, client_id=self.client_id))
        await self._stream.drain()
        frame = await self._next_frame()
        correlation_id, response = decode_response(frame, body.__api_key__, body.__version__)
        if correlation_id != sent:
            raise ConnectionClosedError(
                f"{self}: response to request {correlation_id}, expected {sent}"
            )
        return response

    async def _next_frame(self) -> memoryview:
        frame = await self._stream.receive()
        if frame is None:
            raise ConnectionClosedError(f"{self}: the broker closed the connection")
        assert not isinstance(frame, int)  # the receiver gates nothing
        return frame

    def _abort(self) -> None:
        if not self._closed:
            self._closed = True
            self._stream.close()

    async def close(self) -> None:
        """Close the connection (idempotent); a request in flight fails."""
        if self._closed:
            return
        self._closed = True
        self._stream.close()
        # Closing anyway; the peer may have gone.
        with contextlib.suppress(OSError, TimeoutError):
            await asyncio.wait_for(self._stream.wait_closed(), 1.0)
