"""Fixtures shared across test packages, and how ``make test`` spreads the tests over
processes (pytest-xdist, ``--dist loadgroup``).

One Spark session per test process: start-up costs seconds, so every test using the
``spark`` fixture shares it (tests/spark, tests/pipelines), and they all run in one process
(xdist group ``spark``), so the session starts once. A module's tests run in one process
(its group is the module), so a module-scoped fixture (a broker with a tiered topic, a
Kafka cluster) is built once. Tests marked ``fixed_ports`` bind 127.0.0.1:9092 (the
README's broker, ``tierlog demo serve``) or share the demo's data: one process runs them
one after another. Every other port is ephemeral (bound to port 0)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests import hang_guard

hang_guard.install()

SPARK_GROUP = "spark"
FIXED_PORTS_GROUP = "fixed-ports"


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from tierlog.spark import session

    spark = session(
        "tierlog-tests",
        master="local[2]",
        conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"},
    )
    yield spark
    spark.stop()


def xdist_group(item: pytest.Item) -> str:
    """The process group of a test: ``fixed-ports``, ``spark``, or its module."""
    if item.get_closest_marker("fixed_ports") is not None:
        return FIXED_PORTS_GROUP
    if SPARK_GROUP in getattr(item, "fixturenames", ()):
        return SPARK_GROUP
    return item.nodeid.split("::", 1)[0]


# A test on the shared Spark session may be the one that starts it (JVM, Delta jars) and
# runs several Spark jobs: a minute alone, several while other test processes load the
# machine. Its hang guard, unless its module sets one.
SPARK_TIMEOUT_S = 600


# Before xdist's own hook (on each worker), which reads the xdist_group markers into the
# test ids its scheduler groups by.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        group = xdist_group(item)
        item.add_marker(pytest.mark.xdist_group(group))
        if group == SPARK_GROUP and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(SPARK_TIMEOUT_S))
