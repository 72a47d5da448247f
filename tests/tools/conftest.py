from __future__ import annotations

import pytest

from tests.broker.conftest import broker  # noqa: F401
from tests.broker.harness import BrokerProcess
from tests.tools.cli import Cli


@pytest.fixture
def cli(broker: BrokerProcess) -> Cli:  # noqa: F811 - the imported fixture, used by name
    """The ``tierlog`` command, pointed at a fresh broker."""
    return Cli(broker.bootstrap)
