"""Running tierlog's command line as a user does, in tests: the ``tierlog`` script of this
venv in a subprocess from the repository's top directory, and the one line an expected
failure prints (``tierlog.util.cli_errors``: ``tierlog: <cause and fix>``, exit 1, no
traceback)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

TIERLOG = str(Path(sys.executable).with_name("tierlog"))
REPO = Path(__file__).resolve().parents[1]


def run(*args: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdin=subprocess.DEVNULL,
    )


def one_line_failure(
    result: subprocess.CompletedProcess[str], prog: str = "tierlog", code: int = 1
) -> str:
    """The failure's line: the last on stderr (a broker logs its start-up before it)."""
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    line = result.stderr.rstrip("\n").splitlines()[-1]
    assert line.startswith(f"{prog}: "), result.stderr
    return line


def closed_port() -> int:
    """A port on 127.0.0.1 that refuses connections (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port
