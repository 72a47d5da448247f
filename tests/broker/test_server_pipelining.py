"""KafkaServer: a connection's Produces are appended in order and answered in order, and the
next Produce is read while an earlier one waits for its followers; any other request waits
until the Produces before it were answered."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.produce.v9.request import ProduceRequest

from tierlog.broker.server import KafkaServer, appends_done
from tierlog.protocol import ApiKey, Request, encode_request
from tierlog.protocol.kio_build import build


def produce(correlation_id: int) -> bytes:
    body = build(
        ProduceRequest,
        {
            "transactional_id": None,
            "acks": -1,
            "timeout": 5000,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b""}]}],
        },
    )
    return encode_request(body, correlation_id)


def api_versions(correlation_id: int) -> bytes:
    body = build(
        ApiVersionsRequest,
        {"client_software_name": "test", "client_software_version": "1"},
    )
    return encode_request(body, correlation_id)


class Handlers:
    """Produce: 'appends' (records its correlation id), then waits until released.
    Anything else answers at once, recording what was appended by then."""

    def __init__(self) -> None:
        self.appended: list[int] = []
        self.released: dict[int, asyncio.Event] = {}
        self.seen_by_other: list[list[int]] = []
        self.answered: list[int] = []  # in the order the handlers finished

    async def dispatch(self, request: Request) -> Any:
        cid = request.correlation_id
        if request.api_key == ApiKey.PRODUCE:
            self.appended.append(cid)
            appends_done()
            release = self.released.setdefault(cid, asyncio.Event())
            await release.wait()
        else:
            self.seen_by_other.append(list(self.answered))
        self.answered.append(cid)
        return struct.pack(">ii", 4, cid)  # framed: size 4, then the correlation id


async def read_answers(reader: asyncio.StreamReader, count: int) -> list[int]:
    out = []
    for _ in range(count):
        size = struct.unpack(">i", await reader.readexactly(4))[0]
        out.append(struct.unpack(">i", await reader.readexactly(size))[0])
    return out


async def eventually(check: Any) -> None:
    async with asyncio.timeout(5):
        while not check():
            await asyncio.sleep(0.005)


def test_produces_pipeline_and_answers_keep_their_order() -> None:
    async def scenario() -> None:
        handlers = Handlers()
        server = KafkaServer(handlers.dispatch, "127.0.0.1", 0, 1 << 20)
        port = await server.start()
        await server.serve()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(produce(1) + produce(2) + produce(3) + api_versions(4))
            await writer.drain()
            # All three were appended, in order, while the first still waits.
            await eventually(lambda: handlers.appended == [1, 2, 3])
            assert handlers.answered == []
            # The last finishes first; its answer still comes after the others'.
            for cid in (3, 1, 2):
                handlers.released.setdefault(cid, asyncio.Event()).set()
            assert await read_answers(reader, 4) == [1, 2, 3, 4]
            # ApiVersions ran only after every Produce before it had finished.
            assert [sorted(seen) for seen in handlers.seen_by_other] == [[1, 2, 3]]
            writer.close()
        finally:
            await server.stop()

    asyncio.run(scenario())


def test_a_produce_that_fails_closes_the_connection_and_the_server_keeps_serving() -> None:
    async def scenario() -> None:
        calls = 0

        async def dispatch(request: Request) -> Any:
            nonlocal calls
            calls += 1
            if request.api_key == ApiKey.PRODUCE and calls == 1:
                appends_done()
                raise RuntimeError("boom")
            return struct.pack(">ii", 4, request.correlation_id)

        server = KafkaServer(dispatch, "127.0.0.1", 0, 1 << 20)
        port = await server.start()
        await server.serve()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(produce(1))
            await writer.drain()
            async with asyncio.timeout(5):
                assert await reader.read() == b""  # closed, nothing answered
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(produce(2))
            await writer.drain()
            assert await read_answers(reader, 1) == [2]
            writer.close()
            assert server.connections_closed_for_errors == 1
        finally:
            await server.stop()

    asyncio.run(scenario())
