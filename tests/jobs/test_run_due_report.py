"""``tierlog schedule run-due`` says, for every job, what it ran, what it skipped and why,
and ends with the counts: an invocation that runs nothing is not silent."""

from __future__ import annotations

from pathlib import Path

from tests.cli import TIERLOG, run
from tests.jobs.test_schedule import write_config

JOBS = """
[[job]]
name = "nightly"
notebook = "report"
cron = "0 3 * * *"

[[job]]
name = "paused"
notebook = "report"
cron = "* * * * *"
enabled = false
"""


def run_due(config: Path, now: str) -> list[str]:
    result = run(TIERLOG, "schedule", "run-due", "--config", str(config), "--now", now)
    assert (result.returncode, result.stderr) == (0, ""), result.stderr
    assert "Traceback" not in result.stdout
    return result.stdout.splitlines()


def test_run_due_says_what_it_skipped_and_why(tmp_path: Path) -> None:
    config = write_config(tmp_path, JOBS)
    assert run_due(config, "2024-05-01T12:00:30") == [
        "job nightly: not due, first run at 2024-05-02T03:00:00+00:00",
        "job paused: skipped, disabled (enabled = false)",
        "run-due at 2024-05-01T12:00:30+00:00: 0 ran ok, 0 failed, 1 not due, 1 skipped",
    ]
    # An earlier time than the last check (a clock step back, a stale --now) runs nothing.
    assert run_due(config, "2024-05-01T11:00:00")[0] == (
        "job nightly: skipped, already checked up to 2024-05-01T12:00:30+00:00"
    )
