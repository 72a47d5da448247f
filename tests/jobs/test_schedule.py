"""tierlog.jobs.schedule: config validation, the due rule, state, the lock, run-due."""

from __future__ import annotations

import io
import json
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from tests.jobs.conftest import CALL_TIMEOUT, DATA, TIERLOG, report, stream_text, tierlog
from tierlog.jobs import cron, job_state, schedule, schedule_config
from tierlog.jobs.runner import NotebookRun

REPO = Path(__file__).resolve().parents[2]


def write_config(directory: Path, jobs: str, scheduler: str = "") -> Path:
    """A pipelines.toml whose dirs are under ``directory`` and notebooks are the fixtures."""
    path = directory / "pipelines.toml"
    path.write_text(
        "[scheduler]\n"
        f"runs_dir = {json.dumps(str(directory / 'runs'))}\n"
        f"state_dir = {json.dumps(str(directory / 'state'))}\n"
        f"notebooks_dir = {json.dumps(str(DATA))}\n"
        f"{scheduler}\n{jobs}"
    )
    return path


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@dataclass
class FakeRunner:
    """Stands in for papermill: records calls, fails or raises for chosen jobs."""

    fail: set[str] = field(default_factory=set)
    explode: set[str] = field(default_factory=set)
    calls: list[str] = field(default_factory=list)
    during: list[job_state.JobState] = field(default_factory=list)

    def __call__(
        self, job: schedule_config.Job, config: schedule_config.SchedulerConfig
    ) -> NotebookRun:
        self.calls.append(job.name)
        self.during.append(job_state.read_state(job_state.state_path(config, job.name), job.name))
        if job.name in self.explode:
            raise FileNotFoundError(f"no notebook {job.notebook!r}")
        output = config.runs_dir / f"{job.name}-{len(self.calls)}.ipynb"
        return NotebookRun(
            name=job.notebook,
            notebook=config.notebooks_dir / f"{job.notebook}.ipynb",
            output=output,
            parameters=job.parameters,
            started=datetime.now(UTC),
            duration_s=0.01,
            ok=job.name not in self.fail,
            error="In [2] raised ValueError: bad" if job.name in self.fail else None,
        )


class Scheduler:
    """``run_due`` on one config with a fake runner, capturing what it prints."""

    def __init__(self, config_path: Path, runner: FakeRunner | None = None) -> None:
        self.config = schedule_config.load_config(config_path)
        self.runner = runner or FakeRunner()
        self.out = ""
        self.err = ""

    def run_due(self, now: str) -> int:
        out, err = io.StringIO(), io.StringIO()
        # Runs start and end "at" now, so that what list shows is predictable.
        code = schedule.run_due(
            self.config, at(now), out, err, run=self.runner, clock=lambda: at(now)
        )
        self.out, self.err = out.getvalue(), err.getvalue()
        return code

    def ran(self, now: str) -> list[str]:
        """The jobs one ``run_due`` at ``now`` ran (it must succeed)."""
        before = len(self.runner.calls)
        assert self.run_due(now) == 0, self.err
        return self.runner.calls[before:]

    def state(self, job: str) -> job_state.JobState:
        return job_state.read_state(job_state.state_path(self.config, job), job)


# --- the shipped example --------------------------------------------------------------------


def test_the_example_config_schedules_the_notebooks() -> None:
    config = schedule_config.load_config(REPO / "configs" / "pipelines.toml")
    jobs = {job.notebook: job for job in config.jobs}
    assert set(jobs) == {
        "ingest_to_delta",
        "explore_events",
        "replay_from_object_storage",
        "cluster_health",
    }
    assert config.timezone == ZoneInfo("UTC")
    assert all(job.enabled for job in config.jobs)

    ingest = jobs["ingest_to_delta"]
    # No parameters: the notebooks' defaults are the demo's (test_shipped_schedule runs them).
    assert all(not job.parameters for job in config.jobs)
    assert ingest.schedule.minutes == (0, 15, 30, 45) and ingest.schedule.hours == tuple(range(24))

    explore = jobs["explore_events"]
    start = datetime(2024, 5, 1, tzinfo=UTC)
    assert len(list(explore.schedule.fire_times(start, start + timedelta(days=7)))) == 7

    replay = jobs["replay_from_object_storage"]
    assert len(list(replay.schedule.fire_times(start, start + timedelta(days=28)))) == 4


# --- bad configs ------------------------------------------------------------------------------

