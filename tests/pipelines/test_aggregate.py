"""pipelines.aggregate: page views per minute per page from a bronze table equal a plain
Python count of the activity stream, and a re-run gives the same silver table."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pipelines.aggregate import aggregate
from tierlog.tools.activity import activity_stream

# 5 events a second: 3000 events span ten minutes, so there are many windows to count.
# Spark jobs and a Delta commit: over a minute alone, several on a busy machine; a hang guard.
pytestmark = pytest.mark.timeout(600)
EVENTS = list(activity_stream(3000, events_per_second=5, start_ms=1_700_000_017_000))


def expected_views() -> Counter[tuple[int, str]]:
    """Views per (minute's start in seconds since the epoch, page)."""
    views: Counter[tuple[int, str]] = Counter()
    for e in EVENTS:
        if e.kind == "page_view":
            views[e.timestamp_ms // 60_000 * 60, e.page] += 1
    return views


def write_bronze(spark: Any, path: Path) -> None:
    values = [e.value() for e in EVENTS]
    values += [b"not json", json.dumps({"event": "page_view", "ts": 1}).encode()]  # no page
    rows = [(bytearray(v), n) for n, v in enumerate(values)]
    spark.createDataFrame(rows, "value BINARY, offset LONG").write.format("delta").save(str(path))


def test_page_views_per_minute_equal_a_python_count(spark: Any, tmp_path: Path) -> None:
    write_bronze(spark, tmp_path / "bronze")
    expected = expected_views()
    assert len({minute for minute, _ in expected}) >= 10

    result = aggregate(
        spark, bronze_path=str(tmp_path / "bronze"), silver_path=str(tmp_path / "silver")
    )
    silver = spark.read.format("delta").load(str(tmp_path / "silver"))
    assert silver.columns == ["minute", "page", "views"]
    got = {
        (r["minute"], r["page"]): r["views"]
        for r in silver.selectExpr("unix_seconds(minute) as minute", "page", "views").collect()
    }
    assert got == dict(expected)
    assert (result.rows, result.views) == (len(expected), sum(expected.values()))

    again = aggregate(
        spark, bronze_path=str(tmp_path / "bronze"), silver_path=str(tmp_path / "silver")
    )
    assert (again.rows, again.views) == (result.rows, result.views)
    assert again.table_version == result.table_version + 1
