"""tierlog.jobs.report: every run gets a standalone HTML copy beside it, ok or failed. (The
browser's view of one, plot included, is in test_notebooks.py.)"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tests.jobs.conftest import DATA
from tierlog.jobs import runner
from tierlog.jobs.report import html_path, render_html


def test_a_run_gets_an_html_copy_with_its_outputs_and_no_remote_scripts(tmp_path: Path) -> None:
    run = runner.run_notebook(
        "summary", notebooks_dir=DATA, runs_dir=tmp_path / "runs", cwd=tmp_path
    )
    assert run.ok, run.error
    assert run.html == html_path(run.output) == run.output.with_suffix(".html")
    page = run.html.read_text()
    assert page.startswith("<!DOCTYPE html>")
    assert '<table class="tierlog-summary">' in page
    assert "IPython.core.display" not in page
    # require.js and MathJax are left out: the page loads no script from the network, so
    # it renders offline without waiting.
    assert "<script src=" not in page and "require.min.js" not in page


def test_a_failed_run_gets_an_html_copy_too(tmp_path: Path) -> None:
    run = runner.run_notebook(
        "fails", {"message": "no luck"}, notebooks_dir=DATA, runs_dir=tmp_path, cwd=tmp_path
    )
    assert not run.ok
    assert run.html is not None
    page = run.html.read_text()
    assert "before the failure" in page and "no luck" in page


def test_a_conversion_failure_is_logged_and_the_run_still_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(notebook: Path) -> Path:
        raise RuntimeError("no template")

    monkeypatch.setattr("tierlog.jobs.report.write_html", broken)
    with caplog.at_level(logging.WARNING, logger="tierlog.jobs.runner"):
        run = runner.run_notebook("summary", notebooks_dir=DATA, runs_dir=tmp_path, cwd=tmp_path)
    assert run.ok and run.html is None
    assert "no HTML copy of" in caplog.text and "RuntimeError: no template" in caplog.text


def test_render_html_of_an_unexecuted_notebook_shows_its_source() -> None:
    page = render_html(DATA / "summary.ipynb")
    assert "show_summary" in page


# A 1x1 PNG, as a plot's output carries one.
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwAD"
    "hgGAWjR9awAAAABJRU5ErkJggg=="
)


def test_a_plot_converts_without_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """nbconvert warned "Alternative text is missing on 1 image(s)" on every run with a
    plot; the page still gets the image, with nbconvert's generic alternative text."""
    import nbformat

    notebook = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("plot()")
    cell.outputs = [nbformat.v4.new_output("display_data", data={"image/png": PNG})]
    notebook.cells = [cell]
    path = tmp_path / "plot.ipynb"
    nbformat.write(notebook, path)
    with caplog.at_level(logging.WARNING):
        page = render_html(path)
    assert f"data:image/png;base64,{PNG}" in page and 'alt="' in page
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
