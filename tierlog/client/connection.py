"""One blocking connection to one broker: framed requests out, decoded responses back.

Not thread-safe: a connection serves one caller at a time (``LogClient`` keeps one per
broker and is itself single-threaded). Every socket operation is bounded by ``timeout``.

With a ``ClientSecurity`` the socket is wrapped in TLS (SSL, SASL_SSL) and, for SASL, logs
in (``tierlog.security.sasl_client``'s exchange) before the first request goes out; each
reconnection does both again. A session the broker says expires (KIP-368) is renewed on the
same socket before the call that falls due, as Kafka's clients do.
"""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

from tierlog.protocol.codec import decode_response, encode_request
from tierlog.security.client_config import ClientSecurity
from tierlog.security.sasl_client import reauthentication_delay_s, sasl_exchange

_SIZE = struct.Struct(">i")
# A response larger than this is not a Kafka response (fetch.max.bytes tops out far lower).
MAX_RESPONSE_BYTES = 1 << 30


class ConnectionClosedError(ConnectionError):
    """The broker closed the connection or sent something that is not a response."""


class BrokerConnection:
    """A socket to ``host:port`` speaking Kafka's framing.

    Args:
        host, port: the broker's advertised listener.
        timeout: seconds for connect and for each send/receive.
        client_id: the request header's client id (shows in broker logs).
        security: TLS and SASL settings (None: PLAINTEXT).
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        timeout: float = 30.0,
        client_id: str = "tierlog",
        security: ClientSecurity | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout
        self.client_id = client_id
        self.security = security
        self._sock: socket.socket | None = None
        self._correlation_id = 0
        self._reauthenticate_at: float | None = None  # time.monotonic(); None: never

    def __repr__(self) -> str:
        return f"BrokerConnection({self.host}:{self.port})"

    def _connect(self) -> socket.socket:
        if self._sock is None:
            sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                context = self.security.ssl_context() if self.security else None
                if context is not None:
                    sock = context.wrap_socket(sock, server_hostname=self.host)
                self._login(sock)
            except BaseException:
                sock.close()
                raise
            self._sock = sock
        return self._sock

    def _login(self, sock: socket.socket) -> None:
        """The SASL exchange, if any, on a new connection.

        Raises:
            SaslAuthenticationFailedError: the broker refused the login.
        """
        client = self.security.sasl_client() if self.security else None
        if client is None:
            return
        steps = sasl_exchange(client, f"{self.host}:{self.port}")
        request = next(steps)
        while True:
            try:
                request = steps.send(self._exchange(sock, request))
            except StopIteration as done:
                delay = reauthentication_delay_s(done.value)
                self._reauthenticate_at = None if delay is None else time.monotonic() + delay
                return

    def close(self) -> None:
        self._reauthenticate_at = None  # a new connection logs in afresh
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None

    def call(self, body: Any) -> Any:
        """Send the kio request ``body`` and return its decoded response.

        Raises:
            ConnectionClosedError, OSError: the connection failed; it is closed, and the
                next call reconnects.
        """
        try:
            sock = self._connect()
            due = self._reauthenticate_at
            if due is not None and time.monotonic() >= due:
                self._login(sock)
            return self._exchange(sock, body)
        except BaseException:
            self.close()
            raise

    def _exchange(self, sock: socket.socket, body: Any) -> Any:
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        sent = self._correlation_id
        sock.sendall(encode_request(body, sent, client_id=self.client_id))
        (size,) = _SIZE.unpack(self._read_exactly(sock, 4))
        if not 0 < size <= MAX_RESPONSE_BYTES:
            raise ConnectionClosedError(f"{self}: bad response size {size}")
        frame = self._read_exactly(sock, size)
        correlation_id, response = decode_response(frame, body.__api_key__, body.__version__)
        if correlation_id != sent:
            raise ConnectionClosedError(
                f"{self}: response to request {correlation_id}, expected {sent}"
            )
        return response

    @staticmethod
    def _read_exactly(sock: socket.socket, n: int) -> bytes:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            read = sock.recv_into(view[got:], n - got)
            if not read:
                raise ConnectionClosedError("the broker closed the connection")
            got += read
        return bytes(buf)