GOOD_JOB = 'name = "j"\nnotebook = "report"\ncron = "* * * * *"\n'


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (f"[[job]]\n{GOOD_JOB}crn = '* * * * *'\n", "job 'j': unknown key 'crn' (known: cron, "),
        ("[scheduler]\nrun_dir = 'x'\n", "[scheduler]: unknown key 'run_dir'"),
        ("[schedulr]\n", "top level: unknown key 'schedulr'"),
        ("[[job]]\nname = 'j'\nnotebook = 'report'\n", "job 'j': missing key 'cron'"),
        ("[[job]]\nnotebook = 'report'\ncron = '@daily'\n", "job #1: missing key 'name'"),
        (
            "[[job]]\nname = 'j'\nnotebook = 'report'\ncron = '61 * * * *'\n",
            "job 'j': cron '61 * * * *': minute field: 61 is out of range 0-59",
        ),
        ("[[job]]\nname = 'j'\nnotebook = 3\ncron = '@daily'\n", "job 'j': notebook: must be a"),
        (f"[[job]]\n{GOOD_JOB}\n[[job]]\n{GOOD_JOB}", "job 'j': name: another job has this name"),
        (
            "[[job]]\nname = '../etc'\nnotebook = 'report'\ncron = '@daily'\n",
            "job '../etc': name: '../etc' must be letters, digits",
        ),
        (f"[[job]]\n{GOOD_JOB}timeout_s = 'ten'\n", "job 'j': timeout_s: must be a positive"),
        (f"[[job]]\n{GOOD_JOB}timeout_s = -1\n", "job 'j': timeout_s: must be a positive"),
        (f"[[job]]\n{GOOD_JOB}timeout_s = true\n", "job 'j': timeout_s: must be a positive"),
        (f"[[job]]\n{GOOD_JOB}enabled = 'no'\n", "job 'j': enabled: must be true or false"),
        (f"[[job]]\n{GOOD_JOB}parameters = 5\n", "job 'j': parameters: must be a table"),
        (
            f"[[job]]\n{GOOD_JOB}[job.parameters]\nsince = 2024-05-01\n",
            "job 'j': parameters.since: TOML dates and times cannot be passed",
        ),
        (
            f"[[job]]\n{GOOD_JOB}[job.parameters]\nwindow = {{ start = 09:00:00 }}\n",
            "job 'j': parameters.window.start: TOML dates",
        ),
        ("[scheduler]\ntimezone = 'Mars/Olympus'\n", "[scheduler] timezone: 'Mars/Olympus' is"),
        ("[scheduler]\nruns_dir = 5\n", "[scheduler] runs_dir: must be a non-empty string"),
        ("scheduler = 1\n", "scheduler: must be a table"),
        ("job = 'x'\n", "job: must be an array of tables"),
        ("[[job]]\nname = \n", "Invalid value (at line 2"),
    ],
)
def test_a_bad_config_names_the_job_and_the_key(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "pipelines.toml"
    path.write_text(text)
    with pytest.raises(schedule_config.ConfigError) as caught:
        schedule_config.load_config(path)
    assert str(caught.value).startswith(f"{path}: ")
    assert message in str(caught.value)


def test_relative_dirs_and_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TIERLOG_RUNS_DIR", raising=False)
    monkeypatch.setenv("TIERLOG_NOTEBOOKS_DIR", "/srv/notebooks")
    path = tmp_path / "p.toml"
    path.write_text(f"[[job]]\n{GOOD_JOB}")
    config = schedule_config.load_config(path)
    assert (config.runs_dir, config.state_dir) == (Path("runs"), Path("runs/.scheduler"))
    assert config.notebooks_dir == Path("/srv/notebooks")
    assert config.timezone == ZoneInfo("UTC")
    assert config.jobs[0].parameters == {} and config.jobs[0].timeout_s is None


def test_now_is_iso_8601_and_naive_means_the_scheduler_zone() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    assert schedule.parse_now("2024-05-01T12:00", berlin) == datetime(2024, 5, 1, 12, tzinfo=berlin)
    assert schedule.parse_now("2024-05-01T12:00Z", berlin) == at("2024-05-01T12:00")
    with pytest.raises(ValueError, match="--now: 'noon' is not an ISO 8601"):
        schedule.parse_now("noon", berlin)


# --- the due rule (no I/O) ----------------------------------------------------------------


def test_first_sight_runs_only_a_schedule_matching_this_minute() -> None:
    every_15 = cron.parse("*/15 * * * *")
    monthly = cron.parse("@monthly")
    assert schedule.due(every_15, None, at("2024-05-01T12:00:40"), UTC) == schedule.Due(
        at("2024-05-01T12:00"), coalesced=False
    )
    assert schedule.due(every_15, None, at("2024-05-01T12:01:30"), UTC) is None
    # A monthly job is not due just because the 1st has passed.
    assert schedule.due(monthly, None, at("2024-05-20T00:00"), UTC) is None
    assert schedule.due(monthly, None, at("2024-06-01T00:00:05"), UTC) is not None


def test_missed_fire_times_coalesce() -> None:
    every_15 = cron.parse("*/15 * * * *")
    found = schedule.due(every_15, at("2024-05-01T12:00:10"), at("2024-05-01T13:05"), UTC)
    assert found == schedule.Due(at("2024-05-01T12:15"), coalesced=True)
    found = schedule.due(every_15, at("2024-05-01T12:00:10"), at("2024-05-01T12:20"), UTC)
    assert found == schedule.Due(at("2024-05-01T12:15"), coalesced=False)
    assert schedule.due(every_15, at("2024-05-01T12:00:10"), at("2024-05-01T12:14"), UTC) is None


def test_cron_fields_are_read_in_the_scheduler_zone() -> None:
    nine = cron.parse("0 9 * * *")
    berlin = ZoneInfo("Europe/Berlin")  # UTC+2 in May
    found = schedule.due(nine, None, at("2024-05-01T07:00:20"), berlin)
    assert found is not None and found.fire_time == datetime(2024, 5, 1, 9, tzinfo=berlin)
    assert schedule.due(nine, None, at("2024-05-01T09:00:20"), berlin) is None


# --- run-due with a stand-in runner ------------------------------------------------------


JOBS = """
[[job]]
name = "every-15"
notebook = "report"
cron = "*/15 * * * *"
[job.parameters]
greeting = "hi"

[[job]]
name = "monthly"
notebook = "report"
cron = "@monthly"

[[job]]
name = "hourly"
notebook = "report"
cron = "@hourly"
"""


def test_run_due_runs_what_is_due_coalesces_and_remembers(tmp_path: Path) -> None:
    s = Scheduler(write_config(tmp_path, JOBS))
    assert s.ran("2024-05-01T12:00:30") == ["every-15", "hourly"]  # monthly: first sight
    assert "job every-15: due at 2024-05-01T12:00:00+00:00; running notebook report" in s.out
    assert "job every-15: ok in 0.0 s -> " in s.out
    assert s.ran("2024-05-01T12:00:30") == []  # the same time again: nothing new
    assert s.ran("2024-05-01T12:10:00") == []
    assert s.ran("2024-05-01T13:20:00") == ["every-15", "hourly"]
    assert "job every-15: due at 2024-05-01T12:15:00+00:00 (missed fire times coalesced" in s.out
    assert "job hourly: due at 2024-05-01T13:00:00+00:00; running" in s.out
    assert s.ran("2024-05-01T13:10:00") == []  # going back in time never reruns
    assert s.ran("2024-06-01T00:00:05") == ["every-15", "monthly", "hourly"]

    state = s.state("every-15")
    assert state.last_checked == at("2024-06-01T00:00:05")
    run = state.last_run
    assert run is not None and run.ok is True and run.error is None
    assert run.fire_time == at("2024-05-01T13:30")  # the first of the coalesced ones
    assert run.output == str(tmp_path / "runs" / "every-15-5.ipynb")
    assert run.finished is not None and run.started <= run.finished
    saved = json.loads((tmp_path / "state" / "every-15.json").read_text())
    assert saved["last_checked"] == "2024-06-01T00:00:05+00:00"
    assert saved["last_run"]["ok"] is True


def test_a_run_is_recorded_as_started_before_the_notebook_runs(tmp_path: Path) -> None:
    s = Scheduler(write_config(tmp_path, JOBS))
    s.ran("2024-05-01T12:00:30")
    during = s.runner.during[0]
    assert during.last_checked == at("2024-05-01T12:00:30")
    assert during.last_run is not None and during.last_run.finished is None
    assert during.last_run.fire_time == at("2024-05-01T12:00")


def test_failures_do_not_stop_the_others_and_exit_1(tmp_path: Path) -> None:
    runner = FakeRunner(fail={"every-15"}, explode={"monthly"})
    s = Scheduler(write_config(tmp_path, JOBS), runner)
    assert s.run_due("2024-06-01T00:00:30") == 1
    assert runner.calls == ["every-15", "monthly", "hourly"]
    assert "job every-15: FAILED: In [2] raised ValueError: bad; output kept at " in s.err
    assert "job monthly: FAILED: FileNotFoundError: no notebook 'report'" in s.err
    assert "job hourly: ok" in s.out
    failed = s.state("every-15").last_run
    assert failed is not None and failed.ok is False and failed.output is not None
    exploded = s.state("monthly").last_run
    assert exploded is not None and exploded.ok is False and exploded.output is None
    assert s.ran("2024-06-01T00:01:00") == []  # failed runs are not retried


def test_a_disabled_job_keeps_its_clock_so_enabling_it_does_not_replay(tmp_path: Path) -> None:
    disabled = JOBS.replace('cron = "@hourly"', 'cron = "@hourly"\nenabled = false')
    s = Scheduler(write_config(tmp_path, disabled))
    assert s.ran("2024-05-01T12:00:30") == ["every-15"]
    assert s.state("hourly").last_checked == at("2024-05-01T12:00:30")
    s.config = schedule_config.load_config(write_config(tmp_path, JOBS))
    assert s.ran("2024-05-01T12:05:00") == []
    assert s.ran("2024-05-01T13:00:10") == ["every-15", "hourly"]


def test_a_job_whose_lock_is_held_is_skipped_and_keeps_its_state(tmp_path: Path) -> None:
    s = Scheduler(write_config(tmp_path, JOBS))
    lock = job_state.JobLock(tmp_path / "state" / "hourly.lock")
    assert lock.acquire()
    try:
        assert not job_state.JobLock(lock.path).acquire()  # flock: per open file, not process
        assert s.ran("2024-05-01T12:00:30") == ["every-15"]
        assert (
            f"job hourly: skipped, another scheduler is running it (pid {os.getpid()} holds "
            f"{lock.path})"
        ) in s.out
        assert not job_state.state_path(s.config, "hourly").exists()
    finally:
        lock.release()
    assert s.ran("2024-05-01T12:00:40") == ["hourly"]


def test_an_unreadable_state_file_fails_that_job_only(tmp_path: Path) -> None:
    s = Scheduler(write_config(tmp_path, JOBS))
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "hourly.json").write_text("{not json")
    message = f"{tmp_path / 'state' / 'hourly.json'}: not a scheduler state file"
    with pytest.raises(ValueError, match=message):
        job_state.read_state(tmp_path / "state" / "hourly.json", "hourly")
    assert s.run_due("2024-05-01T12:00:30") == 1
    assert s.runner.calls == ["every-15"]
    assert f"job hourly: FAILED: {message}" in s.err


