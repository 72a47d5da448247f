"""The broker's TCP front: one asyncio task per connection, frames in, responses out.

Requests on one connection are handled one at a time and answered in order, as Kafka does
(a connection is muted while its request is in flight); clients pipeline across connections
and partitions instead. (Reading a connection's next Produce while the previous one waits
for its followers was tried and measured: no gain beyond noise, 89k vs 83k msgs/s median
over five alternating rounds of acks=all on 3 brokers, so Kafka's simpler rule stays.)

Bytes come in through ``FrameStream`` (``tierlog.client.frame_stream``), an asyncio
``BufferedProtocol`` over ``FrameReceiver``: a large request is received straight into a
buffer of its own size and decoded from a read-only view of it, one copy where the stream
reader and ``FrameDecoder`` made about four (issue 9, BENCHMARKS.md "Cluster").

A frame that cannot be read (oversized, malformed, unknown API or version) closes that
connection only; the broker keeps serving everyone else. Fetch answers are written as
bytes plus file slices sent with ``loop.sendfile`` (zero copy); each slice holds a lease on
its segment file (``tierlog.local.segment``), released here exactly once, after the answer
is sent or when sending it fails, the connection closes or the task is cancelled, so a
segment deleted or truncated meanwhile never changes the bytes sent.

Hostile or careless clients are bounded here (``ConnectionLimits``, docs/limits.md): how many
connections in all and per address (Kafka's ``max.connections`` and
``max.connections.per.ip``), how long a connection may sit idle between requests
(``connections.max.idle.ms``), how fast new connections are taken on
(``max.connection.creation.rate``, KIP-612: past it a new connection waits before its first
request is read, as Kafka's acceptor waits before accepting) and how long one request may
take to arrive once its first
byte has (``socket.request.receive.timeout.ms``, tierlog's own: Kafka has no such bound, so a
client sending one byte a second held a connection and its buffer forever), and how many
bytes of requests may be held at once (``queued.max.request.bytes``, ``RequestMemoryPool``).
"""

from __future__ import annotations

import asyncio
import io
import logging
import os
import socket
from collections import Counter, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

from tierlog.broker.network.connection_context import (
    CLIENT_ADDRESS,
    CLIENT_PORT,
    CONNECTION_LISTENER,
    CONNECTION_PROTOCOL,
)
from tierlog.broker.network.connection_security import (
    AuthenticationClosed,
    ListenerSecurity,
    SaslDriver,
    authenticate_connection,
)
from tierlog.broker.network.quotas import SampledRate
from tierlog.client.frame_stream import FrameStream
from tierlog.local.segment import FileSlice
from tierlog.protocol import (
    EncodedFetchResponse,
    ProtocolError,
    Request,
    decode_request,
    encode_response,
)
from tierlog.protocol.framing import FrameReceiver
from tierlog.util.clock import Clock, SystemClock

log = logging.getLogger(__name__)

Handler = Callable[[Request], Awaitable[Any]]
# Drain the socket's buffer when more than this is queued, so a slow reader cannot make
# the broker hold unbounded response bytes in memory.
WRITE_HIGH_WATER = 4 * 1024 * 1024


UNLIMITED = 2**31 - 1  # Kafka's Int.MaxValue: the default of both connection quotas


@dataclass(frozen=True)
class ConnectionLimits:
    """What one broker allows its clients; defaults are Kafka's (tierlog's own key: its
    reason below).

    Attributes:
        max_connections: connections open at once (``max.connections``); one more is
            closed as soon as it is accepted.
        max_connections_per_ip: the same per client address (``max.connections.per.ip``).
        idle_ms: a connection with no request in flight and none arriving is closed after
            this long (``connections.max.idle.ms``, Kafka's 10 minutes).
        request_receive_timeout_ms: once the first byte of a request has arrived, the
            rest must arrive within this (``socket.request.receive.timeout.ms``). 30 s is
            Kafka clients' ``request.timeout.ms``: a client has given up on a request
            that took longer to send, so the broker may too.
    """

    max_connections: int = UNLIMITED
    max_connections_per_ip: int = UNLIMITED
    idle_ms: int = 600_000
    request_receive_timeout_ms: int = 30_000
    queued_max_request_bytes: int = -1
    max_connection_creation_rate: int = UNLIMITED


