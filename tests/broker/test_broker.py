"""The broker's wiring: nothing served before it is ready, config reaching components, the
high-watermark checkpoint (in-process brokers, real sockets on 127.0.0.1)."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import pytest

from tests.local.conftest import make_batch
from tierlog.broker.broker import Broker
from tierlog.broker.config import BrokerConfig
from tierlog.broker.replication.high_watermarks import HIGH_WATERMARK_FILE
from tierlog.broker.replication.replica_manager import ReplicaManager
from tierlog.local.checkpoint import read_offsets


def config(data: Path, **extra: str) -> BrokerConfig:
    return BrokerConfig({"log.dirs": str(data), "listeners": "PLAINTEXT://127.0.0.1:0", **extra})


def test_connections_are_refused_until_every_component_is_ready(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker = Broker(config(tmp_path / "data"))
    seen: list[str] = []
    sync = ReplicaManager.sync

    def connect_during_start_up(self: ReplicaManager) -> None:
        # The port is bound by now (it is registered), but nothing may be served yet:
        # handlers need the partitions and groups this start-up is still building.
        try:
            socket.create_connection(("127.0.0.1", broker.port), timeout=1).close()
            seen.append("accepted")
        except ConnectionRefusedError:
            seen.append("refused")
        sync(self)

    monkeypatch.setattr(ReplicaManager, "sync", connect_during_start_up)

    async def scenario() -> None:
        await broker.start()
        try:
            socket.create_connection(("127.0.0.1", broker.port), timeout=1).close()
            seen.append("accepted after start")
        finally:
            await broker.stop()

    asyncio.run(scenario())
    assert seen == ["refused", "accepted after start"]


def test_producer_id_expiration_reaches_every_log(tmp_path: Path) -> None:
    broker = Broker(config(tmp_path / "data", **{"producer.id.expiration.ms": "1234"}))

    async def scenario() -> int:
        await broker.start()
        try:
            assert broker.replicas is not None
            await broker.replicas.admin.create_topic("t", 1, 1, {})
            log = broker.replicas.partitions[("t", 0)].local
            return log.producer_state.producer_id_expiration_ms
        finally:
            await broker.stop()

    assert asyncio.run(scenario()) == 1234


def test_high_watermarks_are_checkpointed_in_kafkas_file(tmp_path: Path) -> None:
    data = tmp_path / "data"

    async def produce_and_stop() -> Any:
        broker = Broker(config(data))
        await broker.start()
        try:
            assert broker.replicas is not None
            await broker.replicas.admin.create_topic("t", 2, 1, {})
            broker.replicas.append_records("t", 1, make_batch(5), 1)
        finally:
            await broker.stop()

    asyncio.run(produce_and_stop())
    text = (data / HIGH_WATERMARK_FILE).read_text().splitlines()
    assert text[:2] == ["0", "2"]  # Kafka's format: version 0, then the entry count
    assert read_offsets(data / HIGH_WATERMARK_FILE) == {("t", 0): 0, ("t", 1): 5}


def test_metrics_endpoint_speaks_prometheus_with_kafkas_names(tmp_path: Path) -> None:
    import urllib.request

    broker = Broker(config(tmp_path / "data", **{"metrics.http.port": "0"}))

    async def scenario() -> str:
        await broker.start()
        try:
            assert broker.replicas is not None
            await broker.replicas.admin.create_topic("t", 1, 1, {})
            broker.replicas.append_records("t", 0, make_batch(7), 1)
            loop = asyncio.get_running_loop()
            url = f"http://127.0.0.1:{broker.metrics_port}/metrics"
            return await loop.run_in_executor(
                None, lambda: urllib.request.urlopen(url, timeout=10).read().decode()
            )
        finally:
            await broker.stop()

    text = asyncio.run(scenario())
    values = {
        line.split(" ")[0]: float(line.split(" ")[1])
        for line in text.splitlines()
        if line and not line.startswith("#")
    }
    assert values["kafka_server_brokertopicmetrics_messagesin_total"] == 7
    assert values["kafka_server_brokertopicmetrics_bytesin_total"] == len(make_batch(7))
    assert values["kafka_server_replicamanager_underreplicatedpartitions"] == 0
    assert values["kafka_server_replicamanager_partitioncount"] == 1
    assert values["kafka_controller_kafkacontroller_activecontrollercount"] == 1
    assert "kafka_network_requestmetrics_requests_total" in text
    # The default broker has a remote tier (under its log dir): nothing lost yet.
    assert values["tierlog_remote_lost_ranges_total"] == 0
    # The counters tests wait on instead of sleeping: both exist, counted from the start.
    assert values["tierlog_remote_cycles_total"] >= 0
    assert values["tierlog_log_retention_passes_total"] >= 0


def test_a_first_start_that_failed_on_a_taken_port_does_not_lock_the_directory(
    tmp_path: Path,
) -> None:
    """The failed start wrote meta.properties; the next one must accept the directory."""
    import socket

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    data = tmp_path / "data"

    async def start_once(listeners: str) -> None:
        broker = Broker(config(data, listeners=listeners))
        try:
            await broker.start()
        finally:
            await broker.stop()

    try:
        with pytest.raises(OSError):
            asyncio.run(start_once(f"PLAINTEXT://127.0.0.1:{port}"))
    finally:
        taken.close()
    assert (data / "meta.properties").exists()
    asyncio.run(start_once("PLAINTEXT://127.0.0.1:0"))
