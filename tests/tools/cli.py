"""Run the real ``tierlog`` command in a subprocess, as a user would."""

from __future__ import annotations

import os
import subprocess
import sys

# Every CLI call in these tests finishes in a second or two; this only stops a hang.
CALL_TIMEOUT = 30.0


def tierlog(
    *args: str, stdin: str | None = None, timeout: float = CALL_TIMEOUT
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tierlog.cli", *args],
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


class Cli:
    """``tierlog`` with ``--bootstrap-server`` added to every call."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def run(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return tierlog(*args, "--bootstrap-server", self.bootstrap, stdin=stdin)

    def ok(self, *args: str, stdin: str | None = None) -> str:
        """stdout of a call that must succeed."""
        result = self.run(*args, stdin=stdin)
        assert result.returncode == 0, f"tierlog {' '.join(args)}:\n{result.stderr}"
        return result.stdout

    def fails(self, *args: str, stdin: str | None = None) -> str:
        """stderr of a call that must fail cleanly: exit code 1, a message, no traceback."""
        result = self.run(*args, stdin=stdin)
        assert result.returncode == 1, (result.returncode, result.stdout, result.stderr)
        assert "Traceback" not in result.stderr, result.stderr
        assert result.stderr.startswith("tierlog: "), result.stderr
        return result.stderr
