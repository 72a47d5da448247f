"""The connection limits and the request memory pool show in the Prometheus endpoint
(docs/limits.md): open connections, pool bytes, and closes by the limit that made them."""

from __future__ import annotations

import asyncio
import urllib.request
from pathlib import Path

from tierlog.broker.broker import Broker
from tierlog.broker.config import BrokerConfig


def scrape(port: int) -> dict[str, float]:
    url = f"http://127.0.0.1:{port}/metrics"
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    return {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line and not line.startswith("#")
    }


def test_connection_metrics(tmp_path: Path) -> None:
    broker = Broker(
        BrokerConfig(
            {
                "log.dirs": str(tmp_path / "data"),
                "listeners": "PLAINTEXT://127.0.0.1:0",
                "metrics.http.port": "0",
                "max.connections.per.ip": "2",
                "connections.max.idle.ms": "300",
                "queued.max.request.bytes": str(1 << 20),
            }
        )
    )

    async def scenario() -> tuple[dict[str, float], dict[str, float]]:
        await broker.start()
        loop = asyncio.get_running_loop()
        try:
            streams = [await asyncio.open_connection("127.0.0.1", broker.port) for _ in range(3)]
            # Two are kept; the third is closed on accept.
            assert await asyncio.wait_for(streams[2][0].read(), 5) == b""
            streams[0][1].write((50_000).to_bytes(4, "big") + b"x")  # a partial request
            await asyncio.sleep(0.1)
            during = await loop.run_in_executor(None, scrape, broker.metrics_port)
            # The idle one is closed after 300 ms; the partial one is not idle.
            assert await asyncio.wait_for(streams[1][0].read(), 5) == b""
            after = await loop.run_in_executor(None, scrape, broker.metrics_port)
            for _, writer in streams:
                writer.close()
            return during, after
        finally:
            await broker.stop()

    during, after = asyncio.run(scenario())
    assert during["kafka_server_socket_server_metrics_connection_count"] == 2
    assert during['tierlog_server_connections_refused_total{limit="max.connections.per.ip"}'] == 1
    assert during["kafka_network_socketserver_memorypoolused"] == 50_004
    assert during["kafka_network_socketserver_memorypoolavailable"] == (1 << 20) - 50_004
    assert after['tierlog_server_connections_closed_total{limit="connections.max.idle.ms"}'] == 1
    assert after["kafka_server_socket_server_metrics_connection_count"] == 1
