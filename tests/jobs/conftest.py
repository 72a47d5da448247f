"""Fixture notebooks and the installed ``tierlog`` command, for the runner and scheduler tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data"
# The console script of the venv running the tests, as a user would call it.
TIERLOG = Path(sys.executable).parent / "tierlog"
# A kernel starts in a second or two; this only stops a hang.
CALL_TIMEOUT = 90.0


def tierlog(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TIERLOG), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=CALL_TIMEOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
    )


def stream_text(notebook: Path) -> str:
    """Everything the executed notebook's cells printed."""
    cells = json.loads(notebook.read_text())["cells"]
    return "".join(
        "".join(output.get("text", ""))
        for cell in cells
        for output in cell.get("outputs", [])
        if output.get("output_type") == "stream"
    )


def report(notebook: Path) -> dict[str, Any]:
    """The JSON line ``data/report.ipynb`` prints: its parameters, prefix and cwd."""
    line = stream_text(notebook).strip().splitlines()[-1]
    result: dict[str, Any] = json.loads(line)
    return result
