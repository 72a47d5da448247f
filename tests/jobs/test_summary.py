"""tierlog.jobs.summary: what a summary looks like to a reader (HTML table, plain text) and
that the JSON survives a real run for ``read_summary``."""

from __future__ import annotations

import json
from pathlib import Path

from tests.jobs.conftest import DATA
from tierlog.jobs.runner import run_notebook
from tierlog.jobs.summary import (
    SUMMARY_MIME,
    as_html,
    as_text,
    read_summary,
    summary_bundle,
)

SUMMARY = {
    "topic": "events",
    "rows": 100000,
    "ok": True,
    "remote_url": None,
    "offsets": [{"partition": 0, "end": 10}, {"partition": 1, "end": 12, "lag": 3}],
    "end_offsets": {"0": 10, "1": 12},
    "ranges": [0, 5],
    "note": "<b>not markup</b>",
}


def test_text_is_aligned_key_value_lines_with_one_line_per_record() -> None:
    assert as_text(SUMMARY).splitlines() == [
        "topic        events",
        "rows         100,000",
        "ok           true",
        "remote_url   none",
        "offsets",
        "  partition: 0, end: 10",
        "  partition: 1, end: 12, lag: 3",
        "end_offsets  0: 10, 1: 12",
        "ranges       [0, 5]",
        "note         <b>not markup</b>",
    ]


def test_html_is_a_table_with_nested_tables_and_escaped_text() -> None:
    page = as_html(SUMMARY)
    assert page.startswith('<table class="tierlog-summary">')
    assert ">100,000</td>" in page and ">none</td>" in page
    # The list of records is a table with one column per key, the union of all records.
    assert "<thead><tr>" in page and ">lag</th>" in page
    assert page.count("<table") == 3  # the summary, offsets, end_offsets
    assert "&lt;b&gt;not markup&lt;/b&gt;" in page and "<b>" not in page


def test_the_bundle_carries_json_under_a_type_front_ends_do_not_render_first() -> None:
    bundle = summary_bundle(SUMMARY)
    assert bundle[SUMMARY_MIME] == SUMMARY
    # application/json would win over the table in JupyterLab (its JSON viewer ranks first).
    assert "application/json" not in bundle
    assert set(bundle) == {SUMMARY_MIME, "text/html", "text/plain"}


def test_a_run_records_a_readable_summary_and_read_summary_reads_it(tmp_path: Path) -> None:
    run = run_notebook(
        "summary", {"rows": 7}, notebooks_dir=DATA, runs_dir=tmp_path / "runs", cwd=tmp_path
    )
    assert run.ok, run.error
    assert read_summary(run.output)["rows"] == 7
    outputs = [o for c in json.loads(run.output.read_text())["cells"] for o in c.get("outputs", [])]
    (shown,) = [o for o in outputs if o["output_type"] == "display_data"]
    assert shown["metadata"] == {"tierlog": "summary"}
    text = "".join(shown["data"]["text/plain"])
    assert "topic        events" in text and "IPython.core.display" not in text
    assert "tierlog-summary" in "".join(shown["data"]["text/html"])
