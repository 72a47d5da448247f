"""Shared by the pipeline tests: a partly offloaded topic on a real broker (one per test
module), the topic as a plain Kafka consumer reads it, and a Delta table's rows in the
same shape for comparing the two."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.tiered_data import Row, TieredTopic, running_tiered_topic


@pytest.fixture(scope="module")
def tiered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TieredTopic]:
    with running_tiered_topic(tmp_path_factory.mktemp("pipelines") / "broker", count=4000) as topic:
        yield topic


def table_rows(spark: Any, path: str | Any) -> list[Row]:
    """A Delta table's (partition, offset, key, value, timestamp ms), sorted; duplicates kept."""
    rows = (
        spark.read.format("delta")
        .load(str(path))
        .selectExpr("partition", "offset", "key", "value", "unix_millis(timestamp) as ts")
        .collect()
    )
    return sorted(
        (r[0], r[1], None if r[2] is None else bytes(r[2]), bytes(r[3]), r[4]) for r in rows
    )
