"""Requests from this broker to another: one lazily opened connection per peer.

The transaction coordinator sends WriteTxnMarkers to partition leaders and a partition
leader asks a transaction's coordinator whether a partition is in it (AddPartitionsToTxn
v4, verify only). Both go through ``PeerChannels``: a connection per broker id, opened on
first use, dropped on any failure (the caller retries, and the next request reconnects to
wherever the broker now listens).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from tierlog.client.async_connection import AsyncConnection
from tierlog.security.client_config import ClientSecurity

AddressOf = Callable[[int], "tuple[str, int] | None"]


class PeerUnavailableError(ConnectionError):
    """The broker is not registered, or the exchange with it failed."""


class PeerChannels:
    """Args:
    address_of: a live broker's (host, port), None when it is not registered.
    client_id: the request header's client id (shows in the peer's logs).
    request_timeout: seconds per request.
    security: TLS and SASL of the inter-broker listener (None: PLAINTEXT).
    """

    def __init__(
        self,
        address_of: AddressOf,
        *,
        client_id: str = "tierlog-txn",
        request_timeout: float = 10.0,
        security: ClientSecurity | None = None,
    ) -> None:
        self.address_of = address_of
        self.security = security
        self.client_id = client_id
        self.request_timeout = request_timeout
        self._connections: dict[int, AsyncConnection] = {}
        self._opening: dict[int, asyncio.Lock] = {}

    async def request(self, broker_id: int, body: Any) -> Any:
        """``body``'s answer from ``broker_id``.

        Raises:
            PeerUnavailableError: no such live broker, or the exchange failed.
        """
        connection = await self._connection(broker_id)
        try:
            return await connection.request(body, self.request_timeout)
        except (OSError, TimeoutError) as exc:
            self._connections.pop(broker_id, None)
            raise PeerUnavailableError(f"broker {broker_id}: {exc}") from exc

    async def _connection(self, broker_id: int) -> AsyncConnection:
        lock = self._opening.setdefault(broker_id, asyncio.Lock())
        async with lock:
            connection = self._connections.get(broker_id)
            if connection is not None and not connection.closed:
                return connection
            address = self.address_of(broker_id)
            if address is None:
                raise PeerUnavailableError(f"broker {broker_id} is not registered")
            try:
                connection = await AsyncConnection.open(
                    *address,
                    client_id=self.client_id,
                    connect_timeout=self.request_timeout,
                    request_timeout=self.request_timeout,
                    security=self.security,
                )
            except (OSError, TimeoutError) as exc:
                raise PeerUnavailableError(f"broker {broker_id} at {address}: {exc}") from exc
            self._connections[broker_id] = connection
            return connection

    async def close(self) -> None:
        connections, self._connections = list(self._connections.values()), {}
        for connection in connections:
            with contextlib.suppress(Exception):
                await connection.close()
