"""Fixtures shared across test packages: one Spark session per test run (start-up costs
seconds, so every Spark test shares it; tests/spark, tests/pipelines, notebooks)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


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
