"""The notebooks in notebooks/, executed by papermill (through ``tierlog.jobs.runner``)
against a real broker whose topic is partly offloaded, with small parameters; assertions
are on the summary each one records and on its outputs, and on a run's HTML copy as
headless Chromium shows it (tests/browser.py). Each run starts its own kernel and Spark,
so there is one run per notebook."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import browser
from tests.tiered_data import TieredTopic, running_tiered_topic, topic_rows, wait_offloaded
from tierlog.jobs.runner import NotebookRun, run_notebook
from tierlog.jobs.summary import SummaryNotFound, read_summary
from tierlog.remote.manifest import committed_segments
from tierlog.tools.activity import activity_stream

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"
EVENTS = 4000
START_MS = 1_700_000_000_000  # produce_activity's first timestamp; events are 2 ms apart
# A kernel and a Spark per run: a minute or two alone, several on a busy machine; a hang guard.
pytestmark = [pytest.mark.timeout(600), pytest.mark.notebooks]


@pytest.fixture(scope="module")
def tiered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TieredTopic]:
    with running_tiered_topic(
        tmp_path_factory.mktemp("notebooks") / "broker", count=EVENTS
    ) as topic:
        yield topic


def run(name: str, tmp_path: Path, **parameters: Any) -> NotebookRun:
    result = run_notebook(
        name,
        {"spark_master": "local[2]", **parameters},
        notebooks_dir=NOTEBOOKS,
        runs_dir=tmp_path / "runs",
        cwd=tmp_path,
        # A cell's hang guard: the replay cell takes 20-40 s alone and passed 100 s on a
        # run with four Spark sessions beside it (load 16).
        timeout_s=300,
    )
    assert result.ok, f"{name} failed: {result.error}; see {result.output}"
    return result


def outputs(path: Path) -> list[dict[str, Any]]:
    cells = json.loads(path.read_text())["cells"]
    return [o for c in cells if c["cell_type"] == "code" for o in c.get("outputs", [])]


def test_the_notebooks_are_generated_from_their_sources() -> None:
    import subprocess

    from pipelines import notebooks

    assert notebooks.stale(NOTEBOOKS) == [], "run python -m pipelines.notebooks"
    assert not (NOTEBOOKS / "build_notebooks.py").exists()  # the lab's folder holds notebooks
    for name in notebooks.NOTEBOOKS:
        # As committed (the working copy may hold a user's outputs from the lab): the
        # generator's bytes, as the lab writes them, without outputs.
        committed = subprocess.run(
            ["git", "show", f"HEAD:notebooks/{name}.ipynb"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert committed == notebooks.render(name), f"notebooks/{name}.ipynb as committed"
        notebook = json.loads(committed)
        assert notebook["metadata"]["kernelspec"]["name"] == "tierlog"  # `tierlog lab`'s
        assert notebook["metadata"]["language_info"] == {"name": "python"}
        tagged = [c for c in notebook["cells"] if "parameters" in c["metadata"].get("tags", [])]
        assert len(tagged) == 1
        assert not any(c.get("outputs") for c in notebook["cells"]), f"{name} has outputs"


def test_the_notebook_check_compares_content_not_bytes(tmp_path: Path) -> None:
    from pipelines import notebooks

    for name in notebooks.NOTEBOOKS:
        (tmp_path / f"{name}.ipynb").write_text(notebooks.render(name))
    assert notebooks.stale(tmp_path) == []
    # Run in the lab: outputs, an execution count and the kernel's language_info.
    path = tmp_path / "explore_events.ipynb"
    notebook = json.loads(path.read_text())
    notebook["metadata"]["language_info"] = {"name": "python", "version": "3.11.2"}
    notebook["cells"][2]["execution_count"] = 1
    notebook["cells"][2]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "x"}]
    path.write_text(json.dumps(notebook))
    assert notebooks.stale(tmp_path) == []
    notebook["cells"][2]["source"] = "print('edited')"
    path.write_text(json.dumps(notebook))
    assert notebooks.stale(tmp_path) == ["explore_events.ipynb"]
    assert notebooks.main(["--check", "--notebooks-dir", str(tmp_path)]) == 1


@pytest.fixture(scope="module")
def explored(tiered: TieredTopic, tmp_path_factory: pytest.TempPathFactory) -> NotebookRun:
    """One run of explore_events, for its summary and for its HTML copy in the browser."""
    # remote_url is left to its default: the notebook asks the broker where its tier is.
    return run(
        "explore_events",
        tmp_path_factory.mktemp("explore"),
        bootstrap_servers=tiered.bootstrap,
        topic=tiered.topic,
        bin_seconds=1,
        sample_count=3,
    )


def test_explore_events(tiered: TieredTopic, explored: NotebookRun) -> None:
    result = explored
    summary = read_summary(result.output)
    assert summary["remote_url"] == tiered.remote_url
    assert summary["events_read"] == summary["messages"] == EVENTS
    assert summary["from_remote"] > 0 and summary["from_local"] > 0
    assert summary["partitions"] == 2 and summary["bins"] >= 8
    ends = tiered.remote_ends()
    for tiers in summary["offsets"]:
        p = tiers["partition"]
        assert tiers["remote_start"] == tiers["log_start"] == 0
        assert tiers["remote_end"] == ends[p]
        assert 0 < tiers["local_start"] <= tiers["remote_end"] <= tiers["latest"]
    assert set(summary["tier_boundaries"]) == {"0", "1"}
    images = [o for o in outputs(result.output) if "image/png" in o.get("data", {})]
    assert len(images) == 1
    assert "page_view" in json.dumps(outputs(result.output))  # sample values decoded


def test_explore_events_html_copy_shows_the_plot_in_chromium(
    explored: NotebookRun, tmp_path: Path
) -> None:
    assert explored.html == explored.output.with_suffix(".html")
    url = explored.html.resolve().as_uri()
    dom = browser.dump_dom(url, budget_ms=5000)
    images = re.findall(r'<img [^>]*src="data:image/png;base64,', dom)
    assert len(images) == 1, images  # the event-rate plot, embedded
    assert '<table class="tierlog-summary">' in dom and "IPython.core.display" not in dom
    # The page as a window tall enough for all of it (a few thousand pixels; headless
    # screenshots show the window only, and a fragment's scroll comes out blank), then the
    # plot's bar colours on screen in the plot's amounts: it rendered, and is visible.
    cells = json.loads(explored.output.read_text())["cells"]
    (png,) = [
        o["data"]["image/png"]
        for c in cells
        for o in c.get("outputs", [])
        if "image/png" in o.get("data", {})
    ]
    plot = browser.png_pixels(base64.b64decode(png))
    shot = browser.screenshot(
        url, tmp_path / "explore_events.png", window=(1280, 12_000), budget_ms=5000
    )
    assert not browser.is_blank(shot)
    bars = browser.colour_counts(plot, at_least=2000)  # bar fills, not edges
    assert len(bars) >= 2, f"expected both tiers' bar colours in the plot, got {bars}"
    for colour, count in bars.items():
        shown = browser.count_colour(shot, colour)
        # At least half: the page may scale the image to fit, never hide most of it.
        assert shown >= count // 2, f"colour {colour}: {shown} px on screen, {count} in the plot"


def test_ingest_to_delta(tiered: TieredTopic, tmp_path: Path) -> None:
    result = run(
        "ingest_to_delta",
        tmp_path,
        bootstrap_servers=tiered.bootstrap,
        topic=tiered.topic,
        table_path=str(tmp_path / "bronze"),
        remote_url=tiered.remote_url,
        silver_path=str(tmp_path / "silver"),
    )
    summary = read_summary(result.output)
    assert summary["rows_in_table"] == summary["rows_written"] == EVENTS
    assert summary["from_remote"] > 0 and summary["from_local"] > 0
    assert summary["from_remote"] + summary["from_local"] == EVENTS
    assert summary["table_path"] == str(tmp_path / "bronze")
    assert (summary["table_version"], summary["skipped"]) == (0, False)
    views = sum(1 for e in activity_stream(EVENTS) if e.kind == "page_view")
    assert summary["page_views"] == views and summary["silver_rows"] >= 8


def test_cluster_health(tiered: TieredTopic, tmp_path: Path) -> None:
    from confluent_kafka import Consumer, TopicPartition

    # A group that has read 100 records of partition 0: its lag is the rest of partition 0.
    consumer = Consumer({"bootstrap.servers": tiered.bootstrap, "group.id": "health-check"})
    try:
        consumer.commit(offsets=[TopicPartition(tiered.topic, 0, 100)], asynchronous=False)
        end = consumer.get_watermark_offsets(TopicPartition(tiered.topic, 0), timeout=10)[1]
    finally:
        consumer.close()
    history = tmp_path / "history.csv"
    parameters = {
        "bootstrap_servers": tiered.bootstrap,
        "history_path": str(history),
        # The fixture's broker serves its metrics on a random port (metrics.http.port=0),
        # which its config cannot tell; the notebook takes the URL as a parameter.
        "metrics_urls": {"0": f"http://127.0.0.1:{tiered.broker.metrics_port()}/metrics"},
    }
    runs = []
    for label in ("first", "second"):
        result = run_notebook(
            "cluster_health",
            parameters,
            notebooks_dir=NOTEBOOKS,
            runs_dir=tmp_path / "runs",
            cwd=tmp_path,
            label=label,
            timeout_s=120,  # no Spark: a few seconds a cell
        )
        assert result.ok, f"cluster_health failed: {result.error}; see {result.output}"
        runs.append(result)
    summary = read_summary(runs[1].output)
    assert (summary["brokers"], summary["controller"], summary["metrics_scraped"]) == ([0], 0, [0])
    assert summary["under_replicated"] == summary["offline"] == 0
    assert summary["partitions"] >= tiered.partitions
    assert summary["leaders"] == {"0": summary["partitions"]}
    store = tiered.store()
    remote = sum(
        s.size_bytes
        for p in range(tiered.partitions)
        for s in committed_segments(store.read_manifest(tiered.topic, p))
    )
    assert summary["remote_bytes"] == remote > 0
    local = sum(f.stat().st_size for f in tiered.broker.data_dir.glob("*-*/*.log"))
    assert 0 < summary["local_bytes"] <= local + 1  # the broker's sizes of its segments
    assert summary["lag"]["health-check"] == end - 100 > 0
    assert len(history.read_text().splitlines()) == 3  # a header and one row per run
    images = [o for o in outputs(runs[1].output) if "image/png" in o.get("data", {})]
    assert len(images) == 1
    plot = browser.png_pixels(base64.b64decode(images[0]["data"]["image/png"]))
    # Drawn: the panels' bar colours (leaders, lag, local bytes), not a blank figure.
    assert len(browser.colour_counts(plot, at_least=500)) >= 3


def test_replay_from_object_storage_with_the_broker_stopped(
    tiered: TieredTopic, tmp_path: Path
) -> None:
    ends = wait_offloaded(tiered)
    since = START_MS + 1000
    expected = [r for r in topic_rows(tiered) if r[1] < ends[r[0]] and r[4] >= since]
    tiered.broker.stop()
    result = run(
        "replay_from_object_storage",
        tmp_path,
        topic=tiered.topic,
        remote_url=tiered.remote_url,
        table_path=str(tmp_path / "replay"),
        starting_timestamp="2023-11-14T22:13:21Z",  # START_MS + 1 s
    )
    summary = read_summary(result.output)
    assert summary["rows"] == len(expected) > 1000
    assert summary["first_timestamp"] >= "2023-11-14T22:13:21"
    partitions = {r[0] for r in expected}
    assert summary["offsets"] == {
        str(p): [min(r[1] for r in expected if r[0] == p), ends[p] - 1] for p in partitions
    }


def test_read_summary_says_when_there_is_none(tmp_path: Path) -> None:
    with pytest.raises(SummaryNotFound, match="no summary output"):
        read_summary(NOTEBOOKS / "ingest_to_delta.ipynb")
    (tmp_path / "x.ipynb").write_text("{}")
    with pytest.raises(ValueError, match="not a notebook"):
        read_summary(tmp_path / "x.ipynb")


def test_read_summary_takes_the_last_marked_json(tmp_path: Path) -> None:
    def shown(data: dict[str, Any], metadata: dict[str, Any]) -> dict[str, Any]:
        return {
            "output_type": "display_data",
            "data": {"application/json": data, "text/plain": ["<JSON>"]},
            "metadata": metadata,
        }

    outputs = [
        shown({"rows": 1}, {"tierlog": "summary"}),
        shown({"other": True}, {}),  # JSON a notebook displays for itself
        shown({"rows": 2}, {"application/json": {"tierlog": "summary"}}),
    ]
    cell = {"cell_type": "code", "source": "", "metadata": {}, "outputs": outputs}
    (tmp_path / "run.ipynb").write_text(json.dumps({"cells": [cell]}))
    assert read_summary(tmp_path / "run.ipynb") == {"rows": 2}
