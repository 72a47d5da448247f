"""A raw Kafka protocol client for tests: one blocking connection, framed requests built
from version-independent dicts of Kafka field names (``kio_build.build``), and the body of
a consumer's Fetch. Tests that need bytes on the wire a real client would never send (old
versions, odd fields, transactional batches by hand) speak through it."""

from __future__ import annotations

import socket
import ssl
import struct
import uuid
from typing import Any

from kio.index import load_request_schema

from tierlog.protocol import decode_response, encode_request
from tierlog.protocol.kio_build import build


class RawClient:
    """One blocking connection speaking framed requests; every read is bounded. With
    ``tls``, the connection is TLS (to a listener whose certificate names 127.0.0.1)."""

    def __init__(self, port: int, timeout: float = 10.0, tls: ssl.SSLContext | None = None) -> None:
        self.port = port
        self.timeout = timeout
        self.tls = tls
        self.sock = self._connect()
        self.correlation_id = 0

    def _connect(self) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=self.timeout)
        if self.tls is None:
            return sock
        return self.tls.wrap_socket(sock, server_hostname="127.0.0.1")

    def peer_certificate(self) -> bytes | None:
        """The broker's certificate (DER) on a TLS connection, else None."""
        if isinstance(self.sock, ssl.SSLSocket):
            return self.sock.getpeercert(binary_form=True)
        return None

    def close(self) -> None:
        self.sock.close()

    def reconnect(self) -> None:
        self.sock.close()
        self.sock = self._connect()

    def send(self, body: Any) -> int:
        self.correlation_id += 1
        self.sock.sendall(encode_request(body, self.correlation_id, client_id="pv-test"))
        return self.correlation_id

    def read_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self._read_exactly(4))
        return self._read_exactly(size)

    def _read_exactly(self, n: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < n:
            chunk = self.sock.recv(n - len(chunks))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            chunks += chunk
        return bytes(chunks)

    def call(self, body: Any) -> Any:
        """Send ``body`` and return the decoded response of the same API and version."""
        sent = self.send(body)
        correlation_id, response = decode_response(
            self.read_frame(), body.__api_key__, body.__version__
        )
        assert correlation_id == sent
        return response


def request(api_key: int, version: int, data: dict[str, Any]) -> Any:
    return build(load_request_schema(api_key, version), data)


def fetch_body(
    topic: str | uuid.UUID,
    offsets: dict[int, int],
    *,
    session_id: int = 0,
    session_epoch: int = -1,
    forget: tuple[int, ...] = (),
) -> dict[str, Any]:
    """A consumer's Fetch of ``offsets`` (partition -> fetch offset) of ``topic``, a name
    (below v13) or a topic id (v13+); no long poll."""
    key = "topic_id" if isinstance(topic, uuid.UUID) else "topic"
    partitions = [
        {
            "partition": p,
            "current_leader_epoch": -1,
            "fetch_offset": offset,
            "last_fetched_epoch": -1,
            "log_start_offset": -1,
            "partition_max_bytes": 1 << 20,
        }
        for p, offset in offsets.items()
    ]
    return {
        "replica_id": -1,
        "max_wait": 0,
        "min_bytes": 0,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": session_id,
        "session_epoch": session_epoch,
        "topics": [{key: topic, "partitions": partitions}] if partitions else [],
        "forgotten_topics_data": [{key: topic, "partitions": list(forget)}] if forget else [],
        "rack_id": "",
    }
