"""KafkaServer's receive path (issue 9) in one process: a large request reaches the decoder
as a read-only view of a buffer of exactly its size (one copy), pipelined requests are
answered in order, the pool is reserved and given back, and fetch answers still leave
through ``os.sendfile`` on the new protocol's transport."""

from __future__ import annotations

import asyncio
import os
import struct
import tempfile
from typing import Any

import pytest
from kio.index import load_request_schema

import tierlog.broker.network.server as server_module
from tierlog.broker.network.server import ConnectionLimits, KafkaServer
from tierlog.local.segment import FileSlice
from tierlog.protocol import ApiKey, EncodedFetchResponse, Request, encode_request
from tierlog.protocol.kio_build import build
from tierlog.records.builder import Record, build_batch

MIB = 1 << 20


def produce(correlation_id: int, value_bytes: int, acks: int = 0) -> bytes:
    body = build(
        load_request_schema(ApiKey.PRODUCE, 9),
        {
            "transactional_id": None,
            "acks": acks,
            "timeout": 5000,
            "topic_data": [
                {
                    "name": "t",
                    "partition_data": [
                        {"index": 0, "records": build_batch([Record(b"k", bytes(value_bytes))])}
                    ],
                }
            ],
        },
    )
    return encode_request(body, correlation_id)


def api_versions(correlation_id: int) -> bytes:
    return encode_request(build(load_request_schema(ApiKey.API_VERSIONS, 0), {}), correlation_id)


def echo_id(request: Request) -> bytes:
    return struct.pack(">ii", 4, request.correlation_id)


async def read_answer(reader: asyncio.StreamReader) -> bytes:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    return await reader.readexactly(size)


async def run_server(dispatch: Any, **limits: Any) -> tuple[KafkaServer, int]:
    server = KafkaServer(dispatch, "127.0.0.1", 0, 100 * MIB, ConnectionLimits(**limits))
    port = await server.start()
    await server.serve()
    return server, port


def test_large_frame_is_one_buffer_and_answers_stay_in_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    frames: list[memoryview] = []
    decode = server_module.decode_request

    def spy(frame: memoryview) -> Request:
        frames.append(frame)
        return decode(frame)

    monkeypatch.setattr(server_module, "decode_request", spy)

    async def dispatch(request: Request) -> Any:
        body: Any = request.body
        if request.api_key == ApiKey.PRODUCE and body.acks == 0:
            return None
        await asyncio.sleep(0.01)  # handled one at a time: later ones wait
        return echo_id(request)

    async def scenario() -> list[int]:
        server, port = await run_server(dispatch)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        # Pipelined: small, large acks=0 (no answer), large acks=1, small.
        writer.write(api_versions(1) + produce(2, MIB) + produce(3, MIB, acks=1) + api_versions(4))
        await writer.drain()
        ids = [struct.unpack(">i", (await read_answer(reader))[:4])[0] for _ in range(3)]
        writer.close()
        await server.stop()
        return ids

    assert asyncio.run(scenario()) == [1, 3, 4]
    large = [f for f in frames if len(f) > MIB]
    assert len(large) == 2
    for frame in large:
        assert frame.readonly
        # The frame's own buffer, exactly its size: received once, never joined.
        assert isinstance(frame.obj, bytearray) and len(frame.obj) == len(frame)


def test_pool_is_reserved_for_large_frames_and_given_back() -> None:
    async def dispatch(request: Request) -> Any:
        return echo_id(request)

    async def scenario() -> None:
        server, port = await run_server(dispatch, queued_max_request_bytes=3 * MIB)
        pool = server.memory_pool
        assert pool is not None
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        for i in range(5):
            writer.write(produce(i, 2 * MIB, acks=1))
        await writer.drain()
        for i in range(5):
            assert struct.unpack(">i", (await read_answer(reader))[:4])[0] == i
        writer.write(api_versions(9))
        await read_answer(reader)
        assert pool.available == pool.capacity
        writer.close()
        await server.stop()

    asyncio.run(scenario())


def test_fetch_answers_still_use_os_sendfile(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = [0]
    real_sendfile = os.sendfile

    def counting_sendfile(*args: Any) -> int:
        calls[0] += 1
        return real_sendfile(*args)

    async def no_fallback(*args: Any, **kwargs: Any) -> int:
        raise AssertionError("loop.sendfile fell back to copying")

    monkeypatch.setattr(os, "sendfile", counting_sendfile)
    monkeypatch.setattr(asyncio.BaseEventLoop, "_sendfile_fallback", no_fallback)
    payload = os.urandom(3 * MIB)

    with tempfile.TemporaryFile() as file:
        file.write(payload)
        file.flush()

        async def dispatch(request: Request) -> Any:
            head = struct.pack(">ii", 4 + len(payload), request.correlation_id)
            return EncodedFetchResponse(
                [head, FileSlice(file.fileno(), 0, len(payload))], 8 + len(payload)
            )

        async def scenario() -> bytes:
            server, port = await run_server(dispatch)
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(api_versions(7))
            answer = await read_answer(reader)
            writer.close()
            await server.stop()
            return answer

        answer = asyncio.run(scenario())
    assert answer == struct.pack(">i", 7) + payload
    assert calls[0] >= 1
