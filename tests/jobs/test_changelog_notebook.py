"""notebooks/changelog_cache.ipynb run for real, as a user runs it: ``tierlog notebook run
changelog_cache`` (papermill, the notebook's own embedded broker with its log cleaner,
confluent-kafka producing), small parameters; assertions are on the summary it records and
on the SQLite cache it leaves."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from tierlog.broker.embedded import EmbeddedBroker
from tierlog.jobs.summary import read_summary

REPO = Path(__file__).resolve().parents[2]
TIERLOG = Path(sys.executable).parent / "tierlog"
USERS = 400
UPDATES = 4000
DELETED = 40  # USERS * deleted_fraction
# A run takes 15-30 s (kernel start, broker start, a cleaner worker spawned); these only
# stop a hang.
CELL_TIMEOUT_S = 100
RUN_TIMEOUT_S = 300


def run_notebook(
    tmp_path: Path, *params: str, env: dict[str, str] | None = None
) -> tuple[Path, dict[str, object]]:
    """``tierlog notebook run changelog_cache`` with the small parameters and ``params``:
    the output notebook and its summary."""
    result = subprocess.run(
        [
            str(TIERLOG), "notebook", "run", "changelog_cache",
            "--notebooks-dir", str(REPO / "notebooks"), "--runs-dir", str(tmp_path / "runs"),
            "--timeout-s", str(CELL_TIMEOUT_S),
            "-p", "users", str(USERS), "-p", "updates", str(UPDATES),
            "-p", "deleted_fraction", "0.1", "-p", "data_dir", str(tmp_path / "data"),
            *params,
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    output = tmp_path / result.stdout.strip().splitlines()[-1]
    return output, read_summary(output)


def test_changelog_cache_rebuilds_the_expected_state_from_the_cleaned_log(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    output, summary = run_notebook(tmp_path)
    assert summary["matches_expected"] is True
    produced = summary["records_produced"]
    assert produced == UPDATES + DELETED + 1  # and one sign-up, which rolls the segment
    assert summary["records_before"] == produced  # nothing cleaned while the lag held
    # One record per key is left: each remaining user's latest address, and the deleted
    # users' tombstones (delete.retention.ms keeps them a day).
    assert summary["records_after"] < produced
    assert summary["max_records_per_key_after"] == 1
    assert summary["tombstones_after"] == summary["deleted_users"] == DELETED
    assert summary["keys_rebuilt"] == summary["sqlite_rows"] == USERS - DELETED + 1
    assert summary["records_after"] == summary["keys_rebuilt"] + summary["tombstones_after"]
    assert 0 < summary["bytes_after"] < summary["bytes_before"] / 3

    database = Path(summary["sqlite_path"])
    assert database == data / "users.db"
    with sqlite3.connect(database) as connection:
        rows = dict(connection.execute("SELECT key, value FROM changelog"))
    assert len(rows) == summary["keys_rebuilt"]
    assert rows[f"user-{USERS}"] == f"user-{USERS}.signup@example.com"

    cells = json.loads(output.read_text())["cells"]
    images = [o for c in cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(images) == 1  # records per key, before and after


def test_the_notebook_runs_against_a_secured_broker(tmp_path: Path) -> None:
    """A broker with only a SASL_SSL listener: every client of the notebook, the cleaner's
    state included, takes TIERLOG_CLIENT_CONFIG's settings."""
    overrides = {"log.dirs": str(tmp_path / "broker"), "log.cleaner.backoff.ms": "100"}
    with EmbeddedBroker(overrides, secure=True) as broker:
        assert broker.security is not None
        config = str(broker.security.client_properties_path)
        _, summary = run_notebook(
            tmp_path, "-p", "bootstrap_servers", broker.bootstrap,
            env={"TIERLOG_CLIENT_CONFIG": config},
        )  # fmt: skip
    assert summary["matches_expected"] is True
    assert summary["max_records_per_key_after"] == 1
    assert summary["records_after"] < summary["records_produced"]
