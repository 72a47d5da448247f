"""pipelines.ingest_stream: Trigger.AvailableNow runs with one checkpoint against a real
broker whose topic is partly offloaded; each run adds exactly the records that are new."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipelines.ingest_stream import ingest_stream
from tests.pipelines.conftest import table_rows
from tests.tiered_data import TieredTopic, produce_activity, topic_rows


def test_runs_with_one_checkpoint_add_only_new_records(
    spark: Any, tiered: TieredTopic, tmp_path: Path
) -> None:
    def run() -> Any:
        return ingest_stream(
            spark,
            bootstrap_servers=tiered.bootstrap,
            topic=tiered.topic,
            table_path=str(tmp_path / "bronze"),
            checkpoint_path=str(tmp_path / "checkpoint"),
            remote_url=tiered.remote_url,
        )

    first = run()
    assert first.rows_written == 4000 and first.batches >= 1
    assert table_rows(spark, tmp_path / "bronze") == topic_rows(tiered)
    tiers = spark.read.format("delta").load(str(tmp_path / "bronze")).groupBy("tier").count()
    assert {r["tier"] for r in tiers.collect()} == {"remote", "local"}

    produce_activity(tiered.bootstrap, tiered.topic, 500, first=4000)
    second = run()
    assert second.rows_written == 500
    assert second.table_version > first.table_version
    rows = table_rows(spark, tmp_path / "bronze")
    assert len(rows) == len(set(rows)) == 4500
    assert rows == topic_rows(tiered)

    idle = run()
    assert (idle.rows_written, idle.table_version) == (0, second.table_version)
