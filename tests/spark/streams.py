"""Running a Spark stream of the tierlog source once, as a scheduled job does, for the
Spark tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

RUN_TIMEOUT_S = 90


def run_available_now(spark: Any, stream: Any, out: Path, checkpoint: Path) -> Any:
    """Run ``stream`` (a ``DataStreamReader``) with ``Trigger.AvailableNow`` into parquet
    at ``out``, checkpointed at ``checkpoint``; returns everything written there so far,
    by this run and the ones before (a DataFrame).

    Raises:
        AssertionError: the run failed or did not finish in ``RUN_TIMEOUT_S`` (then it is
            stopped).
    """
    query = (
        stream.load()
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    finished = query.awaitTermination(RUN_TIMEOUT_S)
    if not finished:
        query.stop()
    assert finished, f"the available-now run did not finish in {RUN_TIMEOUT_S} s"
    assert query.exception() is None
    return spark.read.parquet(str(out))
