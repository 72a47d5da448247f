"""A notebook's recorded summary: what its last cell shows, as a table for whoever reads the
notebook (JupyterLab, the HTML copy under ``runs/``) and as JSON for whoever runs it
headless (tests, ``make demo``, a scheduler's report) to read back from the executed copy.

A notebook publishes it with::

    from tierlog.jobs.summary import show_summary

    show_summary(summary)

which nbformat records as one ``display_data`` output with the marker in ``metadata`` and
three representations in ``data``: the summary itself under ``SUMMARY_MIME``, an HTML table
(``text/html``) and aligned ``key  value`` lines (``text/plain``). The JSON has a vendor MIME
type of its own because front ends prefer their JSON viewer over HTML for
``application/json`` (JupyterLab ranks it first); for an unknown type they fall back to the
table, and nbconvert's HTML export never shows it. Outputs recorded with ``application/json``
(before the vendor type) are still read. Other outputs are ignored, so a notebook is free
to display JSON of its own.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

MARKER_KEY = "tierlog"
MARKER_VALUE = "summary"
# nbformat keeps ``application/...+json`` data as JSON, not as text.
SUMMARY_MIME = "application/vnd.tierlog.summary+json"
JSON_MIME = "application/json"
# Jupyter's stylesheets right-align table cells (made for numbers); keys and mixed values
# read better left-aligned.
_CELL_STYLE = ' style="text-align: left; vertical-align: top"'


class SummaryNotFound(LookupError):
    """The notebook has no summary output (it was not run, or failed before its last cell)."""


def summary_metadata() -> dict[str, str]:
    """The ``metadata`` the summary is displayed with."""
    return {MARKER_KEY: MARKER_VALUE}


def show_summary(summary: Mapping[str, Any]) -> None:
    """Display ``summary`` from a notebook cell (see the module docstring)."""
    from IPython.display import display

    display(summary_bundle(summary), raw=True, metadata=summary_metadata())


def summary_bundle(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The MIME bundle ``show_summary`` displays."""
    return {
        SUMMARY_MIME: dict(summary),
        "text/html": as_html(summary),
        "text/plain": as_text(summary),
    }


def as_text(summary: Mapping[str, Any]) -> str:
    """``key  value`` lines, keys aligned; a list of records gets one indented line each."""
    width = max((len(str(key)) for key in summary), default=0)
    lines = []
    for key, value in summary.items():
        if _is_records(value):
            lines.append(str(key))
            lines.extend(f"  {_text(record)}" for record in value)
        else:
            lines.append(f"{key!s:<{width}}  {_text(value)}")
    return "\n".join(lines)


def _text(value: Any) -> str:
    if isinstance(value, Mapping):
        return ", ".join(f"{key}: {_text(item)}" for key, item in value.items())
    if isinstance(value, list):
        return "[" + ", ".join(_text(item) for item in value) + "]"
    return _scalar(value)


def as_html(summary: Mapping[str, Any]) -> str:
    """A two-column table (key, value); a nested mapping is a table of its own, a list of
    records a table with a header row."""
    return f'<table class="tierlog-summary">{_rows(summary)}</table>'


def _rows(mapping: Mapping[str, Any]) -> str:
    return "".join(
        f"<tr><th{_CELL_STYLE}>{html.escape(str(key))}</th>"
        f"<td{_CELL_STYLE}>{_html(value)}</td></tr>"
        for key, value in mapping.items()
    )


def _html(value: Any) -> str:
    if isinstance(value, Mapping):
        return f"<table>{_rows(value)}</table>" if value else "{}"
    if _is_records(value):
        columns = list(dict.fromkeys(key for record in value for key in record))
        head = "".join(f"<th{_CELL_STYLE}>{html.escape(str(c))}</th>" for c in columns)
        body = "".join(
            "<tr>"
            + "".join(f"<td{_CELL_STYLE}>{_html(record.get(c))}</td>" for c in columns)
            + "</tr>"
            for record in value
        )
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    if isinstance(value, list):
        return html.escape(_text(value))
    return html.escape(_scalar(value))


def _is_records(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, Mapping) for v in value)


def _scalar(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return f"{value:,}"  # 100,000 rows, not 100000
    return str(value)


def read_summary(path: str | Path) -> dict[str, Any]:
    """The summary recorded in an executed notebook (the last one, if it shows several).

    Args:
        path: an executed ``.ipynb`` file.

    Returns:
        The summary as it was displayed.

    Raises:
        SummaryNotFound: no output carries the summary marker.
        ValueError: the file is not a notebook.
    """
    try:
        notebook = json.loads(Path(path).read_text())
    except ValueError as exc:
        raise ValueError(f"{path} is not a notebook: {exc}") from None
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        raise ValueError(f"{path} is not a notebook: no cells")
    found: dict[str, Any] | None = None
    for cell in notebook["cells"]:
        for output in cell.get("outputs") or ():
            summary = _summary_of(output)
            if summary is not None:
                found = summary
    if found is None:
        raise SummaryNotFound(
            f"{path} has no summary output (a display_data with metadata "
            f'{{"{MARKER_KEY}": "{MARKER_VALUE}"}}); did the notebook run to its last cell?'
        )
    return found


def _summary_of(output: Mapping[str, Any]) -> dict[str, Any] | None:
    if output.get("output_type") not in ("display_data", "execute_result"):
        return None
    metadata = output.get("metadata") or {}
    # IPython records metadata given to display() at the top level; per-MIME metadata
    # (``{"application/json": {...}}``) is how other front ends nest it.
    marked = metadata.get(MARKER_KEY) == MARKER_VALUE or any(
        isinstance(metadata.get(mime), Mapping) and metadata[mime].get(MARKER_KEY) == MARKER_VALUE
        for mime in (SUMMARY_MIME, JSON_MIME)
    )
    data = output.get("data") or {}
    summary = data.get(SUMMARY_MIME, data.get(JSON_MIME))
    if not marked or not isinstance(summary, dict):
        return None
    return summary
