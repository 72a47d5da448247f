"""``make demo`` end to end, smaller: broker, offload, the ingest notebook through papermill
into Delta, and a summary whose counts add up."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from tierlog.tools.platform_demo import run_platform_demo

REPO = Path(__file__).resolve().parents[2]


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
    cells = json.loads(executed.read_text())["cells"]
    assert any("parameters" in c["metadata"].get("tags", []) for c in cells)
    assert (tmp_path / "demo" / "delta" / "activity_bronze" / "_delta_log").is_dir()
