"""The demo (make demo) end to end, smaller: broker, tiered topic, producer, group."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from tierlog.tools.demo import run_demo


def test_demo_reads_every_event_back_across_the_tier_boundary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # make demo passes a relative ./data/demo
    out = io.StringIO()
    figures = run_demo(Path("demo"), out, events=60_000)
    text = out.getvalue()
    assert figures["consumed"] == figures["events"] == 60_000
    assert "lag after commit: 0" in text
    manifests = list((tmp_path / "demo" / "logs" / "remote").glob("activity-*/manifest.json"))
    assert manifests, text  # part of the stream was offloaded and read back from there
