"""A notebook's recorded summary: the JSON its last cell displays for whoever runs it
headless (tests, ``make demo``, a scheduler's report) to read back from the executed copy.

A notebook publishes it with::

    from IPython.display import JSON, display
    display(JSON(summary), metadata={"tierlog": "summary"})

which nbformat records as a ``display_data`` output with the summary under
``data["application/json"]`` and the marker in ``metadata``. Other outputs are ignored, so
a notebook is free to display JSON of its own.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

MARKER_KEY = "tierlog"
MARKER_VALUE = "summary"
JSON_MIME = "application/json"


class SummaryNotFound(LookupError):
    """The notebook has no summary output (it was not run, or failed before its last cell)."""


def summary_metadata() -> dict[str, str]:
    """The ``metadata`` to pass to ``display`` with the summary."""
    return {MARKER_KEY: MARKER_VALUE}


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
    marked = metadata.get(MARKER_KEY) == MARKER_VALUE or (
        isinstance(metadata.get(JSON_MIME), Mapping)
        and metadata[JSON_MIME].get(MARKER_KEY) == MARKER_VALUE
    )
    data = (output.get("data") or {}).get(JSON_MIME)
    if not marked or not isinstance(data, dict):
        return None
    return data
