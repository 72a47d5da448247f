"""bench/summary.py: the median of several runs of every side-by-side figure, the remote-tier
checks, and the whole loop over real benchmark processes (a small stand-in benchmark)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
import summary
from summary import Bench

from tests.bench.conftest import BENCH


def _run(bench: str, figures: list[tuple[str, float | None]], goal: float = 0.8) -> dict[str, Any]:
    return {
        "bench": bench,
        "run": 1,
        "report": {
            "side_by_side": [
                {
                    "name": name,
                    "unit": "MB/s",
                    "better": "higher",
                    "sides": ["remote", "hot"],
                    "remote": {"median": ratio * 100} if ratio is not None else {},
                    "hot": {"median": 100.0},
                    "ratio": ratio,
                    "goal": goal,
                }
                for name, ratio in figures
            ]
        },
    }


REPLAY, OFFLOAD = summary.CHECKS[0][1], summary.CHECKS[1][1]


def test_aggregate_takes_the_median_of_the_runs_ratios() -> None:
    runs = [
        _run("tiered", [(REPLAY, 0.5), (OFFLOAD, 0.9)]),
        _run("tiered", [(REPLAY, 0.95), (OFFLOAD, 0.2)]),
        _run("tiered", [(REPLAY, 0.85), (OFFLOAD, None)]),
    ]
    rows = {r["name"]: r for r in summary.aggregate(runs)}
    replay = rows[REPLAY]
    assert replay["ratios"] == [0.5, 0.95, 0.85]
    assert replay["ratio"] == 0.85 and (replay["ratio_min"], replay["ratio_max"]) == (0.5, 0.95)
    assert replay["remote"] == 85.0 and replay["hot"] == 100.0
    assert replay["meets_goal"] is True
    offload = rows[OFFLOAD]  # a run without a ratio is left out of the median
    assert offload["ratio"] == pytest.approx(0.55) and offload["meets_goal"] is False


def test_checks_fail_on_a_missed_goal_and_on_a_missing_figure() -> None:
    rows = summary.aggregate([_run("tiered", [(REPLAY, 0.9)])])
    checks = {c["name"]: c for c in summary.check(rows, {"tiered"})}
    assert checks[REPLAY]["passed"] is True
    assert checks[OFFLOAD]["passed"] is False and checks[OFFLOAD]["why"] == "not measured"
    rows = summary.aggregate([_run("tiered", [(REPLAY, 0.7), (OFFLOAD, 0.9)])])
    assert [c["passed"] for c in summary.check(rows, {"tiered"})] == [False, True]
    assert summary.check(rows, {"storage"}) == []  # tiered did not run: nothing to check


def test_last_report_skips_what_follows_the_json_line(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text('progress\n{"bench":"a","n":1}\n{"bench": broken\nbroker stopped\n')
    assert summary.last_report(log) == {"bench": "a", "n": 1}
    log.write_text("no report\n")
    assert summary.last_report(log) is None


FAKE = textwrap.dedent(
    """
    import sys
    from reporting import Report

    run = int(sys.argv[1])
    report = Report("tiered", quick="--quick" in sys.argv)
    replay = [0.5, 0.9, 0.85][run % 3]
    report.side_by_side("{replay}", {{"remote": [replay * 100], "hot": [100.0]}},
                        unit="MB/s", goal=0.8)
    report.side_by_side("{offload}", {{"offload": [30.0], "raw write": [100.0, 90.0]}},
                        unit="MB/s", goal=0.8)
    sys.exit(report.finish())
    """
)


def test_main_runs_each_benchmark_and_checks_the_median_of_the_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "fake_tiered.py"
    script.write_text(FAKE.format(replay=REPLAY, offload=OFFLOAD))
    counter = tmp_path / "counter"
    counter.write_text("0")
    # Each run gets the next number: a wrapper bumps the counter and runs the script.
    wrapper = tmp_path / "wrapper.py"
    wrapper.write_text(
        textwrap.dedent(
            f"""
            import runpy, sys
            from pathlib import Path
            n = int(Path({str(counter)!r}).read_text())
            Path({str(counter)!r}).write_text(str(n + 1))
            sys.argv = [{str(script)!r}, str(n), *sys.argv[1:]]
            runpy.run_path({str(script)!r}, run_name="__main__")
            """
        )
    )
    monkeypatch.setenv("PYTHONPATH", str(BENCH))
    monkeypatch.setattr(summary, "WORK", tmp_path / "work")
    monkeypatch.setattr(summary, "BENCHES", (Bench("tiered", (str(wrapper), "--quick")),))
    assert summary.main(["--runs", "3"]) == 1  # the offload check misses its goal
    out = capsys.readouterr().out.splitlines()
    result = json.loads(out[-1])
    assert result["bench"] == "summary" and result["claim"] is False
    assert [r["exit"] for r in result["runs"]] == [0, 0, 0]
    assert all(set(r["load_average"]) == {"start", "end"} for r in result["runs"])
    checks = {c["name"]: c for c in result["checks"]}
    assert checks[REPLAY]["ratios"] == [0.5, 0.9, 0.85]
    assert checks[REPLAY]["ratio"] == 0.85 and checks[REPLAY]["passed"] is True
    assert checks[OFFLOAD]["ratio"] == pytest.approx(0.3158, abs=1e-4)
    assert checks[OFFLOAD]["passed"] is False
    assert any(line.startswith("tiered ") and REPLAY in line for line in out)
    assert any("FAILED" in line and OFFLOAD in line for line in out)


def test_a_benchmark_that_prints_no_report_fails_the_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "broken.py"
    script.write_text("raise SystemExit('no figures today')\n")
    monkeypatch.setattr(summary, "WORK", tmp_path / "work")
    monkeypatch.setattr(summary, "BENCHES", (Bench("storage", (str(script),)),))
    assert summary.main(["--runs", "1"]) == 1
    result = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert result["failed_runs"] == 1
    assert "no JSON line" in result["runs"][0]["error"]
    assert result["checks"] == [] and result["figures"] == []


def test_unknown_benchmark_names_are_refused() -> None:
    with pytest.raises(SystemExit):
        summary.parse_args(["--only", "tiered,nonsense"])
