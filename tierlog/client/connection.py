"""One blocking connection to one broker: framed requests out, decoded responses back.

Not thread-safe: a connection serves one caller at a time (``LogClient`` keeps one per
broker and is itself single-threaded). Every socket operation is bounded by ``timeout``.
"""

from __future__ import annotations

import socket
import struct
from typing import Any

from tierlog.protocol.codec import decode_response, encode_request

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
    """

    def __init__(
        self, host: str, port: int, *, timeout: float = 30.0, client_id: str = "tierlog"
    ) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout
        self.client_id = client_id
        self._sock: socket.socket | None = None
        self._correlation_id = 0

    def __repr__(self) -> str:
        return f"BrokerConnection({self.host}:{self.port})"

    def _connect(self) -> socket.socket:
        if self._sock is None:
            sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._sock = sock
        return self._sock

    def close(self) -> None:
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
            self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
            sent = self._correlation_id
            sock.sendall(encode_request(body, sent, client_id=self.client_id))
            (size,) = _SIZE.unpack(self._read_exactly(sock, 4))
            if not 0 < size <= MAX_RESPONSE_BYTES:
                raise ConnectionClosedError(f"{self}: bad response size {size}")
            frame = self._read_exactly(sock, size)
            correlation_id, response = decode_response(frame, body.__api_key__, body.__version__)
        except BaseException:
            self.close()
            raise
        if correlation_id != sent:
            self.close()
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
