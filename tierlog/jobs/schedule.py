"""Scheduled notebook runs: which jobs are due, running them, ``reset`` and ``list``. The
file is parsed in ``schedule_config``, each job's state and lock live in ``job_state``; the
rules of all three are here.

``tierlog schedule run-due`` is meant to be run by cron every minute
(``* * * * * cd /srv/tierlog && .venv/bin/tierlog schedule run-due``); each invocation
runs the jobs that are due once, one after another, and exits.

**Due rule.** A job is due when one of its cron fire times lies in ``(last_checked, now]``;
``last_checked`` is the ``now`` of the previous invocation that held the job's lock. Fire
times missed while no scheduler ran (or while the job's previous run was still going)
coalesce into one run. A job seen for the first time starts from ``now - 60 s``: it runs
if its schedule matches the current minute, not because some past fire time exists (a new
monthly job waits for the 1st). Disabled jobs advance ``last_checked`` without running, so
enabling one does not replay what it skipped. Runs are at most once per fire time: the
state records the start before the notebook runs, so a scheduler killed mid-run does not
rerun the job on the next invocation.

**Trials.** ``run-due --now TIME`` (trying a schedule) runs what is due in
``(last_checked, TIME]`` as any check does, but never stores a ``last_checked`` later than
the real clock: a trial in the future used to freeze the real schedule until that time came
("skipped, already checked up to ..."). It says so when it stores the clock's time instead
of TIME. ``tierlog schedule reset`` forgets a ``last_checked`` that is wrong, e.g. one an
older tierlog stored for a ``--now`` in the future; the next check then counts as a first
sight.

**Lock.** ``<state dir>/<job>.lock`` is held with ``flock(LOCK_EX | LOCK_NB)`` from the due
check to the end of the run. A scheduler that finds it held skips the job (and leaves its
state alone); the kernel does not inherit the descriptor, and the kernel releases it when
the scheduler dies, so a crash never leaves a stale lock. flock, not ``lockf``: POSIX
record locks vanish when *any* descriptor of the file in the process is closed.

**State.** ``<state dir>/<job>.json``, one file per job so that schedulers holding
different jobs' locks never write the same file; replaced atomically::

    {"job": "ingest", "last_checked": "2024-05-01T12:15:00.318+00:00",
     "last_run": {"fire_time": "2024-05-01T12:15:00+00:00",
                  "started": "...", "finished": "..." | null, "ok": true | false | null,
                  "output": "/abs/runs/ingest-20240501T121500Z.ipynb" | null,
                  "error": "In [4] raised KeyError: 'x'" | null}}

Times are ISO 8601 in UTC. Relative paths in ``pipelines.toml`` are relative to the
working directory, as ``log.dirs`` in ``server.properties`` is.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TextIO

from tierlog.jobs import cron
from tierlog.jobs.job_state import (
    JobLock,
    RunRecord,
    read_state,
    state_path,
    write_state,
)
from tierlog.jobs.runner import NotebookRun, display_path
from tierlog.jobs.schedule_config import (
    ConfigError,
    Job,
    SchedulerConfig,
)

# How far back a job never checked before looks: one minute, so that the current minute
# counts (cron's own granularity) and nothing older does.
FIRST_SIGHT_LOOKBACK = dt.timedelta(seconds=60)


def parse_now(text: str, zone: dt.tzinfo) -> dt.datetime:
    """``--now``: ISO 8601; without an offset it is wall time in the scheduler's zone."""
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"--now: {text!r} is not an ISO 8601 date and time") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=zone)


# --- due computation (no I/O) ---------------------------------------------------------


@dataclass(frozen=True)
class Due:
    fire_time: dt.datetime  # the first fire time in the window
    coalesced: bool  # more fire times were missed and are covered by this one run


def due(
    schedule: cron.CronSchedule,
    last_checked: dt.datetime | None,
    now: dt.datetime,
    zone: dt.tzinfo,
) -> Due | None:
    """Whether a fire time lies in ``(last_checked, now]`` (``now - 60 s`` on first sight)."""
    # In UTC: arithmetic on zoned datetimes is wall-clock arithmetic, off by an hour at DST.
    start = (
        last_checked if last_checked is not None else now.astimezone(dt.UTC) - FIRST_SIGHT_LOOKBACK
    )
    fires = schedule.fire_times(start.astimezone(zone), now.astimezone(zone))
    first = next(fires, None)
    if first is None:
        return None
    return Due(first, coalesced=next(fires, None) is not None)


