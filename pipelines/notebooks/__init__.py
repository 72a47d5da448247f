"""The shipped notebooks (``notebooks/*.ipynb``), written from the cell sources in this
package so they are reviewed and diffed as code; the ``.ipynb`` files are generated
(committed without outputs)::

    .venv/bin/python -m pipelines.notebooks          # rewrite the notebooks
    .venv/bin/python -m pipelines.notebooks --check  # exit 1 if one is out of date

Each notebook has a cell tagged ``parameters`` (papermill injects its parameters after it)
whose defaults work on what ``make demo`` leaves (topic ``activity`` on 127.0.0.1:9092, the
remote tier under ``data/demo/logs/remote``), and ends with a cell showing its summary
(``show_summary``: a table to read, JSON for ``tierlog.jobs.summary.read_summary``). The
logic lives in ``pipelines/``; the cells call it and show what it returns. Cell ids are
derived from the notebook's name and the cell's position, so rebuilding an unchanged
notebook changes nothing.

The files are written as JupyterLab writes them (nbformat's JSON, a final newline), and
``tierlog lab`` keeps the kernel's ``language_info`` out of saved notebooks
(``tierlog.tools.lab_save``): opening a notebook in the lab and saving it leaves the file as
it was. ``--check`` compares content (cells, their ids and tags, the kernel), not bytes, so
outputs of a notebook run in the lab do not count as a stale notebook.

The generator lives here rather than in ``notebooks/``, the lab's folder, where a user
would take it for a notebook of its own.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import nbformat

from pipelines.notebooks import (
    changelog_cache,
    cluster_health,
    exactly_once,
    explore_events,
    ingest_to_delta,
    replay_from_object_storage,
)
from pipelines.notebooks.cells import METADATA

NOTEBOOKS_DIR = Path(__file__).resolve().parents[2] / "notebooks"
NOTEBOOKS: dict[str, list[tuple[str, str]]] = {
    "explore_events": explore_events.CELLS,
    "ingest_to_delta": ingest_to_delta.CELLS,
    "replay_from_object_storage": replay_from_object_storage.CELLS,
    "changelog_cache": changelog_cache.CELLS,
    "exactly_once": exactly_once.CELLS,
    "cluster_health": cluster_health.CELLS,
}


def build(name: str, cells: list[tuple[str, str]]) -> Any:
    """The notebook ``name`` as an nbformat node, without outputs."""
    nb = nbformat.v4.new_notebook(metadata=METADATA)
    for n, (kind, text) in enumerate(cells):
        source = textwrap.dedent(text).strip("\n")
        if kind == "markdown":
            cell = nbformat.v4.new_markdown_cell(source)
        else:
            cell = nbformat.v4.new_code_cell(source)
            if kind == "parameters":
                cell.metadata["tags"] = ["parameters"]
        cell.id = f"{name.replace('_', '-')}-{n:02d}"
        nb.cells.append(cell)
    nbformat.validate(nb)
    return nb


def render(name: str) -> str:
    """The ``.ipynb`` text of notebook ``name``, as ``nbformat.write`` (and so Jupyter's
    server) writes it: nbformat's JSON and a final newline."""
    return nbformat.writes(build(name, NOTEBOOKS[name])) + "\n"


def content(text: str) -> dict[str, Any]:
    """What ``--check`` compares of a notebook's JSON: each cell's type, id, source and
    tags, and the kernel it names. Outputs, execution counts and the ``language_info`` a
    kernel reports are left out: running a notebook in the lab does not make it stale."""
    notebook = json.loads(text)
    cells = [
        {
            "type": cell["cell_type"],
            "id": cell.get("id"),
            "source": "".join(cell["source"]),
            "tags": cell.get("metadata", {}).get("tags", []),
        }
        for cell in notebook["cells"]
    ]
    return {"kernelspec": notebook["metadata"].get("kernelspec"), "cells": cells}


def stale(directory: Path = NOTEBOOKS_DIR) -> list[str]:
    """The notebooks in ``directory`` whose content differs from their sources (or that
    are missing)."""
    out = []
    for name in NOTEBOOKS:
        path = directory / f"{name}.ipynb"
        if not path.exists() or content(path.read_text()) != content(render(name)):
            out.append(path.name)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pipelines.notebooks", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--check", action="store_true", help="exit 1 if a notebook differs")
    parser.add_argument("--notebooks-dir", type=Path, default=NOTEBOOKS_DIR)
    args = parser.parse_args(argv)
    if args.check:
        out_of_date = stale(args.notebooks_dir)
        if out_of_date:
            print(
                f"out of date: {', '.join(out_of_date)} (run python -m pipelines.notebooks)",
                file=sys.stderr,
            )
            return 1
        return 0
    for name in NOTEBOOKS:
        path = args.notebooks_dir / f"{name}.ipynb"
        path.write_text(render(name))
        print(f"wrote {path}")
    return 0
