"""``pipelines.toml``: the scheduler's settings and its jobs, parsed and checked (a bad
file is one ``ConfigError`` naming the file, the job and the key). The format and the rules
of running them are in ``tierlog.jobs.schedule``."""

from __future__ import annotations

import datetime as dt
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from tierlog.jobs import cron
from tierlog.jobs.runner import notebooks_dir, runs_dir

DEFAULT_CONFIG = Path("configs/pipelines.toml")

_SCHEDULER_KEYS = {"runs_dir", "state_dir", "notebooks_dir", "timezone"}
_JOB_KEYS = {"name", "notebook", "cron", "parameters", "timeout_s", "enabled"}
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


class ConfigError(ValueError):
    """A bad ``pipelines.toml``; the message names the file, the job and the key."""


@dataclass(frozen=True)
class Job:
    name: str
    notebook: str
    schedule: cron.CronSchedule
    parameters: Mapping[str, Any]
    timeout_s: float | None = None
    enabled: bool = True


@dataclass(frozen=True)
class SchedulerConfig:
    path: Path
    runs_dir: Path
    state_dir: Path
    notebooks_dir: Path
    timezone: dt.tzinfo
    jobs: tuple[Job, ...]


def load_config(path: Path) -> SchedulerConfig:
    """Read and validate ``pipelines.toml``.

    Raises:
        FileNotFoundError: no such file.
        ConfigError: bad TOML, an unknown key or a bad value; the message names it.
    """
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    return parse_config(data, path)


def parse_config(data: Mapping[str, Any], path: Path) -> SchedulerConfig:
    """Validate parsed TOML (see ``configs/pipelines.toml`` for the keys)."""

    def fail(where: str, reason: str) -> ConfigError:
        return ConfigError(f"{path}: {where}: {reason}")

    _reject_unknown(data, {"scheduler", "job"}, "top level", fail)
    scheduler = data.get("scheduler", {})
    if not isinstance(scheduler, dict):
        raise fail("scheduler", "must be a table ([scheduler])")
    _reject_unknown(scheduler, _SCHEDULER_KEYS, "[scheduler]", fail)
    paths = {}
    for key in ("runs_dir", "state_dir", "notebooks_dir"):
        value = scheduler.get(key)
        if value is not None and (not isinstance(value, str) or not value):
            raise fail(f"[scheduler] {key}", f"must be a non-empty string, got {value!r}")
        paths[key] = value
    zone_name = scheduler.get("timezone", "UTC")
    try:
        if not isinstance(zone_name, str):
            raise ValueError
        zone = ZoneInfo(zone_name)
    except (ZoneInfoNotFoundError, ValueError):
        raise fail("[scheduler] timezone", f"{zone_name!r} is not an IANA zone name") from None
    runs = runs_dir(paths["runs_dir"])
    jobs_data = data.get("job", [])
    if not isinstance(jobs_data, list):
        raise fail("job", "must be an array of tables ([[job]])")
    jobs: list[Job] = []
    for number, job_data in enumerate(jobs_data, start=1):
        job = _parse_job(job_data, f"job #{number}", fail)
        if any(other.name == job.name for other in jobs):
            raise fail(f"job {job.name!r}: name", "another job has this name")
        jobs.append(job)
    return SchedulerConfig(
        path=path,
        runs_dir=runs,
        state_dir=Path(paths["state_dir"]) if paths["state_dir"] else runs / ".scheduler",
        notebooks_dir=notebooks_dir(paths["notebooks_dir"]),
        timezone=zone,
        jobs=tuple(jobs),
    )


_Fail = Callable[[str, str], ConfigError]


def _reject_unknown(table: Mapping[str, Any], known: set[str], where: str, fail: _Fail) -> None:
    for key in table:
        if key not in known:
            raise fail(where, f"unknown key {key!r} (known: {', '.join(sorted(known))})")


def _parse_job(data: Any, where: str, fail: _Fail) -> Job:
    if not isinstance(data, dict):
        raise fail(where, "must be a table")
    name = data.get("name")
    if isinstance(name, str) and name:
        where = f"job {name!r}"
    _reject_unknown(data, _JOB_KEYS, where, fail)
    for key in ("name", "notebook", "cron"):
        if key not in data:
            raise fail(where, f"missing key {key!r}")
        if not isinstance(data[key], str) or not data[key].strip():
            raise fail(f"{where}: {key}", f"must be a non-empty string, got {data[key]!r}")
    if not _SAFE_NAME.fullmatch(data["name"]):
        raise fail(
            f"{where}: name",
            f"{data['name']!r} must be letters, digits, '.', '_' or '-' (it names files)",
        )
    try:
        schedule = cron.parse(data["cron"])
    except ValueError as exc:
        raise fail(where, str(exc)) from None
    parameters = data.get("parameters", {})
    if not isinstance(parameters, dict):
        raise fail(f"{where}: parameters", "must be a table ([job.parameters])")
    for key, value in parameters.items():
        _check_parameter(value, f"{where}: parameters.{key}", fail)
    timeout_s = data.get("timeout_s")
    if timeout_s is not None and (
        isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float) or timeout_s <= 0
    ):
        raise fail(
            f"{where}: timeout_s", f"must be a positive number of seconds, got {timeout_s!r}"
        )
    enabled = data.get("enabled", True)
    if not isinstance(enabled, bool):
        raise fail(f"{where}: enabled", f"must be true or false, got {enabled!r}")
    return Job(
        name=data["name"],
        notebook=data["notebook"],
        schedule=schedule,
        parameters=parameters,
        timeout_s=timeout_s,
        enabled=enabled,
    )


def _check_parameter(value: Any, where: str, fail: _Fail) -> None:
    """Parameters become Python literals in the notebook; papermill writes dates as bare
    ``str()`` text, which is not valid Python, so they must be quoted in the TOML."""
    if isinstance(value, dt.date | dt.time):
        raise fail(where, "TOML dates and times cannot be passed to a notebook; quote them")
    if isinstance(value, list):
        for item in value:
            _check_parameter(item, where, fail)
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_parameter(item, f"{where}.{key}", fail)