# --- run-due and list -------------------------------------------------------------------

RunJob = Callable[[Job, SchedulerConfig], NotebookRun]


def run_job(job: Job, config: SchedulerConfig) -> NotebookRun:
    """Run a job's notebook; its output is ``<runs dir>/<job name>-<UTC time>.ipynb``."""
    from tierlog.jobs.runner import run_notebook

    return run_notebook(
        job.notebook,
        job.parameters,
        notebooks_dir=config.notebooks_dir,
        runs_dir=config.runs_dir,
        label=job.name,
        timeout_s=job.timeout_s,
    )


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def run_due(
    config: SchedulerConfig,
    now: dt.datetime,
    out: TextIO,
    err: TextIO,
    *,
    run: RunJob = run_job,
    clock: Callable[[], dt.datetime] = _utc_now,
    trial: bool = False,
) -> int:
    """Run every due job once, in file order; keep going after a failure.

    Args:
        now: the time the due check uses (aware); ``clock`` stamps run start and end.
        trial: ``now`` was given (``--now``), not read from the clock: a ``last_checked``
            stored for it is never later than ``clock()`` (module docstring).

    Returns:
        1 if a due job failed, else 0 (jobs skipped for a held lock are not failures).
    """
    # Every job gets a line, run or not, and the last line counts them: cron mails (or the
    # log keeps) what the scheduler did, and an invocation that ran nothing says why.
    outcomes: dict[str, int] = {}
    for job in config.jobs:
        lock = JobLock(config.state_dir / f"{job.name}.lock")
        if not lock.acquire():
            print(
                f"job {job.name}: skipped, another scheduler is running it "
                f"(pid {lock.holder()} holds {lock.path})",
                file=out,
            )
            outcome = SKIPPED
        else:
            try:
                outcome = _check_and_run(config, job, now, out, err, run, clock, trial)
            finally:
                lock.release()
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    counts = ", ".join(f"{outcomes.get(o, 0)} {o}" for o in (RAN_OK, FAILED, NOT_DUE, SKIPPED))
    print(f"run-due at {now.astimezone(config.timezone).isoformat()}: {counts}", file=out)
    real = clock()
    if trial and now > real:
        print(
            f"(--now is in the future: each job's last check was stored as the real time, "
            f"{real.astimezone(config.timezone).isoformat(timespec='seconds')}, so the real "
            "schedule goes on as before)",
            file=out,
        )
    return 1 if outcomes.get(FAILED) else 0


# What became of one job in one run-due, as its summary line counts it.
RAN_OK, FAILED, NOT_DUE, SKIPPED = "ran ok", "failed", "not due", "skipped"


def _check_and_run(
    config: SchedulerConfig,
    job: Job,
    now: dt.datetime,
    out: TextIO,
    err: TextIO,
    run: RunJob,
    clock: Callable[[], dt.datetime],
    trial: bool = False,
) -> str:
    """With the job's lock held: run it if due, say what became of it and return that
    (RAN_OK, FAILED, NOT_DUE or SKIPPED). A ``trial`` stores no ``last_checked`` past the
    real clock."""
    path = state_path(config, job.name)
    try:
        state = read_state(path, job.name)
    except ValueError as exc:
        print(f"job {job.name}: FAILED: {exc}", file=err)
        return FAILED
    zone = config.timezone
    checked = min(now, clock()) if trial else now
    if state.last_checked is not None:
        checked = max(checked, state.last_checked)  # never move back
    if state.last_checked is not None and now <= state.last_checked:
        # A later scheduler (or --now) has looked already; never move back.
        ahead = state.last_checked > clock() + FIRST_SIGHT_LOOKBACK
        print(
            f"job {job.name}: skipped, already checked up to "
            f"{state.last_checked.astimezone(zone).isoformat()}"
            + (
                " (in the future: stored by a --now of an older tierlog? "
                f"`tierlog schedule reset --job {job.name}` forgets it)"
                if ahead
                else ""
            ),
            file=out,
        )
        return SKIPPED
    if not job.enabled:
        write_state(path, replace(state, last_checked=checked))
        print(f"job {job.name}: skipped, disabled (enabled = false)", file=out)
        return SKIPPED
    found = due(job.schedule, state.last_checked, now, zone)
    if found is None:
        write_state(path, replace(state, last_checked=checked))
        upcoming = job.schedule.next_after(now.astimezone(zone))
        # A job never checked before has never run: "first run", so that a first
        # run-due that runs nothing still says when each job will start.
        when = "first run" if state.last_checked is None and state.last_run is None else "next"
        print(f"job {job.name}: not due, {when} at {upcoming.isoformat()}", file=out)
        return NOT_DUE
    record = RunRecord(fire_time=found.fire_time, started=clock())
    write_state(path, replace(state, last_checked=checked, last_run=record))
    missed = " (missed fire times coalesced into this run)" if found.coalesced else ""
    print(
        f"job {job.name}: due at {found.fire_time.isoformat()}{missed}; "
        f"running notebook {job.notebook}",
        file=out,
        flush=True,
    )
    try:
        result = run(job, config)
    except Exception as exc:  # one job's failure must not stop the others
        record = replace(record, finished=clock(), ok=False, error=f"{type(exc).__name__}: {exc}")
    else:
        record = replace(
            record,
            finished=clock(),
            ok=result.ok,
            output=str(result.output),
            error=result.error,
        )
    write_state(path, replace(state, last_checked=checked, last_run=record))
    output = display_path(Path(record.output)) if record.output else None
    # The run's HTML copy (tierlog.jobs.report), for whoever reads this in cron's mail.
    html = f" (HTML {output.with_suffix('.html')})" if output and _has_html(output) else ""
    if record.ok:
        seconds = (record.finished - record.started).total_seconds() if record.finished else 0
        print(f"job {job.name}: ok in {seconds:.1f} s -> {output}{html}", file=out)
        return RAN_OK
    kept = f"; output kept at {output}{html}" if output else ""
    print(f"job {job.name}: FAILED: {record.error}{kept}", file=err)
    return FAILED


