"""pipelines.ingest against a real broker whose topic is partly offloaded, Spark local mode
and real Delta: the bronze table equals the topic across the tier boundary, re-runs and
duplicate runs add nothing, new records are added exactly once, and a run killed mid-write
is repaired by the next one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pipelines.common import TopicSource, latest_version
from pipelines.ingest import IngestResult, ingest, plan_ingest, write_ingest
from tests.pipelines.conftest import table_rows
from tests.tiered_data import Row, TieredTopic, produce_activity, topic_rows

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Bronze:
    path: Path
    first: IngestResult
    topic_then: list[Row]  # the topic right after the first run, as a consumer read it


def run_ingest(spark: Any, tiered: TieredTopic, path: Path, **kwargs: Any) -> IngestResult:
    return ingest(
        spark,
        bootstrap_servers=tiered.bootstrap,
        topic=tiered.topic,
        table_path=str(path),
        remote_url=tiered.remote_url,
        **kwargs,
    )


@pytest.fixture(scope="module")
def bronze(spark: Any, tiered: TieredTopic, tmp_path_factory: pytest.TempPathFactory) -> Bronze:
    path = tmp_path_factory.mktemp("ingest") / "bronze"
    first = run_ingest(spark, tiered, path)
    return Bronze(path, first, topic_rows(tiered))


def test_bronze_equals_the_topic_across_the_tier_boundary(spark: Any, bronze: Bronze) -> None:
    assert len(bronze.topic_then) == 4000
    assert table_rows(spark, bronze.path) == bronze.topic_then
    result = bronze.first
    assert result.rows_written == 4000
    assert result.from_remote > 0 and result.from_local > 0
    assert result.from_remote + result.from_local == 4000
    assert (result.table_version, result.txn_version, result.skipped) == (0, 0, False)
    table = spark.read.format("delta").load(str(bronze.path))
    tiers = {r["tier"]: r["count"] for r in table.groupBy("tier").count().collect()}
    assert tiers == {"remote": result.from_remote, "local": result.from_local}
    assert {"tier", "ingested_at", "ingest_version", "headers"} <= set(table.columns)


def test_a_rerun_writes_nothing_and_leaves_the_table_unchanged(
    spark: Any, tiered: TieredTopic, bronze: Bronze
) -> None:
    again = run_ingest(spark, tiered, bronze.path)
    assert again.rows_written == 0 and not again.skipped
    assert again.table_version == bronze.first.table_version
    assert again.start_offsets == again.end_offsets == bronze.first.end_offsets
    assert latest_version(spark, str(bronze.path)) == bronze.first.table_version
    assert table_rows(spark, bronze.path) == bronze.topic_then


def test_two_runs_planned_from_one_snapshot_write_once(
    spark: Any, tiered: TieredTopic, tmp_path: Path
) -> None:
    path = str(tmp_path / "bronze")
    source = TopicSource(tiered.topic, tiered.bootstrap, tiered.remote_url)
    plan = plan_ingest(spark, source, path, max_offsets=1500)
    assert 1400 <= plan.offsets_to_read <= 1500
    first = write_ingest(spark, source, plan, path)
    duplicate = write_ingest(spark, source, plan, path)  # a concurrent run, same snapshot
    assert first.rows_written == plan.offsets_to_read and not first.skipped
    assert duplicate.skipped and duplicate.rows_written == 0
    assert duplicate.txn_version == first.txn_version == 0
    assert latest_version(spark, path) == 0
    # The next run resumes from what the table holds and completes it exactly.
    rest = run_ingest(spark, tiered, Path(path))
    assert rest.txn_version == 1
    assert rest.start_offsets == plan.end
    assert table_rows(spark, path) == topic_rows(tiered)


def test_an_incremental_run_adds_exactly_the_new_records(
    spark: Any, tiered: TieredTopic, bronze: Bronze
) -> None:
    before = table_rows(spark, bronze.path)
    produce_activity(tiered.bootstrap, tiered.topic, 700, first=4000)
    result = run_ingest(spark, tiered, bronze.path)
    assert result.rows_written == 700
    assert result.start_offsets == bronze.first.end_offsets
    assert sum(result.end_offsets.values()) == 4700
    after = table_rows(spark, bronze.path)
    assert after == topic_rows(tiered)
    assert set(before) < set(after) and len(set(after)) == len(after) == 4700


def test_a_run_killed_mid_write_is_repaired_by_the_next(
    spark: Any, tiered: TieredTopic, tmp_path: Path
) -> None:
    path = tmp_path / "bronze"
    # The remote tier's small segments make ~30 write tasks, so the write lasts long enough
    # to catch data files on disk with no commit; a kill after the commit is valid too.
    killed_before_commit = kill_ingest_mid_write(tiered, path)
    version = latest_version(spark, str(path))
    if killed_before_commit:
        assert version == -1, "the killed run committed"
        assert list(path.glob("*.parquet")), "the killed run wrote no data files"
    result = run_ingest(spark, tiered, path)
    assert result.table_version == version + 1 or result.rows_written == 0
    rows = table_rows(spark, path)
    assert len(set(rows)) == len(rows), "duplicate rows"
    assert rows == topic_rows(tiered)
    print(f"killed before commit: {killed_before_commit}; re-run wrote {result.rows_written}")


def kill_ingest_mid_write(tiered: TieredTopic, path: Path) -> bool:
    """Run the ingest CLI in a subprocess and SIGKILL it (driver and JVM) once it has
    written data files; True when that was before its commit."""
    args = [
        sys.executable,
        "-m",
        "pipelines.ingest",
        "--config",
        str(REPO / "configs" / "ingest.toml"),
        "--set",
        f"bootstrap_servers={tiered.bootstrap}",
        "--set",
        f"topic={tiered.topic}",
        "--set",
        f"remote_url={tiered.remote_url}",
        "--set",
        f"table_path={path}",
        "--set",
        "spark.master=local[2]",
        "--set",
        'spark.conf."spark.ui.enabled"=false',
    ]
    log = path.parent / "killed-ingest.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            args,
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: the JVM goes down with it
        )
    committed = path / "_delta_log" / f"{0:020d}.json"
    try:
        # Its JVM's start-up alone took over 90 s beside the suite's other Spark processes;
        # the test's own hang guard bounds this wait.
        while proc.poll() is None:
            if committed.exists() or any(path.glob("*.parquet")):
                break
            time.sleep(0.02)
        before_commit = not committed.exists()
        assert proc.poll() is None, f"the ingest exited early:\n{log.read_text()[-3000:]}"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    return before_commit