def test_list_shows_schedule_next_fire_and_last_result(tmp_path: Path) -> None:
    jobs = JOBS.replace('cron = "@monthly"', 'cron = "@monthly"\nenabled = false')
    s = Scheduler(write_config(tmp_path, jobs), FakeRunner(fail={"hourly"}))
    s.run_due("2024-05-01T12:00:30")
    out = io.StringIO()
    assert schedule.list_jobs(s.config, at("2024-05-01T12:05"), out) == 0
    lines = out.getvalue().splitlines()
    assert lines[0].split() == ["JOB", "CRON", "NOTEBOOK", "NEXT", "(UTC)", "LAST", "RUN"]
    assert lines[1].split()[:8] == [
        "every-15",
        "*/15",
        "*",
        "*",
        "*",
        "*",
        "report",
        "2024-05-01",
    ]
    assert "12:15  ok 2024-05-01 12:00 -> " in lines[1]
    assert "disabled" in lines[2] and lines[2].endswith("never")
    assert "13:00  FAILED 2024-05-01 12:00: In [2] raised ValueError: bad" in lines[3]


# --- real processes, real notebooks -----------------------------------------------------


def _wait_for(path: Path, process: subprocess.Popen[str], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if process.poll() is not None:
            raise AssertionError(f"the scheduler exited first: {process.communicate()}")
        assert time.monotonic() < deadline, f"{path} did not appear"
        time.sleep(0.05)


@pytest.fixture
def released(tmp_path: Path) -> Iterator[Path]:
    """The file whose existence ends ``wait_for_release``; created at teardown regardless,
    so that a failing test never leaves a kernel waiting out its limit."""
    path = tmp_path / "release"
    yield path
    path.touch()


def test_two_schedulers_never_run_one_job_at_once(tmp_path: Path, released: Path) -> None:
    started = tmp_path / "started"
    config = write_config(
        tmp_path,
        f"""
[[job]]
name = "slow"
notebook = "wait_for_release"
cron = "*/5 * * * *"
[job.parameters]
started_path = {json.dumps(str(started))}
release_path = {json.dumps(str(released))}
limit_s = 60
""",
    )
    first = subprocess.Popen(
        [str(TIERLOG), "schedule", "run-due", "--config", str(config), "--now", "2024-05-01T12:00"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(started, first)
        # The second scheduler, a minute later: the job is due again but its lock is held.
        second = tierlog(
            "schedule",
            "run-due",
            "--config",
            str(config),
            "--now",
            "2024-05-01T12:05",
            cwd=tmp_path,
        )
        assert second.returncode == 0, second.stderr
        assert f"job slow: skipped, another scheduler is running it (pid {first.pid} " in (
            second.stdout
        )
        state = json.loads((tmp_path / "state" / "slow.json").read_text())
        assert state["last_checked"] == "2024-05-01T12:00:00+00:00"  # not advanced by it
        assert state["last_run"]["finished"] is None
    finally:
        released.touch()
        out, err = first.communicate(timeout=CALL_TIMEOUT)
    assert first.returncode == 0, err
    assert "job slow: ok in " in out
    outputs = list((tmp_path / "runs").glob("slow-*.ipynb"))
    assert len(outputs) == 1 and "released" in stream_text(outputs[0])
    # The next scheduler picks up the fire time the skipped one could not run.
    third = tierlog(
        "schedule", "list", "--config", str(config), "--now", "2024-05-01T12:06", cwd=tmp_path
    )
    assert "12:10  ok " in third.stdout, third.stdout


def test_cli_run_due_end_to_end(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        """
[[job]]
name = "greet"
notebook = "report"
cron = "0 9 * * mon-fri"
[job.parameters]
greeting = "scheduled"
count = 5

[[job]]
name = "broken"
notebook = "fails"
cron = "@daily"
timeout_s = 30
[job.parameters]
message = "scheduled failure"
""",
        scheduler='timezone = "Europe/Berlin"',
    )
    # 2024-05-06 was a Monday; 00:00 and 09:00 Berlin, given as wall time in that zone.
    args = ("schedule", "run-due", "--config", str(config))
    quiet = tierlog(*args, "--now", "2024-05-06T08:30", cwd=tmp_path)
    assert (quiet.returncode, quiet.stderr) == (0, "")
    assert quiet.stdout.splitlines() == [  # nothing ran, and it says when each will
        "job greet: not due, first run at 2024-05-06T09:00:00+02:00",
        "job broken: not due, first run at 2024-05-07T00:00:00+02:00",
        "run-due at 2024-05-06T08:30:00+02:00: 0 ran ok, 0 failed, 2 not due, 0 skipped",
    ]
    result = tierlog(*args, "--now", "2024-05-06T09:00:30", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "job greet: due at 2024-05-06T09:00:00+02:00; running notebook report" in result.stdout
    assert "job greet: ok in " in result.stdout
    # 00:00 was before its first sight.
    assert "job broken: not due, next at 2024-05-07T00:00:00+02:00" in result.stdout
    assert "broken" not in result.stderr
    greet_output = next((tmp_path / "runs").glob("greet-*.ipynb"))
    assert report(greet_output)["greeting"] == "scheduled"
    assert report(greet_output)["count"] == 5
    assert report(greet_output)["cwd"] == str(tmp_path.resolve())
    # The run's HTML copy is beside it, and the report says where.
    html = greet_output.with_suffix(".html")
    assert html.is_file() and "scheduled" in html.read_text()
    assert f"-> runs/{greet_output.name} (HTML runs/{html.name})" in result.stdout

    failing = tierlog(*args, "--now", "2024-05-07T00:00:30", cwd=tmp_path)
    assert failing.returncode == 1
    assert "job broken: due at 2024-05-07T00:00:00+02:00; running notebook fails" in (
        failing.stdout
    )
    assert "job greet: not due, next at 2024-05-07T09:00:00+02:00" in failing.stdout  # ran once
    assert "0 ran ok, 1 failed, 1 not due, 0 skipped" in failing.stdout
    assert (
        "job broken: FAILED: In [4] raised RuntimeError: scheduled failure; output kept at "
        "runs/broken-"
    ) in failing.stderr
    assert len(list((tmp_path / "runs").glob("broken-*.ipynb"))) == 1
    assert len(list((tmp_path / "runs").glob("broken-*.html"))) == 1
    assert "(HTML runs/broken-" in failing.stderr

    listing = tierlog("schedule", "list", "--config", str(config), cwd=tmp_path)
    assert listing.returncode == 0, listing.stderr
    assert "NEXT (Europe/Berlin)" in listing.stdout
    rows = {line.split()[0]: line for line in listing.stdout.splitlines()[1:]}
    assert "  ok " in rows["greet"] and str(greet_output.name) in rows["greet"]
    assert "  FAILED " in rows["broken"] and "scheduled failure" in rows["broken"]

    bad = write_config(tmp_path, '[[job]]\nname = "x"\nnotebook = "report"\ncron = "@often"\n')
    rejected = tierlog("schedule", "run-due", "--config", str(bad), cwd=tmp_path)
    assert rejected.returncode == 2
    assert rejected.stderr.startswith(f"tierlog: {bad}: job 'x': cron '@often': unknown macro")


def test_a_trial_in_the_future_does_not_freeze_the_schedule(tmp_path: Path) -> None:
    """Issue 25 item 7: `run-due --now` a month ahead made every later real check say
    "skipped, already checked up to" that time."""
    s = Scheduler(write_config(tmp_path, JOBS))
    assert s.ran("2024-05-01T12:00:30") == ["every-15", "hourly"]  # the real clock
    out, err = io.StringIO(), io.StringIO()
    real = at("2024-05-01T12:05")
    code = schedule.run_due(
        s.config,
        at("2024-06-01T00:00:05"),
        out,
        err,
        run=s.runner,
        clock=lambda: real,
        trial=True,
    )
    assert code == 0, err.getvalue()
    assert s.runner.calls[2:] == ["every-15", "monthly", "hourly"]  # due by then
    assert (
        "(--now is in the future: each job's last check was stored as the real time, "
        "2024-05-01T12:05:00+00:00, so the real schedule goes on as before)"
    ) in out.getvalue()
    assert s.state("every-15").last_checked == real
    assert s.state("monthly").last_checked == real
    # The real scheduler, ten minutes on: the schedule goes on.
    assert s.ran("2024-05-01T12:15:30") == ["every-15"]
    assert "already checked" not in s.out


def test_a_last_check_stored_in_the_future_is_named_and_reset(tmp_path: Path) -> None:
    s = Scheduler(write_config(tmp_path, JOBS))
    # What an older tierlog left after `run-due --now 2030-01-01T00:00`.
    for job in ("every-15", "monthly", "hourly"):
        job_state.write_state(
            job_state.state_path(s.config, job),
            job_state.JobState(job, last_checked=at("2030-01-01T00:00")),
        )
    out, err = io.StringIO(), io.StringIO()
    now = at("2024-05-01T12:00:30")
    schedule.run_due(s.config, now, out, err, run=s.runner, clock=lambda: now)
    assert s.runner.calls == []
    assert (
        "job hourly: skipped, already checked up to 2030-01-01T00:00:00+00:00 (in the future: "
        "stored by a --now of an older tierlog? `tierlog schedule reset --job hourly` forgets it)"
    ) in out.getvalue()

    out = io.StringIO()
    assert schedule.reset(s.config, ["hourly"], out) == 0
    assert "job hourly: last check 2030-01-01T00:00:00+00:00 forgotten" in out.getvalue()
    assert s.state("hourly").last_checked is None
    assert s.state("every-15").last_checked == at("2030-01-01T00:00")  # only the one named
    assert s.ran("2024-05-01T12:00:30") == ["hourly"]
    with pytest.raises(schedule_config.ConfigError, match="no job 'nope'"):
        schedule.reset(s.config, ["nope"], io.StringIO())
    assert schedule.reset(s.config, [], out) == 0  # all
    assert s.state("every-15").last_checked is None


def test_cli_schedule_reset(tmp_path: Path) -> None:
    config = write_config(tmp_path, JOBS)
    job_state.write_state(
        tmp_path / "state" / "hourly.json",
        job_state.JobState("hourly", last_checked=at("2030-01-01T00:00")),
    )
    result = tierlog("schedule", "reset", "--config", str(config), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "job hourly: last check 2030-01-01T00:00:00+00:00 forgotten" in result.stdout
    assert "job every-15: never checked, nothing to reset" in result.stdout
    bad = tierlog("schedule", "reset", "--config", str(config), "--job", "nope", cwd=tmp_path)
    assert bad.returncode == 2 and "no job 'nope'" in bad.stderr
