"""A parameter the notebook does not declare is refused before anything runs (papermill
itself only warns and runs on with the defaults), and so is a run whose broker is down."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli import REPO, TIERLOG, closed_port, one_line_failure, run

DATA = Path(__file__).parent / "data"
NOTEBOOKS = REPO / "notebooks"


def test_a_mistyped_parameter_is_refused_with_the_closest_name(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    result = run(
        TIERLOG, "notebook", "run", "report", "--notebooks-dir", str(DATA),
        "--runs-dir", str(runs), "-p", "count", "3", "-p", "greting", "hi",
    )  # fmt: skip
    line = one_line_failure(result, code=2)
    assert line == (
        "tierlog: notebook report has no parameter 'greting' (did you mean 'greeting'?); "
        "its parameters: greeting, count, ratio, flag, nothing, label"
    )
    assert not runs.exists() or not any(runs.iterdir())  # nothing ran, nothing kept


def test_a_notebook_without_a_parameters_cell_takes_none(tmp_path: Path) -> None:
    plain = tmp_path / "plain.ipynb"
    plain.write_text(
        json.dumps(
            {
                "cells": [
                    {"cell_type": "code", "metadata": {}, "source": "x = 1", "outputs": [],
                     "execution_count": None}
                ],
                "metadata": {"kernelspec": {"name": "python3", "language": "python",
                                            "display_name": "Python 3"}},
                "nbformat": 4,
                "nbformat_minor": 5,
            }
        )
    )  # fmt: skip
    result = run(
        TIERLOG, "notebook", "run", str(plain), "--runs-dir", str(tmp_path / "runs"),
        "-r", "x", "2",
    )  # fmt: skip
    line = one_line_failure(result, code=2)
    assert "notebook plain takes no parameters (it has no cell tagged 'parameters')" in line


def test_a_notebook_whose_broker_is_not_running_fails_at_once(tmp_path: Path) -> None:
    bootstrap = f"127.0.0.1:{closed_port()}"
    runs = tmp_path / "runs"
    result = run(
        TIERLOG, "notebook", "run", str(NOTEBOOKS / "ingest_to_delta.ipynb"),
        "--runs-dir", str(runs), "-p", "bootstrap_servers", bootstrap,
    )  # fmt: skip
    # The pre-flight check's own line, and no run written: it failed before a kernel and
    # Spark started (a wall-clock bound here failed on a loaded machine).
    line = one_line_failure(result)
    assert line == (
        f"tierlog: cannot reach a broker at {bootstrap}: connection refused (is a broker "
        "running there?); start one with `tierlog broker start --config "
        "configs/server.properties`, or pass -p bootstrap_servers HOST:PORT"
    )
    assert not runs.exists() or not any(runs.iterdir())
