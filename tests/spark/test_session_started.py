"""A session ``tierlog.spark.session`` started (the shared ``spark`` fixture, ``local[2]``):
Delta's state reconstruction is sized to the local master (tests/spark/test_session.py
checks the sizing itself, without a JVM)."""

from __future__ import annotations

from typing import Any


def test_a_local_session_rebuilds_delta_state_in_two_tasks(spark: Any) -> None:
    assert spark.conf.get("spark.databricks.delta.snapshotPartitions") == "2"
    assert spark.conf.get("spark.sql.extensions") == "io.delta.sql.DeltaSparkSessionExtension"
