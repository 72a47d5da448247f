"""bench/reporting.py: medians and spreads of rounds, side-by-side ratios, the JSON line."""

from __future__ import annotations

import io
import json

import pytest
import reporting
from reporting import HIGHER, LOWER, Report


def test_spread_is_median_min_max_of_the_rounds_that_produced_a_number() -> None:
    assert reporting.spread([3.0, None, 1.0, 10.0]) == {
        "median": 3.0,
        "min": 1.0,
        "max": 10.0,
        "rounds": [3.0, 1.0, 10.0],
    }
    assert reporting.spread([2, 4]) == {"median": 3.0, "min": 2.0, "max": 4.0, "rounds": [2, 4]}
    assert reporting.spread([None, None]) == {}


def test_side_by_side_ratio_is_of_the_medians_not_of_the_best_rounds() -> None:
    report = Report("t", quick=False, out=io.StringIO())
    # Best rounds would say 200/100 = 2.0; the medians say 100/100 = 1.0.
    figure = report.side_by_side(
        "x", {"tierlog": [100, 200, 90], "kafka": [100, 95, 110]}, unit="msgs/s"
    )
    assert figure["ratio"] == 1.0
    assert figure["tierlog"]["median"] == 100 and figure["tierlog"]["max"] == 200
    assert figure["sides"] == ["tierlog", "kafka"]


@pytest.mark.parametrize(
    ("better", "tierlog", "expected"),
    [(HIGHER, 90.0, False), (HIGHER, 110.0, True), (LOWER, 90.0, True), (LOWER, 110.0, False)],
)
def test_goal_is_met_in_the_direction_that_is_better(
    better: str, tierlog: float, expected: bool
) -> None:
    report = Report("t", quick=False, out=io.StringIO())
    figure = report.side_by_side(
        "x", {"tierlog": [tierlog], "kafka": [100.0]}, unit="u", better=better, goal=1.0
    )
    assert figure["meets_goal"] is expected


def test_a_side_without_rounds_has_no_ratio() -> None:
    report = Report("t", quick=False, out=io.StringIO())
    figure = report.side_by_side("x", {"a": [None], "b": [1.0]}, unit="u", goal=1.0)
    assert figure["ratio"] is None and figure["meets_goal"] is None


def test_side_by_side_refuses_anything_but_two_sides() -> None:
    report = Report("t", quick=False, out=io.StringIO())
    with pytest.raises(ValueError):
        report.side_by_side("x", {"a": [1.0]}, unit="u")
    with pytest.raises(ValueError):
        report.side_by_side("x", {"a": [1.0], "b": [1.0]}, unit="u", better="faster")


def test_finish_prints_the_table_and_the_report_as_the_last_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    report = Report("demo", quick=True)
    report.side_by_side("append", {"Log.append": [8, 9, 10], "os.write": [10, 10, 10]}, unit="MB/s")
    report.data["extra"] = {"a": 1}
    assert report.finish() == 0
    out = capsys.readouterr().out.splitlines()
    data = json.loads(out[-1])
    assert data["bench"] == "demo" and data["extra"] == {"a": 1}
    assert data["quick"] is True and data["claim"] is False
    assert set(data["load_average"]) == {"start", "end"}
    assert [f["name"] for f in data["side_by_side"]] == ["append"]
    assert data["side_by_side"][0]["ratio"] == 0.9
    assert out.count(reporting.QUICK_NOTICE) == 2  # at the start and before the JSON
    assert any("Log.append 9 (8-10, 3 rounds)" in line for line in out)


def test_a_failed_check_is_repeated_at_the_end_and_fails_the_run(
    capsys: pytest.CaptureFixture[str],
) -> None:
    report = Report("demo", quick=False)
    report.fail("aborted records delivered")
    assert report.finish() == 1
    out = capsys.readouterr().out.splitlines()
    assert json.loads(out[-1])["failed_checks"] == ["aborted records delivered"]
    assert out.count("CHECK FAILED: aborted records delivered") == 2
    assert reporting.QUICK_NOTICE not in out


def test_an_interrupted_run_says_so_and_exits_130(capsys: pytest.CaptureFixture[str]) -> None:
    report = Report("demo", quick=False)
    assert report.finish(interrupted="KeyboardInterrupt") == 130
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["interrupted"] == (
        "KeyboardInterrupt"
    )
