"""A real tierlog broker in a child process on 127.0.0.1, for tests with real clients."""

from __future__ import annotations

import os
import re
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

STARTED = re.compile(r"tierlog broker \d+ started on port (\d+)")
LISTENER = re.compile(r"tierlog broker \d+ listener (\w+) on port (\d+)")


class BrokerProcess:
    """Start with ``start()``; ``stop()`` sends SIGTERM (clean), ``kill()`` SIGKILL.
    ``fd_limit``: the soft limit of open files the broker starts with (``ulimit -n``)."""

    def __init__(
        self,
        data_dir: Path,
        overrides: dict[str, str] | None = None,
        port: int = 0,
        fd_limit: int | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.overrides = {
            "log.dirs": str(data_dir),
            "listeners": f"PLAINTEXT://127.0.0.1:{port}",
            "group.initial.rebalance.delay.ms": "0",
            **(overrides or {}),
        }
        self.port = port
        # Every listener's port by name, from the broker's start lines.
        self.ports: dict[str, int] = {}
        self.fd_limit = fd_limit
        self.proc: subprocess.Popen[str] | None = None
        self.log_path = data_dir.parent / f"{data_dir.name}-broker.log"
        self._log: IO[str] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> BrokerProcess:
        args = [sys.executable, "-m", "tierlog.cli", "broker", "start"]
        for key, value in self.overrides.items():
            args += ["--override", f"{key}={value}"]
        self._log = open(self.log_path, "a")  # noqa: SIM115 - closed in stop()/kill()
        self.proc = subprocess.Popen(
            args,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            preexec_fn=None if self.fd_limit is None else self._limit_fds,
        )
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"broker exited early:\n{self.log_text()}")
            listener = LISTENER.search(line)
            if listener:
                self.ports[listener.group(1)] = int(listener.group(2))
            match = STARTED.search(line)
            if match:
                self.port = int(match.group(1))
                # Pin the ports so a restart comes back where clients expect them.
                self.overrides["listeners"] = (
                    ",".join(f"{name}://127.0.0.1:{port}" for name, port in self.ports.items())
                    or f"PLAINTEXT://127.0.0.1:{self.port}"
                )
                return self
        self.kill()
        raise TimeoutError(f"broker did not start in {timeout}s:\n{self.log_text()}")

    def _limit_fds(self) -> None:
        assert self.fd_limit is not None
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        resource.setrlimit(resource.RLIMIT_NOFILE, (self.fd_limit, hard))

    def open_fds(self) -> int:
        """File descriptors the running broker holds now."""
        assert self.proc is not None
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def stop(self, timeout: float = 30.0) -> int:
        if self.proc is None:
            return 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            # Leave the stacks of what it waits for in its log (threads, then asyncio
            # tasks), then kill it.
            self.proc.send_signal(signal.SIGUSR1)
            self.proc.send_signal(signal.SIGUSR2)
            time.sleep(1)
            self.proc.kill()
            code = self.proc.wait()
        self._close()
        return code

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._close()

    def _close(self) -> None:
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()
        self.proc = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def log_text(self) -> str:
        return self.log_path.read_text() if self.log_path.exists() else ""

    def metrics_port(self) -> int:
        """The port its metrics endpoint (``metrics.http.port=0``) took, from its log; the
        last one, since a restarted broker appends to the same log."""
        found = re.findall(r"metrics on http://[^:]+:(\d+)/", self.log_text())
        assert found, f"{self.data_dir.name}: the broker serves no metrics"
        return int(found[-1])
