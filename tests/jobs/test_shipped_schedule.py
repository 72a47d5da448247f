"""The shipped ``configs/pipelines.toml`` works after ``make demo``: with the demo's data
served by ``tierlog demo serve``, every job of it, made due at once, runs its notebook to
the end, and ``schedule run-due`` says what it ran and, run again, why it ran nothing. The
jobs pass no parameters, so this runs the notebooks on their own defaults (issue 25 item 1:
they used to name a topic and a remote tier the demo does not make).

Real parts throughout: the demo, a broker process, papermill, Spark in local mode.
"""

from __future__ import annotations

import datetime as dt
import re
import subprocess
from pathlib import Path

import pytest

from tests.background import Background
from tests.demo_data import DEMO_EVENTS, REPO, clone_after_demo, demo_data, tierlog_env
from tierlog.jobs import job_state, schedule_config
from tierlog.jobs.summary import read_summary

# The demo (about a minute, shared with the README test) and three notebooks (a minute or
# less each on a small machine).
# A hang guard (2 min on an idle 2-core machine); `demo serve` binds 127.0.0.1:9092.
pytestmark = [pytest.mark.timeout(1500), pytest.mark.fixed_ports]

# Two minutes on an idle 2-core machine; a loaded CI run once passed 600 s here.
RUN_DUE_TIMEOUT_S = 900.0


def as_text(output: str | bytes | None) -> str:
    """A TimeoutExpired's output: bytes even when the run asked for text."""
    return output.decode(errors="replace") if isinstance(output, bytes) else output or ""


def run_due(clone: Path, now: dt.datetime) -> list[str]:
    """``tierlog schedule run-due`` in ``clone`` on the shipped config, as of ``now``."""
    try:
        result = subprocess.run(
            # --config left out: its default is configs/pipelines.toml, the shipped one.
            [".venv/bin/tierlog", "schedule", "run-due", "--now", now.isoformat()],
            cwd=clone,
            capture_output=True,
            text=True,
            timeout=RUN_DUE_TIMEOUT_S,
            env=tierlog_env(),
        )
    except subprocess.TimeoutExpired as timed_out:
        # What it said so far names the job it was on (a CI run once timed out here).
        said = "\n".join(as_text(part) for part in (timed_out.stdout, timed_out.stderr))
        pytest.fail(f"run-due took over {RUN_DUE_TIMEOUT_S:.0f} s; it said:\n{said[-4000:]}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr, result.stdout + result.stderr
    return result.stdout.splitlines()


def make_all_due(clone: Path, config: schedule_config.SchedulerConfig, now: dt.datetime) -> None:
    """Record a last check eight days before ``now`` for every job: each has fired since
    (the weekly one too)."""
    for job in config.jobs:
        path = clone / job_state.state_path(config, job.name)
        state = job_state.JobState(job.name, last_checked=now - dt.timedelta(days=8))
        job_state.write_state(path, state)


def test_the_shipped_schedule_runs_every_job_on_the_demo_data(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    clone = clone_after_demo(tmp_path / "clone", demo_data(tmp_path_factory))
    config = schedule_config.load_config(REPO / "configs" / "pipelines.toml")
    names = [job.name for job in config.jobs]
    assert names == [
        "ingest-activity",
        "explore-activity-daily",
        "replay-activity-weekly",
        "cluster-health-hourly",
    ]
    # Half past a minute: no cron fire time lies between this and a second later, when
    # run-due looks again (however long the first run took).
    now = dt.datetime.now(dt.UTC).replace(second=30, microsecond=0)
    make_all_due(clone, config, now)

    with Background(
        ".venv/bin/tierlog demo serve",
        clone,
        tierlog_env(),
        ready="started on port 9092",
        log=tmp_path / "serve.log",
    ) as serve:
        serve.wait_ready()
        lines = run_due(clone, now)

        outputs = {}
        for job in config.jobs:
            started = [line for line in lines if line.startswith(f"job {job.name}: due at ")]
            assert len(started) == 1, lines
            assert started[0].endswith(f"; running notebook {job.notebook}"), lines
            ended = [line for line in lines if line.startswith(f"job {job.name}: ok in ")]
            assert len(ended) == 1, lines
            output = re.search(r" -> (\S+\.ipynb)", ended[0])
            assert output, ended
            outputs[job.name] = clone / output[1]
        assert lines[-1].endswith(": 4 ran ok, 0 failed, 0 not due, 0 skipped"), lines

        ingested = read_summary(outputs["ingest-activity"])
        assert ingested["topic"] == "activity"
        assert ingested["rows_in_table"] == DEMO_EVENTS
        assert ingested["from_remote"] > 0 and ingested["silver_rows"] > 0
        assert (clone / "data" / "delta" / "activity" / "_delta_log").is_dir()
        explored = read_summary(outputs["explore-activity-daily"])
        assert explored["messages"] == DEMO_EVENTS
        replayed = read_summary(outputs["replay-activity-weekly"])
        # The replay reads object storage alone: the offloaded part of the stream.
        assert 0 < replayed["rows"] < DEMO_EVENTS
        assert (clone / "data" / "delta" / "activity_replay" / "_delta_log").is_dir()
        health = read_summary(outputs["cluster-health-hourly"])
        assert (health["brokers"], health["under_replicated"]) == ([0], 0)
        assert health["local_bytes"] > 0 and health["remote_bytes"] > 0  # the demo's tiers
        assert (clone / "data" / "cluster_health" / "history.csv").is_file()

        # At once again: nothing is due, and each job says when it next is.
        again = run_due(clone, now + dt.timedelta(seconds=1))
        assert [line.split(": not due, next at ")[0] for line in again[:-1]] == [
            f"job {name}" for name in names
        ], again
        assert again[-1].endswith(": 0 ran ok, 0 failed, 4 not due, 0 skipped"), again
        assert serve.interrupt() == 0, serve.output()[-2000:]  # Ctrl-C stops it cleanly