def _has_html(output: Path) -> bool:
    from tierlog.jobs.report import html_path

    return html_path(output).is_file()


def reset(config: SchedulerConfig, jobs: list[str], out: TextIO) -> int:
    """Forget the stored ``last_checked`` of ``jobs`` (every job when empty), each under its
    lock; the last run's record stays. The next ``run-due`` sees them for the first time.

    Raises:
        ConfigError: a job name that ``pipelines.toml`` does not have.
    """
    names = [job.name for job in config.jobs]
    unknown = [name for name in jobs if name not in names]
    if unknown:
        raise ConfigError(
            f"{config.path}: no job {', '.join(map(repr, unknown))} (jobs: {', '.join(names)})"
        )
    held = 0
    for name in jobs or names:
        lock = JobLock(config.state_dir / f"{name}.lock")
        if not lock.acquire():
            print(f"job {name}: left alone, a scheduler is running it", file=out)
            held += 1
            continue
        try:
            path = state_path(config, name)
            state = read_state(path, name)
            if state.last_checked is None:
                print(f"job {name}: never checked, nothing to reset", file=out)
                continue
            write_state(path, replace(state, last_checked=None))
            was = state.last_checked.astimezone(config.timezone).isoformat()
            print(f"job {name}: last check {was} forgotten", file=out)
        finally:
            lock.release()
    return 1 if held else 0


def list_jobs(config: SchedulerConfig, now: dt.datetime, out: TextIO) -> int:
    """Print each job's schedule, next fire time and last result (reads state; no lock)."""
    zone = config.timezone
    rows = [("JOB", "CRON", "NOTEBOOK", f"NEXT ({zone})", "LAST RUN")]
    for job in config.jobs:
        try:
            state = read_state(state_path(config, job.name), job.name)
            last = _describe_run(state.last_run, zone)
        except ValueError as exc:
            last = f"unreadable state: {exc}"
        next_fire = (
            f"{job.schedule.next_after(now.astimezone(zone)):%Y-%m-%d %H:%M}"
            if job.enabled
            else "disabled"
        )
        rows.append((job.name, job.schedule.expression, job.notebook, next_fire, last))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row[:4], widths, strict=True)]
        print("  ".join([*cells, row[4]]).rstrip(), file=out)
    return 0


def _describe_run(run: RunRecord | None, zone: dt.tzinfo) -> str:
    if run is None:
        return "never"
    started = f"{run.started.astimezone(zone):%Y-%m-%d %H:%M}"
    if run.finished is None:
        return f"started {started}, not finished (running, or its scheduler died)"
    if run.ok:
        return f"ok {started} -> {display_path(Path(run.output or '?'))}"
    return f"FAILED {started}: {run.error}"
