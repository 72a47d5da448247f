"""``tierlog demo`` (``make demo``): the data platform end to end on one machine.

An embedded broker with its file:// remote tier, the sample activity stream produced until
part of it is offloaded, then the ``ingest_to_delta`` notebook run through papermill: Spark
reads the cold part straight from the remote tier and the hot part from the broker into a
bronze Delta table, and aggregates page views per minute into a silver one. The summary
checks that the table holds exactly the messages produced, and says how many came from
each tier and where the executed notebook is.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any, TextIO

from tierlog.tools.demo import (
    TOPIC,
    create_tiered_topic,
    demo_broker_overrides,
    produce_events,
    wait_for_offload,
)

NOTEBOOK = "ingest_to_delta"


def run_platform_demo(
    data_dir: Path,
    out: TextIO,
    *,
    events: int = 100_000,
    partitions: int = 4,
    notebooks_dir: Path = Path("notebooks"),
    runs_dir: Path = Path("runs"),
) -> dict[str, Any]:
    """Run the demo under ``data_dir`` (wiped first) and print its summary to ``out``.

    Returns:
        The ingest notebook's summary plus ``produced`` and ``notebook``.

    Raises:
        SystemExit: the notebook failed, or the table does not hold every message once.
    """
    from tierlog.broker.embedded import EmbeddedBroker
    from tierlog.notebooks.runner import run_notebook
    from tierlog.notebooks.summary import read_summary

    if data_dir.exists():
        shutil.rmtree(data_dir)
    remote_dir = data_dir / "logs" / "remote"
    table = data_dir / "delta" / "activity_bronze"
    with EmbeddedBroker(demo_broker_overrides(data_dir)) as broker:
        create_tiered_topic(broker.bootstrap, partitions)
        payload, produce_s = produce_events(broker.bootstrap, events)
        offloaded = wait_for_offload(remote_dir, TOPIC, partitions, timeout_s=30)
        print(
            f"tierlog demo: {events:,} activity events ({payload / 1e6:.1f} MB) produced to "
            f"'{TOPIC}' on {broker.bootstrap} in {produce_s:.1f} s; {offloaded['segments']} "
            f"segments ({offloaded['bytes'] / 1e6:.1f} MB) offloaded to "
            f"{remote_dir.resolve().as_uri()}",
            file=out,
        )
        print(f"  running notebooks/{NOTEBOOK}.ipynb with papermill (Spark + Delta)...", file=out)
        started = time.perf_counter()
        run = run_notebook(
            NOTEBOOK,
            {
                "bootstrap_servers": broker.bootstrap,
                "topic": TOPIC,
                "remote_url": remote_dir.resolve().as_uri(),
                "table_path": str(table.resolve()),
                "silver_path": str((data_dir / "delta" / "page_views_per_minute").resolve()),
            },
            notebooks_dir=notebooks_dir,
            runs_dir=runs_dir,
        )
        notebook_s = time.perf_counter() - started
    if not run.ok:
        raise SystemExit(
            f"demo failed: the notebook failed ({run.error}); see {run.output} and "
            f"{run.output.with_suffix('.log')}"
        )
    summary = read_summary(run.output)
    rows = int(summary["rows_in_table"])
    print(
        f"  Delta table {table}: {rows:,} rows = {events:,} messages produced: {rows == events}",
        file=out,
    )
    print(
        f"  read from the cold tier (object storage): {summary['from_remote']:,}; from the "
        f"hot tier (broker): {summary['from_local']:,}",
        file=out,
    )
    if "silver_rows" in summary:
        print(f"  page views per minute per page: {summary['silver_rows']:,} rows", file=out)
    print(
        f"  executed notebook: {run.output} ({notebook_s:.0f} s; kernel and Spark log "
        f"beside it: {run.output.with_suffix('.log').name})",
        file=out,
    )
    if rows != events or summary["from_remote"] + summary["from_local"] != events:
        raise SystemExit(f"demo failed: produced {events}, the table has {rows} rows")
    return {**summary, "produced": events, "notebook": str(run.output)}