class RequestMemoryPool:
    """Bytes of requests being received or handled, bounded by ``queued.max.request.bytes``
    (Kafka's non-strict ``SimpleMemoryPool``): a reservation is granted while anything is
    left, even when it is larger than what is left, so one request as large as
    ``socket.request.max.bytes`` always gets in; while the pool is spent, reservations wait
    in arrival order. The pool only counts: memory itself is taken as bytes arrive.

    What reserves (a difference from Kafka, which reserves for every request): a frame that
    does not arrive whole in one receive, from the moment its size prefix is known until it
    has been answered (``FrameReceiver``'s gate). A connection waiting for a reservation
    reads nothing more, so its client's bytes wait in the kernel. Requests that arrive whole
    in one receive (at most 64 KiB, the receiver's shared buffer) are never held back, so
    metadata, heartbeats and small produces keep flowing while large requests queue.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.available = capacity
        self._waiters: deque[asyncio.Future[None]] = deque()

    async def reserve(self, size: int) -> None:
        if self.available > 0 and not self._waiters:
            self.available -= size
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._wake()  # woken, then cancelled: hand the turn on
            elif waiter in self._waiters:  # _wake drops cancelled waiters itself
                self._waiters.remove(waiter)
            raise
        self.available -= size
        self._wake()

    def release(self, size: int) -> None:
        self.available += size
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self.available > 0:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return


@dataclass
class ConnectionStats:
    """Counters of connections the limits ended (event loop only; read by metrics)."""

    refused_max_connections: int = 0
    refused_per_ip: int = 0
    closed_idle: int = 0
    closed_slow_request: int = 0
    throttled_creation: int = 0
    # Authentication on SSL and SASL listeners (Kafka's socket-server-metrics names).
    successful_authentication: int = 0
    successful_reauthentication: int = 0
    failed_authentication: int = 0
    expired_connections_killed: int = 0  # KIP-368: sessions that ended un-renewed


class ConnectionQuotas:
    """The connection limits of a broker, shared by all its listeners as Kafka's
    ``ConnectionQuotas`` and memory pool are: connections in all and per address, the
    creation rate (KIP-612), and the request memory pool. Event loop only."""

    def __init__(self, limits: ConnectionLimits | None = None, clock: Clock | None = None):
        self.limits = limits or ConnectionLimits()
        self.stats = ConnectionStats()
        self.count = 0
        self._per_ip: Counter[str] = Counter()
        self._clock: Clock = clock or SystemClock()
        # Kafka: a pool only when queued.max.request.bytes > 0 (-1, its default, is none).
        capacity = self.limits.queued_max_request_bytes
        self.memory_pool = RequestMemoryPool(capacity) if capacity > 0 else None
        # KIP-612: connections created per second, over Kafka's quota windows (11 x 1 s).
        self._creations = (
            SampledRate(11, 1000) if self.limits.max_connection_creation_rate < UNLIMITED else None
        )

    def admit(self, ip: str) -> bool:
        """Whether a new connection from ``ip`` fits (and if so, count it). Kafka's
        acceptor stops accepting at ``max.connections`` (the backlog waits); asyncio
        accepts for us, so the connection is closed at once instead: the client sees it
        closed and retries with backoff, as it does against a Kafka broker at its per-IP
        limit."""
        limits = self.limits
        if self.count >= limits.max_connections:
            self.stats.refused_max_connections += 1
            log.debug("refusing a connection from %s: max.connections reached", ip)
            return False
        if self._per_ip[ip] >= limits.max_connections_per_ip:
            self.stats.refused_per_ip += 1
            log.debug("refusing a connection from %s: max.connections.per.ip reached", ip)
            return False
        self.count += 1
        self._per_ip[ip] += 1
        return True

    def set_connection_limits(
        self, max_connections: int, max_connections_per_ip: int, max_creation_rate: int
    ) -> None:
        """New ``max.connections``, ``max.connections.per.ip`` and
        ``max.connection.creation.rate`` at runtime (KIP-226): they bound the connections
        accepted from now on; open ones are kept, as Kafka keeps them. A creation rate
        newly bounded starts counting now (Kafka's sensor is created on the change too)."""
        self.limits = replace(
            self.limits,
            max_connections=max_connections,
            max_connections_per_ip=max_connections_per_ip,
            max_connection_creation_rate=max_creation_rate,
        )
        if max_creation_rate >= UNLIMITED:
            self._creations = None
        elif self._creations is None:
            self._creations = SampledRate(11, 1000)

    def release(self, ip: str) -> None:
        self.count -= 1
        self._per_ip[ip] -= 1
        if not self._per_ip[ip]:
            del self._per_ip[ip]

    def creation_delay_ms(self) -> int:
        """How long a new connection waits for ``max.connection.creation.rate`` (Kafka's
        ``ConnectionQuotas``: the rate's throttle time once it is over the bound)."""
        rate = self._creations
        if rate is None:
            return 0
        bound = self.limits.max_connection_creation_rate
        now = self._clock.monotonic_ms()
        rate.record(1, now)
        observed = rate.rate(now)
        if observed <= bound:
            return 0
        self.stats.throttled_creation += 1
        return int(min((observed - bound) / bound * rate.window_size_ms(now), 11 * 1000))


class KafkaServer:
    """One listener: binds its address and serves its connections, under the broker's
    shared ``ConnectionQuotas``. ``listener`` says its name and security (TLS context,
    authenticator); the default is a PLAINTEXT listener where everyone is ANONYMOUS."""

    def __init__(
        self,
        dispatch: Handler,
        host: str,
        port: int,
        max_frame_bytes: int,
        limits: ConnectionLimits | None = None,
        clock: Clock | None = None,
        *,
        quotas: ConnectionQuotas | None = None,
        listener: ListenerSecurity | None = None,
    ) -> None:
        self.dispatch = dispatch
        self.host = host
        self.port = port
        self.max_frame_bytes = max_frame_bytes
        self.quotas = quotas or ConnectionQuotas(limits, clock)
        self.limits = self.quotas.limits
        self.stats = self.quotas.stats
        self.memory_pool = self.quotas.memory_pool
        self.listener = listener or ListenerSecurity()
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._handshakes: set[asyncio.Task[None]] = set()  # TLS handshakes under way
        self.connections_closed_for_errors = 0

    @property
    def connection_count(self) -> int:
        """Connections open on every listener of the broker (the shared quotas' count)."""
        return self.quotas.count

    async def start(self) -> int:
        """Bind, without accepting connections yet (``serve`` starts that, once the broker
        is ready); returns the bound port (useful when asked for port 0). Binding first
        fails fast on a taken port and tells the broker what to register."""
        loop = asyncio.get_running_loop()
        # A TLS listener accepts TCP and runs the handshake itself (_TlsHandshake), so a
        # failed one is logged and counted: asyncio's own ssl= path drops it silently.
        factory: Callable[[], asyncio.BaseProtocol] = (
            self._new_stream if self.listener.ssl_context is None else self._new_handshake
        )
        self._server = await loop.create_server(
            factory,
            self.host,
            self.port,
            reuse_address=True,
            start_serving=False,
        )
        sock = self._server.sockets[0]
        self.port = sock.getsockname()[1]
        return self.port

    async def serve(self) -> None:
        """Start accepting connections."""
        assert self._server is not None, "start() first"
        await self._server.start_serving()

    async def stop(self, timeout_s: float = 10.0) -> None:
        """Stop accepting and end every connection; a connection that has not ended after
        ``timeout_s`` is logged with its stack and left behind, so a stop always ends."""
        if self._server is not None:
            self._server.close()
        for task in list(self._connections) + list(self._handshakes):
            task.cancel()
        if self._connections:
            _, stuck = await asyncio.wait(list(self._connections), timeout=timeout_s)
            for task in stuck:
                log.error("a connection did not end on stop:\n%s", _stack_of(task))
        if self._server is not None and not self._connections:
            await self._server.wait_closed()

    def _new_stream(self) -> FrameStream:
        # Requests not received whole wait for their reservation only when there is a pool
        # to reserve from.
        receiver = FrameReceiver(
            self.max_frame_bytes, gate_partial_frames=self.memory_pool is not None
        )
        return FrameStream(receiver, self._serve)

    def _new_handshake(self) -> _TlsHandshake:
        return _TlsHandshake(self._begin_handshake)

    def _begin_handshake(self, raw: asyncio.Transport) -> None:
        task = asyncio.get_running_loop().create_task(self._handshake(raw))
        self._handshakes.add(task)
        task.add_done_callback(self._handshakes.discard)

    async def _handshake(self, raw: asyncio.Transport) -> None:
        """TLS on an accepted connection, then the connection is served as any other; a
        failed handshake (plaintext sent to a TLS port, an untrusted client certificate)
        is one log line and a failed authentication, as Kafka's SslTransportLayer counts it."""
        context = self.listener.ssl_context
        assert context is not None
        stream = self._new_stream()
        peer = raw.get_extra_info("peername")
        try:
            tls = await asyncio.get_running_loop().start_tls(raw, stream, context, server_side=True)
        except (OSError, TimeoutError, ConnectionError) as exc:
            self.stats.failed_authentication += 1
            log.info(
                "Failed authentication with %s on %s (SSL handshake failed: %s)",
                peer,
                self.listener.name,
                exc,
            )
            raw.abort()
            return
        except asyncio.CancelledError:
            raw.abort()
            raise
        assert isinstance(tls, asyncio.Transport)
        # start_tls does not call connection_made on the protocol it wraps: its transport
        # is the TLS one from here, and the connection is served from here.
        stream.connection_made(tls)

    async def _serve(self, stream: FrameStream) -> None:
        task = asyncio.current_task()
        assert task is not None and stream.transport is not None
        transport = stream.transport
        peer = transport.get_extra_info("peername")
        ip = peer[0] if peer else ""
        if not self.quotas.admit(ip):
            transport.abort()  # no FIN handshake to wait for: it was never served
            return
        self._connections.add(task)
        delay_ms = self.quotas.creation_delay_ms()
        CLIENT_ADDRESS.set(f"/{ip}" if peer else "")
        CLIENT_PORT.set(peer[1] if peer and len(peer) > 1 else None)
        CONNECTION_LISTENER.set(self.listener.name)
        CONNECTION_PROTOCOL.set(self.listener.protocol)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        idle_s = self.limits.idle_ms / 1000
        receive_s = self.limits.request_receive_timeout_ms / 1000
        pool = self.memory_pool
        held = 0  # bytes this connection holds in the pool
        sasl: SaslDriver | None = None
        try:
            peer_text = f"{ip}:{peer[1]}" if peer and len(peer) > 1 else str(peer)
            session = authenticate_connection(self.listener, transport, peer_text)
            if session is None and self.listener.authenticator is not None:
                self.stats.successful_authentication += 1  # SSL: by its certificate
            if session is not None:
                # An unauthenticated peer may not make the broker hold a request as large
                # as socket.request.max.bytes (sasl.server.max.receive.size, Kafka's rule).
                stream.receiver.limit(min(self.max_frame_bytes, session.max_receive_bytes))
                receiver = stream.receiver
                stats = self.stats

                def authenticated(again: bool) -> None:
                    receiver.limit(self.max_frame_bytes)
                    if again:
                        stats.successful_reauthentication += 1
                    else:
                        stats.successful_authentication += 1

                def expired() -> None:
                    stats.expired_connections_killed += 1

                sasl = SaslDriver(session, self.listener, peer_text, authenticated, expired)
            if delay_ms > 0:
                await asyncio.sleep(delay_ms / 1000)
            while True:
                # Between requests the idle limit applies; inside one, the receive limit,
                # counted from its first byte, so trickling bytes does not extend it.
                try:
                    item = await stream.receive(idle_s, receive_s)
                except TimeoutError:
                    partial = stream.partial_since is not None
                    self._timed_out(peer, stream.receiver.buffered, partial)
                    return
                if item is None:
                    return
                if isinstance(item, int):
                    # A partly received request's prefix is known and nothing more of it
                    # is read until its declared size is reserved (the receiver gates
                    # frames only when there is a pool).
                    assert pool is not None
                    await pool.reserve(item)
                    held = item
                    stream.admit()
                    continue
                frame: bytes | memoryview = item
                del item
                if sasl is not None:
                    # The SASL exchange first; afterwards it passes requests on (and
                    # watches for re-authentication, KIP-368).
                    forwarded = await sasl.receive(frame, stream)
                    if forwarded is None:
                        if held:
                            pool.release(held)  # type: ignore[union-attr]
                            held = 0
                        continue
                    frame = forwarded
                request = decode_request(frame)
                del frame  # the request holds what it needs of the frame
                response = await self.dispatch(request)
                if response is not None:  # acks=0 produce: no answer at all
                    await self._send(stream, request, response)
                if held:
                    pool.release(held)  # type: ignore[union-attr]
                    held = 0
                # Bytes of the next request that arrived while this one was handled
                # start its clock now (a long poll is not the client's delay).
                stream.restart_clock()
                if stream.get_write_buffer_size() > 0:
                    await stream.drain()
        except AuthenticationClosed:
            self.stats.failed_authentication += 1
        except ProtocolError as exc:
            self.connections_closed_for_errors += 1
            log.warning("closing connection from %s: %s", peer, _explained(exc, self.listener))
        except ConnectionError:
            pass
        except asyncio.CancelledError:
            pass
        except Exception:
            self.connections_closed_for_errors += 1
            log.exception("closing connection from %s after an unexpected error", peer)
        finally:
            if pool is not None:
                pool.release(held)
            self._connections.discard(task)
            self.quotas.release(ip)
            stream.close()

    def _timed_out(self, peer: Any, buffered: int, partial: bool) -> None:
        if partial:
            self.stats.closed_slow_request += 1
            log.info(
                "closing connection from %s: a request did not arrive within "
                "socket.request.receive.timeout.ms=%d (%d bytes of it received)",
                peer,
                self.limits.request_receive_timeout_ms,
                buffered,
            )
        else:
            self.stats.closed_idle += 1
            log.debug("closing connection from %s: idle past connections.max.idle.ms", peer)

    async def _send(self, stream: FrameStream, request: Request, response: Any) -> None:
        if isinstance(response, EncodedFetchResponse):
            try:
                await self._send_parts(stream, response)
            finally:
                # After loop.sendfile returns or is cancelled it issues no further
                # os.sendfile on the slice's fd, so the fd may be closed from here on.
                response.release()
        elif isinstance(response, bytes):
            stream.write(response)  # already framed (hand-laid encoders)
        else:
            stream.write(encode_response(request, response))
        if stream.get_write_buffer_size() > WRITE_HIGH_WATER:
            await stream.drain()

    async def _send_parts(self, stream: FrameStream, response: EncodedFetchResponse) -> None:
        loop = asyncio.get_running_loop()
        transport = stream.transport
        assert transport is not None
        tls = self.listener.ssl_context is not None
        for part in response.parts:
            if isinstance(part, FileSlice):
                if part.size == 0:
                    continue
                if tls:
                    # No sendfile under TLS (no kTLS, as Kafka's KAFKA-2561): the slice is
                    # read with pread, which leaves the segment fd's offset alone (asyncio's
                    # own fallback seeks it), and encrypted from memory.
                    _write_slice(stream, part)
                    if stream.get_write_buffer_size() > WRITE_HIGH_WATER:
                        await stream.drain()
                    continue
                # A file object over the segment's fd, not owning it; loop.sendfile waits
                # for the bytes queued before it, then sends this range in the kernel.
                with os.fdopen(part.fd, "rb", buffering=0, closefd=False) as file:
                    sent = await loop.sendfile(transport, file, part.position, part.size)
                if sent != part.size:
                    raise ConnectionError(f"sendfile sent {sent} of {part.size} bytes")
            elif isinstance(part, bytes | memoryview):
                stream.write(part)
            else:
                raise TypeError(f"cannot send a {type(part).__name__} in a fetch answer")


# Under TLS a fetch's file slices are read in pieces of this size, so a large answer is
# encrypted and queued piece by piece under the write high-water mark.
TLS_READ_CHUNK = 1024 * 1024


class _TlsHandshake(asyncio.Protocol):
    """A TLS listener's accepted connection until its handshake begins: reading is
    paused at once (no byte reaches the request path in clear) and ``begin`` (the
    server's handshake) takes the transport over."""

    def __init__(self, begin: Callable[[asyncio.Transport], None]) -> None:
        self._begin = begin

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        transport.pause_reading()
        self._begin(transport)


def _write_slice(stream: FrameStream, part: FileSlice) -> None:
    position, end = part.position, part.position + part.size
    while position < end:
        data = os.pread(part.fd, min(TLS_READ_CHUNK, end - position), position)
        if not data:
            raise ConnectionError(f"segment slice ended early at {position} of {end}")
        stream.write(data)
        position += len(data)


def _explained(exc: ProtocolError, listener: ListenerSecurity) -> str:
    """A first frame whose size prefix is a TLS record header (0x16 0x03: handshake, TLS
    major version 3) on a listener without TLS says so, instead of only "too large"."""
    size = getattr(exc, "size", None)
    if listener.ssl_context is None and isinstance(size, int) and size >> 16 == 0x1603:
        return (
            f"{exc} (a TLS handshake, sent to {listener.protocol.value} listener {listener.name})"
        )
    return str(exc)


def _stack_of(task: asyncio.Task[Any]) -> str:
    buffer = io.StringIO()
    task.print_stack(file=buffer)
    return buffer.getvalue()
