"""KafkaServer.stop always ends: a connection that ignores its cancellation is logged with
its stack and left behind, so a SIGTERM still stops the broker."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from tierlog.broker.network.server import KafkaServer
from tierlog.protocol import Request, encode_request
from tierlog.protocol.kio_build import build


def api_versions(correlation_id: int) -> bytes:
    body = build(
        ApiVersionsRequest,
        {"client_software_name": "test", "client_software_version": "1"},
    )
    return encode_request(body, correlation_id)


def test_stop_is_bounded_by_a_connection_that_ignores_cancellation(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario() -> float:
        entered = asyncio.Event()
        release = asyncio.Event()

        async def stubborn(request: Request) -> Any:
            entered.set()
            while not release.is_set():
                try:
                    await asyncio.sleep(10)
                except asyncio.CancelledError:
                    continue  # the bug this guards against: cancellation swallowed
            return None

        server = KafkaServer(stubborn, "127.0.0.1", 0, 1 << 20)
        port = await server.start()
        await server.serve()
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(api_versions(1))
        await writer.drain()
        await asyncio.wait_for(entered.wait(), 5)
        started = time.monotonic()
        await server.stop(timeout_s=0.5)
        took = time.monotonic() - started
        release.set()
        writer.close()
        await asyncio.sleep(0.05)
        return took

    with caplog.at_level(logging.ERROR):
        took = asyncio.run(scenario())
    assert took < 3
    assert any("did not end on stop" in r.getMessage() for r in caplog.records)
