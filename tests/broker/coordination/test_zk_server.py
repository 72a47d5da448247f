"""The development ZooKeeper (tierlog/broker/coordination/zk_server.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tierlog.broker.coordination.zk_server import ZooKeeperServer, ruok


def test_a_relative_data_dir_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `tierlog cluster start --data-dir ./data/cluster`: the server runs in its own
    # directory, so a relative path there named nothing (zkServer.sh found no zoo.cfg).
    monkeypatch.chdir(tmp_path)
    server = ZooKeeperServer(Path("data/cluster/zookeeper")).start()
    try:
        assert ruok(server.port)
        assert server.dir == tmp_path / "data" / "cluster" / "zookeeper"
    finally:
        server.stop()
