from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.broker.harness import BrokerProcess


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A fresh single-node broker; its log is printed if the test fails."""
    process = BrokerProcess(tmp_path / "data").start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[type[BrokerProcess]]:
    started: list[BrokerProcess] = []

    class Factory(BrokerProcess):
        def start(self, timeout: float = 30.0) -> BrokerProcess:
            started.append(self)
            return super().start(timeout)

    yield Factory
    for process in started:
        process.kill()
