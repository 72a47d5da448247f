"""``tierlog demo serve``: a finished demo's data served again by a real broker process, and
its expected failures as one line each (no demo data, already served, port taken)."""

from __future__ import annotations

import io
import os
import shutil
import sys
from pathlib import Path

import pytest

from tests.background import Background
from tests.remote.conftest import free_port
from tests.tools.cli import tierlog
from tierlog.tools.demo import run_demo

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished broker-only demo: topic activity, 4 partitions, part of it offloaded (with
    fewer events nothing is, and the demo waits its full offload timeout)."""
    data_dir = tmp_path_factory.mktemp("served") / "demo"
    run_demo(data_dir, io.StringIO(), events=60_000)
    return data_dir


def serve(data_dir: Path, port: int, log: Path) -> Background:
    command = f"{sys.executable} -m tierlog.cli demo serve --data-dir {data_dir} --port {port}"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return Background(command, log.parent, env, ready=f"started on port {port}", log=log)


def one_line_failure(*args: str) -> str:
    result = tierlog(*args)
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("tierlog: "), result.stderr
    return result.stderr


def test_serve_brings_the_demo_topic_and_its_remote_tier_back(
    demo_dir: Path, tmp_path: Path
) -> None:
    port = free_port()
    bootstrap = f"127.0.0.1:{port}"
    with serve(demo_dir, port, tmp_path / "serve.log") as server:
        server.wait_ready()
        assert f"remote tier {(demo_dir / 'logs' / 'remote').resolve().as_uri()}" in (
            server.output()
        )
        described = tierlog("topics", "describe", "activity", "--bootstrap-server", bootstrap)
        assert described.returncode == 0, described.stderr
        assert "PartitionCount: 4" in described.stdout
        assert "remote.storage.enable=true" in described.stdout
        consumed = tierlog(
            "consume", "activity", "--from-beginning", "--max-messages", "3",
            "--bootstrap-server", bootstrap,
        )  # fmt: skip
        assert consumed.returncode == 0, consumed.stderr
        assert len(consumed.stdout.splitlines()) == 3

        # The same data twice: refused before anything starts, naming the lock.
        again = one_line_failure(
            "demo", "serve", "--data-dir", str(demo_dir), "--port", str(free_port())
        )
        assert "already served by a running broker" in again
        # Another copy of the data on the taken port: the fix is --port.
        copy = tmp_path / "copy"
        shutil.copytree(demo_dir, copy, ignore=shutil.ignore_patterns(".lock"))
        taken = one_line_failure("demo", "serve", "--data-dir", str(copy), "--port", str(port))
        assert f"cannot listen on 127.0.0.1:{port}" in taken and "--port PORT" in taken

        assert server.interrupt() == 0, server.output()  # Ctrl-C stops it cleanly
    assert "stopped cleanly" in server.output()


def test_serve_without_demo_data_says_run_the_demo_first(tmp_path: Path) -> None:
    missing = tmp_path / "nothing"
    message = one_line_failure("demo", "serve", "--data-dir", str(missing))
    assert f"no demo data in {missing}" in message and "run `make demo`" in message
    # --data-dir before `serve` is the same option.
    before = one_line_failure("demo", "--data-dir", str(missing), "serve")
    assert f"no demo data in {missing}" in before
