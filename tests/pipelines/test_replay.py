"""pipelines.replay with the broker stopped and the topic's local segments deleted: the
table is rebuilt from object storage alone, for an offset range and for a time range."""

from __future__ import annotations

import shutil
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pipelines.common import latest_version
from pipelines.replay import replay
from tests.pipelines.conftest import table_rows
from tests.tiered_data import Row, tiered_topic, topic_rows, wait_offloaded

START_MS = 1_700_000_000_000  # the first event's timestamp in produce_activity


@dataclass
class Cold:
    remote_url: str
    remote_rows: list[Row]  # the records object storage holds, as the broker served them
    remote_ends: dict[int, int]


@pytest.fixture(scope="module")
def cold(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cold]:
    """A topic read once through the broker; then the broker is stopped and every local
    segment of the topic deleted, so only object storage is left."""
    data_dir = tmp_path_factory.mktemp("replay") / "broker"
    tiered = tiered_topic(data_dir, count=4000)
    try:
        ends = wait_offloaded(tiered)
        rows = [r for r in topic_rows(tiered) if r[1] < ends[r[0]]]
    finally:
        tiered.broker.stop()
    with pytest.raises(OSError):  # nothing listens where the broker was
        socket.create_connection(("127.0.0.1", tiered.broker.port), timeout=2).close()
    for p in range(tiered.partitions):
        shutil.rmtree(data_dir / f"{tiered.topic}-{p}")
    yield Cold(tiered.remote_url, sorted(rows), ends)


def run_replay(spark: Any, cold: Cold, path: Path, **bounds: Any) -> Any:
    return replay(
        spark, topic="activity", remote_url=cold.remote_url, table_path=str(path), **bounds
    )


def test_replays_every_remote_record_with_no_broker(spark: Any, cold: Cold, tmp_path: Path) -> None:
    result = run_replay(spark, cold, tmp_path / "all")
    assert result.rows == len(cold.remote_rows) > 1000
    assert table_rows(spark, tmp_path / "all") == cold.remote_rows
    assert result.offsets == {p: (0, end - 1) for p, end in cold.remote_ends.items()}
    tiers = spark.read.format("delta").load(str(tmp_path / "all")).select("tier").distinct()
    assert [r["tier"] for r in tiers.collect()] == ["remote"]


def test_replays_an_offset_range_and_overwrites(spark: Any, cold: Cold, tmp_path: Path) -> None:
    path = tmp_path / "range"
    run_replay(spark, cold, path)  # a first, larger replay: the next one replaces it
    start = {p: end // 4 for p, end in cold.remote_ends.items()}
    end = {p: end // 2 for p, end in cold.remote_ends.items()}
    result = run_replay(
        spark,
        cold,
        path,
        starting_offsets={"activity": {str(p): o for p, o in start.items()}},
        ending_offsets={"activity": {str(p): o for p, o in end.items()}},
    )
    expected = [r for r in cold.remote_rows if start[r[0]] <= r[1] < end[r[0]]]
    assert table_rows(spark, path) == expected
    assert result.rows == len(expected)
    assert result.offsets == {p: (start[p], end[p] - 1) for p in start}


def test_replays_a_time_range(spark: Any, cold: Cold, tmp_path: Path) -> None:
    # Events are 2 ms apart: this is events 500 to 1499 of the stream, where they reached
    # object storage (a partition may hold none of them there).
    lo, hi = START_MS + 1000, START_MS + 3000
    result = run_replay(spark, cold, tmp_path / "time", starting_timestamp=lo, ending_timestamp=hi)
    expected = [r for r in cold.remote_rows if lo <= r[4] < hi]
    assert len(expected) > 100
    assert table_rows(spark, tmp_path / "time") == expected
    assert result.rows == len(expected)


def test_a_time_range_past_one_partitions_records_is_empty_there(
    spark: Any, cold: Cold, tmp_path: Path
) -> None:
    last = {p: max(r[4] for r in cold.remote_rows if r[0] == p) for p in cold.remote_ends}
    lo = min(last.values()) + 1
    result = run_replay(spark, cold, tmp_path / "late", starting_timestamp=lo)
    expected = [r for r in cold.remote_rows if r[4] >= lo]
    assert {r[0] for r in expected} == {max(last, key=lambda p: last[p])}
    assert table_rows(spark, tmp_path / "late") == expected
    assert result.rows == len(expected) > 0


def test_a_range_that_matches_nothing_leaves_the_table_and_says_so(
    spark: Any, cold: Cold, tmp_path: Path
) -> None:
    from tierlog.spark.discovery import SourceError

    path = tmp_path / "kept"
    before = run_replay(spark, cold, path)
    # Before the first record: the shape of replay.toml's old example, years off.
    with pytest.raises(SourceError, match=r"the range matches no record of topic 'activity'"):
        run_replay(
            spark, cold, path, starting_timestamp=START_MS - 10_000, ending_timestamp=START_MS - 1
        )
    assert latest_version(spark, str(path)) == before.table_version  # not overwritten
    assert table_rows(spark, path) == cold.remote_rows
