"""AsyncConnection against a real broker (a child process), and against small servers
that misbehave: wrong correlation id, silence, a closed connection."""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.metadata.v12.request import MetadataRequest

from tests.broker.harness import BrokerProcess
from tierlog.client.async_connection import AsyncConnection, ConnectionClosedError
from tierlog.protocol import ApiKey
from tierlog.protocol.kio_build import build

Serve = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("async-connection") / "data").start()
    try:
        yield process
    finally:
        process.stop()


def api_versions() -> ApiVersionsRequest:
    return ApiVersionsRequest(client_software_name="tierlog", client_software_version="0")


def test_requests_and_answers_of_the_same_version(broker: BrokerProcess) -> None:
    async def scenario() -> None:
        connection = await AsyncConnection.open("127.0.0.1", broker.port, client_id="test")
        try:
            versions = await connection.request(api_versions())
            assert versions.error_code == 0
            keys = {int(k.api_key) for k in versions.api_keys}
            assert {ApiKey.FETCH, ApiKey.PRODUCE, ApiKey.OFFSET_FOR_LEADER_EPOCH} <= keys
            metadata = await connection.request(
                build(
                    MetadataRequest,
                    {
                        "topics": None,
                        "allow_auto_topic_creation": False,
                        "include_topic_authorized_operations": False,
                    },
                )
            )
            assert [int(b.port) for b in metadata.brokers] == [broker.port]
            # Requests from several tasks take turns on the one connection.
            answers = await asyncio.gather(*(connection.request(api_versions()) for _ in range(5)))
            assert all(a.error_code == 0 for a in answers)
        finally:
            await connection.close()
        assert connection.closed
        with pytest.raises(ConnectionClosedError):
            await connection.request(api_versions())
        await connection.close()  # idempotent

    asyncio.run(scenario())


async def start(serve: Serve) -> tuple[asyncio.Server, int]:
    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def read_request(reader: asyncio.StreamReader) -> int:
    """Reads one request frame; returns its correlation id."""
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    frame = await reader.readexactly(size)
    return int(struct.unpack_from(">i", frame, 4)[0])


def test_an_answer_to_another_request_closes_the_connection(broker: BrokerProcess) -> None:
    async def scenario() -> None:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            # Relay to the real broker, but answer with the correlation id off by one.
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            request = await reader.readexactly(size)
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", broker.port)
            up_writer.write(struct.pack(">i", size) + request)
            (size,) = struct.unpack(">i", await up_reader.readexactly(4))
            answer = bytearray(await up_reader.readexactly(size))
            up_writer.close()
            (correlation_id,) = struct.unpack_from(">i", answer, 0)
            struct.pack_into(">i", answer, 0, correlation_id + 1)
            writer.write(struct.pack(">i", size) + bytes(answer))
            await writer.drain()
            await reader.read()

        server, port = await start(serve)
        connection = await AsyncConnection.open("127.0.0.1", port)
        with pytest.raises(ConnectionClosedError, match="expected"):
            await connection.request(api_versions())
        assert connection.closed
        server.close()

    asyncio.run(scenario())


def test_a_silent_broker_times_the_request_out(tmp_path: Path) -> None:
    async def scenario() -> None:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await read_request(reader)
            await reader.read()  # never answers

        server, port = await start(serve)
        connection = await AsyncConnection.open("127.0.0.1", port, request_timeout=0.2)
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(TimeoutError):
            await connection.request(api_versions())
        assert loop.time() - started < 2
        assert connection.closed  # a half-answered stream cannot be reused
        server.close()

    asyncio.run(scenario())


def test_a_broker_closing_the_connection_is_an_error(tmp_path: Path) -> None:
    async def scenario() -> None:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await read_request(reader)
            writer.close()

        server, port = await start(serve)
        connection = await AsyncConnection.open("127.0.0.1", port)
        with pytest.raises(ConnectionClosedError, match="closed"):
            await connection.request(api_versions())
        server.close()

    asyncio.run(scenario())


def test_connecting_to_nobody_fails_fast() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, not listening: refused

        async def scenario() -> None:
            with pytest.raises(OSError):
                await AsyncConnection.open("127.0.0.1", port, connect_timeout=1)

        asyncio.run(scenario())
