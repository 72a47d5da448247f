"""``make demo`` end to end, smaller: broker, offload, the ingest notebook through papermill
into Delta, and a summary whose counts add up."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from tierlog.tools.platform_demo import run_platform_demo

REPO = Path(__file__).resolve().parents[2]
# A broker, a kernel and a Spark of its own: about a minute alone, several on a loaded run
# (tests/jobs/test_notebooks.py has the same hang guard).
pytestmark = [pytest.mark.timeout(600), pytest.mark.notebooks]


def test_demo_lands_every_message_in_delta_from_both_tiers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # make demo passes relative paths
    out = io.StringIO()
    summary = run_platform_demo(
        Path("demo"), out, events=40_000, notebooks_dir=REPO / "notebooks", runs_dir=Path("runs")
    )
    text = out.getvalue()
    assert summary["rows_in_table"] == summary["produced"] == 40_000, text
    assert summary["from_remote"] > 0 and summary["from_local"] > 0, text
    assert summary["from_remote"] + summary["from_local"] == 40_000
    assert "40,000 rows = 40,000 messages produced: True" in text
    executed = Path(summary["notebook"])
    assert executed.parent == tmp_path / "runs" and executed.suffix == ".ipynb"
    assert executed.with_suffix(".log").exists()  # the kernel's chatter, not our stdout
    # Progress while the notebook runs: a line as each cell starts, with the time elapsed.
    assert re.search(r"^\[ *\d+\.\d s\]   cell 1 of \d+: ", text, re.M), text
    assert re.search(r"^\[ *\d+\.\d s\]   cell \d+ of \d+ \(Ingest\): ", text, re.M), text
    # Spark's and Delta's noise is not in the kernel's log (tierlog/spark/log4j2.properties).
    log = executed.with_suffix(".log").read_text()
    for noise in (
        "NativeCodeLoader",
        "Using Spark's default log4j profile",
        "Truncated the string representation",
        "NullPointerException",
        "Failed to delete",
        "BGQUEUE",
    ):
        assert noise not in log, log
    cells = json.loads(executed.read_text())["cells"]
    assert any("parameters" in c["metadata"].get("tags", []) for c in cells)
    assert (tmp_path / "demo" / "delta" / "activity_bronze" / "_delta_log").is_dir()
