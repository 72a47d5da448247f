"""Fixtures shared across test packages, and how ``make test`` spreads the tests over
processes (pytest-xdist, ``--dist loadgroup``).

One Spark session per test process: start-up costs seconds, so every test using the
``spark`` fixture shares it (tests/spark, tests/pipelines), and they all run in one process
(xdist group ``spark``), so the session starts once. A module's tests run in one process
(its group is the module), so a module-scoped fixture (a broker with a tiered topic, a
Kafka cluster) is built once. Tests marked ``fixed_ports`` bind 127.0.0.1:9092 (the
README's broker, ``tierlog demo serve``) or share the demo's data: one process runs them
one after another. Every other port is ephemeral (bound to port 0).

Tests marked ``notebooks`` run kernels and Spark jobs in processes of their own; they share
one process too (group ``notebooks``). So at most three of the suite's processes run Spark
at once: four JVMs on two cores had made every Spark step several times slower and timed
tests out. The three Spark groups are the longest chains of the run, so they are queued
first (xdist's own order, groups with more tests first, had put them last, side by side at
the end); the other processes work through the many short modules beside them."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from tests import hang_guard

hang_guard.install()

# gcsfs asks a GCS bucket's layout over gRPC, which no emulator answers (60 s per bucket);
# set before anything imports gcsfs, so brokers and Spark workers started from here inherit
# it (tests/integration/cloud_emulators.py; docs/tiered-storage.md says so for users).
os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")

# Property tests check what the code does, not how fast: on a loaded 2-core machine an
# example can take longer than Hypothesis' default deadline of 200 ms, and generating data
# can trip its too_slow health check, failing a correct test. pytest-timeout bounds every
# test instead.
settings.register_profile("tierlog", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("tierlog")

SPARK_GROUP = "spark"
FIXED_PORTS_GROUP = "fixed-ports"
NOTEBOOKS_GROUP = "notebooks"
# Queued in this order, before every module's group.
FIRST_GROUPS = (SPARK_GROUP, FIXED_PORTS_GROUP, NOTEBOOKS_GROUP)


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
    """The process group of a test: ``fixed-ports``, ``notebooks``, ``spark``, or its
    module."""
    if item.get_closest_marker("fixed_ports") is not None:
        return FIXED_PORTS_GROUP
    if item.get_closest_marker("notebooks") is not None:
        return NOTEBOOKS_GROUP
    if SPARK_GROUP in getattr(item, "fixturenames", ()):
        return SPARK_GROUP
    return item.nodeid.split("::", 1)[0]


# A test on the shared Spark session may be the one that starts it (JVM, Delta jars) and
# runs several Spark jobs: a minute alone, several while other test processes load the
# machine. Its hang guard, unless its module sets one.
SPARK_TIMEOUT_S = 600


def pytest_configure(config: pytest.Config) -> None:
    # xdist's own order (groups with more tests first) put the Spark groups, which have few
    # tests but the longest run times, last; the queue follows the collection order below.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


# Before xdist's own hook (on each worker), which reads the xdist_group markers into the
# test ids its scheduler groups by.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    groups = {}
    for item in items:
        group = groups[item] = xdist_group(item)
        item.add_marker(pytest.mark.xdist_group(group))
        if group == SPARK_GROUP and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(SPARK_TIMEOUT_S))
    # The queue: FIRST_GROUPS in their order, then the other groups with more tests first
    # (xdist's own rule); a stable sort keeps each group's own order.
    rank = {group: i for i, group in enumerate(FIRST_GROUPS)}
    sizes = Counter(groups.values())
    items.sort(key=lambda item: (rank.get(groups[item], len(rank)), -sizes[groups[item]]))
