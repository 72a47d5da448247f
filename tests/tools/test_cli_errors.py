"""Expected failures of the entry points are one line naming the cause and the fix, exit 1
(tierlog.util.cli_errors, and tierlog.tools.errors for starting a broker); the traceback
only with --verbose. Real processes throughout."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.broker.harness import BrokerProcess
from tests.cli import TIERLOG, closed_port, one_line_failure, run


@pytest.fixture
def running(tmp_path: Path) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        yield broker
    finally:
        broker.stop()


def start_broker(data_dir: Path, port: int, *extra: str) -> subprocess.CompletedProcess[str]:
    return run(
        TIERLOG,
        "broker",
        "start",
        "--override",
        f"log.dirs={data_dir}",
        "--override",
        f"listeners=PLAINTEXT://127.0.0.1:{port}",
        *extra,
    )


def test_broker_started_twice_on_one_data_dir(running: BrokerProcess) -> None:
    line = one_line_failure(start_broker(running.data_dir, 0))
    assert f"{running.data_dir} is in use by another process" in line
    assert "a broker is already running on this data dir" in line
    assert "--override log.dirs=DIR" in line


def test_port_already_taken(running: BrokerProcess, tmp_path: Path) -> None:
    line = one_line_failure(start_broker(tmp_path / "other", running.port))
    assert f"cannot listen on 127.0.0.1:{running.port}" in line
    assert "already in use" in line
    assert "--override listeners=PLAINTEXT://127.0.0.1:PORT" in line


def test_verbose_adds_the_traceback(running: BrokerProcess) -> None:
    result = start_broker(running.data_dir, 0, "--verbose")
    assert result.returncode == 1
    assert "Traceback" in result.stderr
    assert "LogDirInUseError" in result.stderr
    assert result.stderr.rstrip().splitlines()[-1].startswith("tierlog: ")


@pytest.mark.parametrize(
    "command",
    [
        ["topics", "create", "t"],
        ["topics", "list"],
        ["topics", "describe"],
        ["groups", "list"],
        ["consume", "t", "--max-messages", "1"],
        ["cluster", "status"],
    ],
)
def test_client_commands_fail_fast_on_connection_refused(command: list[str]) -> None:
    bootstrap = f"127.0.0.1:{closed_port()}"
    started = time.monotonic()
    result = run(TIERLOG, *command, "--bootstrap-server", bootstrap)
    # librdkafka alone waits out request.timeout.ms (30 s) for a refusal that took 0 ms.
    assert time.monotonic() - started < 10
    line = one_line_failure(result)
    assert f"cannot reach a broker at {bootstrap}: connection refused" in line
    assert "tierlog broker start" in line


def test_pipeline_without_a_broker(tmp_path: Path) -> None:
    bootstrap = f"127.0.0.1:{closed_port()}"
    result = run(
        sys.executable,
        "-m",
        "pipelines.ingest",
        "--config",
        "configs/ingest.toml",
        "--set",
        f"bootstrap_servers={bootstrap}",
        "--set",
        f"remote_url={tmp_path}",  # there, so that only the broker is missing
    )
    line = one_line_failure(result, "python -m pipelines.ingest")
    assert f"cannot reach a broker at {bootstrap}: connection refused" in line
    assert "--set bootstrap_servers=HOST:PORT" in line


def test_a_file_that_cannot_be_written_is_one_line() -> None:
    """A data dir (or a file in it) read-only after the start-up checks looked at it:
    one line naming the file (issue 20, item 12), not a traceback."""
    import errno

    from tierlog.tools.errors import explain_broker_start
    from tierlog.util.cli_errors import explain

    def explain_start(exc: OSError) -> object:
        return explain(exc, (explain_broker_start,))

    for code, text in ((errno.EROFS, "Read-only file system"), (errno.EACCES, "Permission denied")):
        found = explain_start(OSError(code, text, "/data/orders-0/leader-epoch-checkpoint"))
        assert found is not None
        assert str(found).startswith(f"cannot write /data/orders-0/leader-epoch-checkpoint: {text}")
    assert explain_start(OSError(errno.EIO, "I/O error", "/data/x")) is None  # a real failure
