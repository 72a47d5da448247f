"""``tierlog demo`` (``make demo``): the data platform end to end on one machine.

An embedded broker with its file:// remote tier, the sample activity stream produced until
part of it is offloaded, then the ``ingest_to_delta`` notebook run through papermill: Spark
reads the cold part straight from the remote tier and the hot part from the broker into a
bronze Delta table, and aggregates page views per minute into a silver one. The summary
checks that the table holds exactly the messages produced, and says how many came from
each tier and where the executed notebook is.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, TextIO

from tierlog.tools.demo import (
    TOPIC,
    Phases,
    demo_broker_overrides,
    produce_events,
    start_phases,
    wait_for_offload,
)
from tierlog.tools.demo_dir import prepare

NOTEBOOK = "ingest_to_delta"


def run_platform_demo(
    data_dir: Path,
    out: TextIO,
    *,
    events: int = 100_000,
    partitions: int = 4,
    notebooks_dir: Path = Path("notebooks"),
    runs_dir: Path = Path("runs"),
    force: bool = False,
) -> dict[str, Any]:
    """Run the demo under ``data_dir`` (emptied first, see ``demo_dir.prepare``; ``force``
    empties a directory the demo did not create) and print its phases and summary to
    ``out``.

    Returns:
        The ingest notebook's summary plus ``produced`` and ``notebook``.

    Raises:
        SystemExit: the notebook failed, or the table does not hold every message once.
    """
    from tierlog.broker.embedded import EmbeddedBroker
    from tierlog.jobs.runner import run_notebook
    from tierlog.jobs.summary import read_summary

    prepare(data_dir, force=force)
    phases = Phases(out)
    remote_dir = data_dir / "logs" / "remote"
    table = data_dir / "delta" / "activity_bronze"
    with EmbeddedBroker(demo_broker_overrides(data_dir)) as broker:
        start_phases(broker, data_dir, partitions, phases)
        payload, produce_s = produce_events(broker.bootstrap, events)
        phases.done(
            f"produced {events:,} activity events ({payload / 1e6:.1f} MB) to '{TOPIC}' in "
            f"{produce_s:.1f} s"
        )
        offloaded = wait_for_offload(remote_dir, TOPIC, partitions, timeout_s=30)
        phases.done(
            f"{offloaded['segments']} segments ({offloaded['bytes'] / 1e6:.1f} MB) offloaded "
            f"to {remote_dir.resolve().as_uri()}"
        )
        # The one long phase (minutes on a small machine, most of it Spark's start-up):
        # say so before it starts, not only after.
        phases.done(
            f"running notebooks/{NOTEBOOK}.ipynb with papermill (Spark + Delta; a few "
            "minutes on a small machine)..."
        )
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
            # A line as each cell starts: Spark's start-up and the ingest job are named
            # while they run, instead of minutes of silence.
            progress=lambda line: phases.done(f"  {line}"),
        )
        notebook_s = time.perf_counter() - started
        phases.done(f"notebook {'finished' if run.ok else 'FAILED'} in {notebook_s:.0f} s")
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
